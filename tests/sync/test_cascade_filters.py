"""Row filters (``where:``) on the children of foreign keys whose rules the server runs without
logging the rows they change (issue 36 item 1; MariaDB, MySQL 9.7 with
``innodb_native_foreign_keys=ON``).

A ``SET NULL`` or ``ON UPDATE CASCADE`` changes the foreign key's columns only: under a filter
that does not read them no row enters or leaves it, and ``sync`` follows the rule to the rows
Redis holds (a hash child found by its index, an ``as: columns`` child and a ``formats:`` child
by their row images), under random writes that also move rows in and out of the filters; each
run ends with ``verify`` 0 and Redis equal to a fresh ``migrate``. A filter that reads the
foreign key's columns, and one on a parent whose own rows change by such a rule (a cascade of a
cascade through rows Redis does not hold), are followed where the table keeps the images of
the rows its filter leaves out (tests/sync/test_cascade_left_out.py), and refused by ``validate``
and ``sync`` with the fix where it cannot (a sharded source, ``sources:``).
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import redis

from migrator.commands import validate
from migrator.commands.sync import sync
from migrator.errors import MigratorError
from migrator.mapping.loader import parse_mapping
from tests.services import create_database, drop_database, new_database_name
from tests.sync.test_cascade_images import (
    ONLY_MARIADB,
    TICKETS,
    Writes,
    _on_innodb_fk_mysql,
    equals_a_fresh_migrate,
)
from tests.sync.test_cascade_images import innodb_fk_mysql as innodb_fk_mysql
from tests.sync.test_cascade_images import mariadb_db as mariadb_db

_ids = iter(range(8800, 8850))

FILTERED = """
version: 1
tables:
  ticket: {}
  tag: {}
  ticket_tag: {}
  comment:
    where: "body <> 'edited'"
    formats: {at: epoch}
  watch:
    indexes: [ticket_id]
    where: "who = 'w'"
  link:
    as: columns
    where: "label <> 'off'"
"""


class FilteredWrites(Writes):
    """``Writes``, and rows moving in and out of the filters by logged changes."""

    def step(self) -> str:
        r = self.rng
        choice = r.randrange(10)
        if choice == 0:
            tickets = self.ids("ticket")
            if tickets:
                table, column = r.choice([("link", "label"), ("watch", "who")])
                value = r.choice(["'off'", "'w'", "'l'"])
                return f"INSERT INTO {table} VALUES ({self.fresh()}, {r.choice(tickets)}, {value})"
        if choice == 1:
            table, column = r.choice([("link", "label"), ("watch", "who"), ("comment", "body")])
            value = r.choice(["'off'", "'w'", "'l'", "'edited'", "'back'"])
            return f"UPDATE {table} SET {column} = {value} ORDER BY RAND() LIMIT 1"
        return super().step()


#: filters that read the foreign key, in tests no rule can make true for a row they left out:
#: link's SET NULL takes rows out of it (a NULL is not NOT NULL), watch's ON UPDATE CASCADE
#: keeps a key NOT NULL
ON_THE_KEY = FILTERED.replace(
    "where: \"who = 'w'\"", "where: \"who = 'w' AND ticket_id IS NOT NULL\""
).replace("where: \"label <> 'off'\"", "where: \"label <> 'off' AND ticket_id IS NOT NULL\"")


def _filtered(db: Any, redis_url: str, redis_client: redis.Redis, text: str = FILTERED) -> None:
    db.run(TICKETS)
    mapping = parse_mapping(text, name="filtered")
    sid = next(_ids)
    run = {"source": db.url, "target": redis_url, "until_caught_up": True}
    work = FilteredWrites(db, 4)
    work.run(40)
    sync(mapping, server_id=sid, **run)  # type: ignore[arg-type]
    for _ in range(3):
        work.run(70)
        sync(mapping, server_id=sid, **run)  # type: ignore[arg-type]
    work.close()
    keys = equals_a_fresh_migrate(db, mapping, redis_url, redis_client)
    conn = db.connect()
    try:
        with conn.cursor() as cur:  # the filters leave rows out, the rules changed some in
            cur.execute("SELECT SUM(label = 'off'), SUM(ticket_id IS NULL AND label <> 'off') "
                        "FROM link")  # fmt: skip
            off, nulled = cur.fetchone()
            cur.execute("SELECT COUNT(*) FROM watch WHERE who = 'w'")
            (watched,) = cur.fetchone()
    finally:
        conn.close()
    assert off and nulled, (off, nulled)
    assert len([k for k in keys if re.fullmatch(rb"watch:\d+", k)]) == watched > 3
    assert b"migrator:filtered:rows:comment" in keys and b"migrator:filtered:rows:link" in keys
    held = len(redis_client.hkeys(b"migrator:filtered:rows:link"))
    assert held == (db_count(db, "link", "label <> 'off'") - (nulled if text != FILTERED else 0))


def db_count(db: Any, table: str, where: str) -> int:
    conn = db.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT COUNT(*) FROM {table} WHERE {where}")
            return int(cur.fetchone()[0])
    finally:
        conn.close()


@pytest.mark.engine("mariadb", why=ONLY_MARIADB)
def test_filters_off_the_foreign_key_follow_set_null_and_update_cascade(  # type: ignore[no-untyped-def]
    mariadb_db, redis_url: str, redis_client: redis.Redis
) -> None:
    _filtered(mariadb_db, redis_url, redis_client)


def test_filters_off_the_key_follow_set_null_and_update_cascade_on_mysql_with_innodb_foreign_keys(  # type: ignore[no-untyped-def]
    innodb_fk_mysql, redis_url: str, redis_client: redis.Redis
) -> None:
    _on_innodb_fk_mysql(innodb_fk_mysql, lambda db: _filtered(db, redis_url, redis_client))


@pytest.mark.engine("mariadb", why=ONLY_MARIADB)
def test_filters_on_the_key_no_rule_can_pass_follow_set_null_and_update_cascade(  # type: ignore[no-untyped-def]
    mariadb_db, redis_url: str, redis_client: redis.Redis
) -> None:
    """Rows the rules null leave link's filter; none comes in (mapping/filter_rules.py)."""
    _filtered(mariadb_db, redis_url, redis_client, ON_THE_KEY)


