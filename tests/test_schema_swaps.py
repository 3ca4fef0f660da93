"""The live schema read while a tool swaps tables (issue 35 item 2): gh-ost's cut-over
(``RENAME TABLE t TO _t_del, _t_gho TO t``) between the listing of the tables and the reads
of one of them made that table vanish mid-read: ``NoSuchTableError``, exit 1 "unexpected
error". The schema is read again; a swap that never ends is exit 3, "run the command again".
The swap is made at a chosen point of the read (SQLAlchemy's ``before_cursor_execute``), on
each engine."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from migrator.commands import migrate
from migrator.errors import EXIT_CONNECT, ConnectError, TableChanged
from migrator.progress import NullProgress
from migrator.source.introspect import SCHEMA_READS, read_schema
from tests.services import MySQLDatabase

TABLES = (
    "CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(20));"
    "CREATE TABLE _t_gho (id INT PRIMARY KEY, name VARCHAR(20), extra INT);"
)


def _swapping(db: MySQLDatabase, times: int) -> tuple[sa.Engine, list[str]]:
    """An engine on ``db`` that, the first ``times`` times a read names a ghost table, swaps
    it in as gh-ost does (and makes a new ghost as the next read begins)."""
    engine = sa.create_engine(db.url)
    swaps: list[str] = []

    @sa.event.listens_for(engine, "before_cursor_execute")
    def swap(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        n = len(swaps)
        if "_t_gho" in statement and n < times:
            run(f"RENAME TABLE t TO _t_del{n}, _t_gho TO t")
            swaps.append(statement)
        elif statement.startswith("SELECT DATABASE()") and 0 < n < times:
            run("CREATE TABLE _t_gho LIKE t")  # the next read begins: a ghost again

    def run(sql: str) -> None:
        other = db.connect(client_flag=0)
        try:
            with other.cursor() as cur:
                cur.execute(sql)
        finally:
            other.close()

    return engine, swaps


def test_a_table_swapped_while_the_schema_is_read_is_read_again(mysql_db: MySQLDatabase) -> None:
    mysql_db.run(TABLES)
    engine, swaps = _swapping(mysql_db, 1)
    try:
        schema = read_schema(engine)
    finally:
        engine.dispose()
    assert swaps, "the read never named the ghost table"
    assert "_t_gho" not in schema.tables and "_t_del0" in schema.tables
    assert [c.name for c in schema.tables["t"].columns] == ["id", "name", "extra"]


def test_tables_that_keep_swapping_are_exit_3_and_run_again(mysql_db: MySQLDatabase) -> None:
    mysql_db.run(TABLES)
    engine, swaps = _swapping(mysql_db, SCHEMA_READS)
    try:
        with pytest.raises(ConnectError) as gone:
            read_schema(engine)
    finally:
        engine.dispose()
    assert len(swaps) == SCHEMA_READS
    assert gone.value.exit_code == EXIT_CONNECT
    assert "run the command again" in (gone.value.hint or "")


class SwapAfterFirst(NullProgress):
    """gh-ost's ghost of ``item`` made and swapped in once ``a``'s first batch is read, in
    a thread of its own (the read holds the tables it has read)."""

    def __init__(self, db: MySQLDatabase) -> None:
        self.db, self.swapped = db, False

    def advance(self, table: str, rows: int) -> None:
        if table == "a" and not self.swapped:
            self.swapped = True
            sql = ("CREATE TABLE _item_gho LIKE item; INSERT INTO _item_gho SELECT * FROM item;"
                   "RENAME TABLE item TO _item_del, _item_gho TO item")  # fmt: skip
            swap = threading.Thread(target=self.db.run, args=(sql,))
            swap.start()
            swap.join(60)


def test_a_swap_under_migrate_s_snapshot_is_exit_3(
    mysql_db: MySQLDatabase, redis_url: str, tmp_path: Path
) -> None:
    """A table swapped in after migrate's one snapshot began cannot be read in it (1412): exit
    3 and "run the command again" (before: exit 2, whose hint says starting again repeats
    it); the same command afterwards loads it."""
    rows = ", ".join(f"({i}, 'n{i}')" for i in range(1, 201))
    mysql_db.run(
        "CREATE TABLE a (id INT PRIMARY KEY, name VARCHAR(20));"
        "CREATE TABLE item (id INT PRIMARY KEY, name VARCHAR(20));"
        f"INSERT INTO a VALUES {rows}; INSERT INTO item VALUES {rows};"
    )
    path = tmp_path / "m.yaml"
    path.write_text("version: 1\noptions:\n  batch_size: 20\ntables:\n  a: {}\n  item: {}\n")
    swapping = SwapAfterFirst(mysql_db)
    with pytest.raises(TableChanged) as changed:
        migrate(path, source=mysql_db.url, target=redis_url, workers=1, progress=swapping)
    assert swapping.swapped and changed.value.exit_code == EXIT_CONNECT
    assert "run the command again" in (changed.value.hint or "")
    assert migrate(path, source=mysql_db.url, target=redis_url, workers=1).exit_code == 0