def test_filters_on_the_key_follow_the_rules_on_mysql_with_innodb_foreign_keys(  # type: ignore[no-untyped-def]
    innodb_fk_mysql, redis_url: str, redis_client: redis.Redis
) -> None:
    _on_innodb_fk_mysql(
        innodb_fk_mysql, lambda db: _filtered(db, redis_url, redis_client, ON_THE_KEY)
    )


# -- what stays refused: a sharded source's tables keep no images of rows left out ------------

CHAIN = """
CREATE TABLE team (id INT PRIMARY KEY);
CREATE TABLE crew (id INT PRIMARY KEY, team_id INT NOT NULL, active TINYINT NOT NULL,
  KEY (team_id), CONSTRAINT fk_crew_team FOREIGN KEY (team_id) REFERENCES team (id)
  ON DELETE CASCADE);
CREATE TABLE shift (id INT PRIMARY KEY, crew_id INT NULL, KEY (crew_id),
  CONSTRAINT fk_shift_crew FOREIGN KEY (crew_id) REFERENCES crew (id)
  ON DELETE SET NULL ON UPDATE CASCADE);
"""
REFUSED = {
    # the filter reads the foreign key's columns: a SET NULL can bring a row into it
    "  team: {}\n  crew: {}\n  shift:\n    where: \"crew_id IS NULL\"\n":
        ("shift", "reads the foreign key's columns (crew_id) and can keep a row whose foreign "
         "key is NULL: its ON DELETE SET NULL", "test the foreign key's columns only for NULL"),
    # ... and compares its values: an ON UPDATE CASCADE can bring a row into it
    "  team: {}\n  crew: {}\n  shift:\n    where: \"crew_id IN (1, 2)\"\n":
        ("shift", "compares the foreign key's values: its ON UPDATE CASCADE",
         "only in tests a NULL cannot pass"),
    # a filtered parent whose own rows go by ON DELETE CASCADE: its left-out rows' children
    "  team: {}\n  crew:\n    where: \"active = 1\"\n  shift: {}\n":
        ("shift", "the parent table crew has a row filter", "drop where: from crew"),
}  # fmt: skip


@pytest.mark.engine("mariadb", why=ONLY_MARIADB)
@pytest.mark.parametrize("tables", list(REFUSED))
def test_filters_sync_cannot_follow_on_a_sharded_source_are_refused_with_the_fix(  # type: ignore[no-untyped-def]
    mariadb_db, redis_url: str, tables: str, tmp_path
) -> None:
    """Over shards (sources:) a table keeps no images of the rows its filter leaves out: the
    shapes tests/sync/test_cascade_left_out.py follows are refused there by validate --sync
    and sync, with the fix."""
    other = create_database(mariadb_db.server_url, new_database_name())
    try:
        for db in (mariadb_db, other):
            db.run(CHAIN)
        table, why, fix = REFUSED[tables]
        text = (f"version: 1\nsources:\n  - {{name: east, url: '{mariadb_db.url}'}}\n"
                f"  - {{name: west, url: '{other.url}'}}\ntables:\n{tables}")  # fmt: skip
        path = tmp_path / "m.yaml"
        path.write_text(text)
        judged = validate(path, for_sync=True)  # validate --sync: the refusal is an error
        refusals = [p for p in judged.errors if p.path == f"tables.{table}"]
        assert judged.exit_code == 2 and len(refusals) == 1, [str(p) for p in judged.problems]
        assert why in refusals[0].message and "sharded source" in refusals[0].message
        assert fix in str(refusals[0].hint)
        mapping = parse_mapping(text, name="refused")
        with pytest.raises(MigratorError) as e:
            sync(mapping, target=redis_url, until_caught_up=True, server_id=next(_ids),
                 shard="east")  # fmt: skip
        assert e.value.exit_code == 2 and why in str(e.value) and fix in str(e.value.hint)
    finally:
        drop_database(mariadb_db.server_url, other.name)
