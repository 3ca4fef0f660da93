"""Cascades whose parent table is left out of the mapping (issue 36 item 1), on servers whose
log lacks the rows a foreign key's rule changes (MariaDB; MySQL 9.7 with
``innodb_native_foreign_keys=ON``): sync reads the parent's row changes all the same, only
the columns its foreign keys reference, writes nothing for it, and applies the rule to the
mapped children (plan/cascade.py).

* the ticketing schema of tests/sync/test_cascade_images.py with ``ticket`` left out (``tag``
  mapped), on MySQL 9.7's default (the cascaded rows logged) as well: random writes,
  parents' DELETEs and key UPDATEs, child inserts, and an ALTER of the unmapped parent
  between two runs; ``verify`` 0 and Redis equal to a fresh ``migrate``;
* a cascade of a cascade through a table left out is refused by ``sync`` and ``validate``,
  naming the middle table and the fix; mapping the middle table too is followed; an ALTER of
  the table left out is followed on, a RENAME of it stops ``sync`` (exit 1);
* the text keys under a collation of tests/sync/test_cascade_collations.py with every parent
  left out: the parent's key is read from the log and weighed by the server as a mapped
  one's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import redis
from typer.testing import CliRunner

from migrator.cli import app
from migrator.commands import validate
from migrator.commands.sync import sync
from migrator.mapping.loader import parse_mapping
from migrator.reports import SchemaChanged
from migrator.sync.figures import SyncFigures
from tests.sync.helpers import stopped_by
from tests.sync.test_cascade_collations import SCHEMA as COLLATED
from tests.sync.test_cascade_collations import Writes as CollatedWrites
from tests.sync.test_cascade_images import (
    ONLY_MARIADB,
    Writes,
    _load,
    _on_innodb_fk_mysql,
    _rows,
    equals_a_fresh_migrate,
)
from tests.sync.test_cascade_images import mariadb_db as mariadb_db
from tests.sync.test_cascade_keys import _logged
from tests.sync.test_cascade_keys import innodb_fk_mysql as innodb_fk_mysql

_ids = iter(range(9800, 9900))

# ticket is not mapped: its children are found through an index (comment, and watch, whose
# hash leaves ticket_id out: row images), or the images' SET per value (ticket_tag, link)
UNMAPPED = """
version: 1
tables:
  tag: {}
  ticket_tag: {}
  comment:
    indexes: [ticket_id]
  watch:
    columns: [who]
    indexes: [ticket_id]
  link:
    as: columns
"""


def _unmapped_parent(db: Any, redis_url: str, redis_client: redis.Redis, tmp_path: Path) -> None:
    _load(db)
    logged = _logged(db)
    path = tmp_path / "unmapped.yaml"
    path.write_text(UNMAPPED)
    problems = validate(path, source=db.url).problems
    assert not [p for p in problems if "sync" in p.message], problems  # nothing against it
    mapping = parse_mapping(UNMAPPED, name="unmapped")
    sid = next(_ids)
    run = {"source": db.url, "target": redis_url, "until_caught_up": True}
    sync(mapping, server_id=sid, **run)  # type: ignore[arg-type]
    work = Writes(db, 4)
    for k in range(3):
        work.run(40)
        if k == 1:  # a DDL of the parent left out: judged by the columns read, followed on
            db.run("ALTER TABLE ticket MODIFY title VARCHAR(60) NOT NULL, ADD KEY (opened)")
        figures = SyncFigures()
        report = sync(mapping, server_id=sid, figures=figures, **run)  # type: ignore[arg-type]
        assert report.stopped == "caught up"
        # the parent's row changes are read, and counted under its own name, where the log
        # lacks the cascaded rows; MySQL 9.7's default logs them: the parent is not read
        read = figures.row_changes[("ticket", "delete")]
        assert read == 0 if logged else read > 0, figures.row_changes
    work.close()
    keys = equals_a_fresh_migrate(db, mapping, redis_url, redis_client)
    assert not [k for k in keys if k.startswith(b"ticket:")]  # nothing of the parent itself
    # the rules did something: children of deleted and renumbered tickets, links set NULL
    tickets = {t for (t,) in _rows(db, "SELECT id FROM ticket")}
    comments = _rows(db, "SELECT id, ticket_id FROM comment")
    assert len(comments) > 5 and {t for _, t in comments} <= tickets
    links = _rows(db, "SELECT id, ticket_id FROM link")
    assert [i for i, t in links if t is None] and [i for i, t in links if t is not None]
    assert len(keys[b"migrator:unmapped:rows:link"][1]) == len(links)


def test_a_parent_left_out_of_the_mapping_has_its_cascades_followed(  # type: ignore[no-untyped-def]
    binlog_db, redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """MariaDB: the rules applied from the parent's change; MySQL 9.7's default: logged."""
    _unmapped_parent(binlog_db, redis_url, redis_client, tmp_path)


def test_a_parent_left_out_has_its_cascades_followed_on_mysql_with_innodb_foreign_keys(  # type: ignore[no-untyped-def]
    innodb_fk_mysql, redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    _on_innodb_fk_mysql(
        innodb_fk_mysql, lambda db: _unmapped_parent(db, redis_url, redis_client, tmp_path)
    )


# -- a cascade of a cascade through a table left out ------------------------------------------

THREE = """
CREATE TABLE top (id INT PRIMARY KEY);
CREATE TABLE middle (id INT PRIMARY KEY, top_id INT NOT NULL,
  CONSTRAINT fk_middle_top FOREIGN KEY (top_id) REFERENCES top (id) ON DELETE CASCADE);
CREATE TABLE bottom (id INT PRIMARY KEY, middle_id INT NOT NULL, KEY (middle_id),
  CONSTRAINT fk_bottom_middle FOREIGN KEY (middle_id) REFERENCES middle (id)
  ON DELETE CASCADE);
INSERT INTO top VALUES (1), (2);
INSERT INTO middle VALUES (1, 1), (2, 1), (3, 2);
INSERT INTO bottom VALUES (1, 1), (2, 2), (3, 3);
"""


def _refused(path: Path, mapping: str, db: Any, redis_url: str) -> tuple[str, list[str]]:
    """``mapping`` written at ``path``; sync refuses it (exit 2): its message on one line, and
    the command line (to run again)."""
    path.write_text(mapping)
    args = ["sync", str(path), "--source", db.url, "--target", redis_url,
            "--until-caught-up", "--server-id", str(next(_ids))]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    return " ".join(result.output.split()), args


def _middle(db: Any, redis_url: str, redis_client: redis.Redis, tmp_path: Path) -> None:
    db.run(THREE)
    path = tmp_path / "m.yaml"
    message, args = _refused(path, "version: 1\ntables:\n  top: {}\n  bottom: {}\n", db, redis_url)
    why = (
        "bottom: foreign key fk_bottom_middle (middle_id) -> middle ON DELETE CASCADE (sync "
        "cannot apply it exactly: the parent table middle is not in the mapping and its own "
        "rows change by its foreign key fk_middle_top -> top ON DELETE CASCADE, which the "
        "binary log does not carry: a cascade of a cascade through a table sync does not hold)"
    )
    assert why in message and "map the parent table too" in message
    assert redis_client.dbsize() == 0  # refused before anything is written
    warned = [p for p in validate(path, source=db.url).problems if "sync refuses" in p.message]
    assert [p.path for p in warned] == ["tables.bottom"]
    assert why.split(": ", 1)[1] in " ".join(warned[0].message.split())
    assert "map the parent table too" in (warned[0].hint or "")
    # the middle table mapped as: none, the least the hint names: as: none reads no columns:
    # of its own, so its hint names a references entry, which is then followed
    path.write_text("version: 1\ntables:\n  middle: {as: none}\n  bottom: {}\n")
    message = _refused(path, path.read_text(), db, redis_url)[0]
    assert "top_id are not read by the mapping" in message and "add a references entry" in message
    path.write_text("version: 1\ntables:\n  middle:\n    as: none\n    references:\n"
                    "      - {columns: [top_id], table: top}\n  bottom: {}\n")  # fmt: skip
    assert CliRunner().invoke(app, args).exit_code == 0
    db.run("DELETE FROM top WHERE id = 1")
    assert CliRunner().invoke(app, args).exit_code == 0
    assert sorted(redis_client.scan_iter("bottom:[0-9]*")) == [b"bottom:3"]
    assert not list(redis_client.scan_iter("middle:[0-9]*"))  # no keys of its rows
    verified = CliRunner().invoke(app, ["verify", str(path), "--source", db.url,
                                        "--target", redis_url])  # fmt: skip
    assert verified.exit_code == 0, verified.output
    # the middle table mapped as a hash (top still left out): followed, two levels down
    db.run("INSERT INTO top VALUES (1); INSERT INTO middle VALUES (1, 1), (2, 1);"
           "INSERT INTO bottom VALUES (1, 1), (2, 2); DELETE FROM top WHERE id = 1")  # fmt: skip
    path.write_text("version: 1\ntables:\n  middle: {}\n  bottom: {}\n")
    assert CliRunner().invoke(app, [*args, "--reload"]).exit_code == 0
    assert sorted(redis_client.scan_iter("bottom:[0-9]*")) == [b"bottom:3"]
    assert sorted(redis_client.scan_iter("middle:[0-9]*")) == [b"middle:3"]
    # a DDL of the table left out: an ALTER that keeps its referenced columns is followed on,
    # a RENAME stops (exit 1) before it, naming the table
    db.run("ALTER TABLE top ADD COLUMN note VARCHAR(5); INSERT INTO top VALUES (3, 'n');"
           "INSERT INTO middle VALUES (4, 3); DELETE FROM top WHERE id = 2")  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert sorted(redis_client.scan_iter("middle:[0-9]*")) == [b"middle:4"]
    assert not list(redis_client.scan_iter("bottom:[0-9]*"))
    mapping = parse_mapping(path.read_text(), name="m")
    stopped = stopped_by(
        mapping,
        lambda: db.run("RENAME TABLE top TO top_old; DELETE FROM top_old"),
        source=db.url, target=redis_url, server_id=int(args[-1]),
    )  # fmt: skip
    assert isinstance(stopped, SchemaChanged), stopped
    message = " ".join(str(stopped).split())
    assert "table 'top' changed at" in message and "table 'top' was dropped or renamed" in message
    assert "the mapping's children of top (its cascading foreign keys)" in message
    assert redis_client.exists("middle:4")  # nothing after the RENAME applied


@pytest.mark.engine("mariadb", why=ONLY_MARIADB)
def test_a_cascade_of_a_cascade_through_a_table_left_out_is_refused_its_ddl_judged(  # type: ignore[no-untyped-def]
    mariadb_db, redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    _middle(mariadb_db, redis_url, redis_client, tmp_path)


def test_a_cascade_of_a_cascade_through_a_table_left_out_is_refused_on_mysql_innodb_fk(  # type: ignore[no-untyped-def]
    innodb_fk_mysql, redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    _on_innodb_fk_mysql(
        innodb_fk_mysql,
        lambda db: _middle(db, redis_url, redis_client, tmp_path),
    )


# -- text keys under a collation, every parent left out ---------------------------------------

LEFT_OUT = """
version: 1
tables:
  book: {}
  resident: {}
  book_city: {}
  coded: {}
  shop: {}
"""


def _collated(db: Any, redis_url: str, redis_client: redis.Redis) -> None:
    db.run(COLLATED)
    work = CollatedWrites(db, 1)
    work.run(60)
    mapping = parse_mapping(LEFT_OUT, name="left_out")
    sid = next(_ids)
    run = {"source": db.url, "target": redis_url, "until_caught_up": True}
    assert sync(mapping, server_id=sid, **run).exit_code == 0  # type: ignore[arg-type]
    for _ in range(2):
        work.run(60)
        assert sync(mapping, server_id=sid, **run).exit_code == 0  # type: ignore[arg-type]
    work.close()
    keys = equals_a_fresh_migrate(db, mapping, redis_url, redis_client)
    assert not [k for k in keys if k.split(b":")[0] in (b"author", b"city", b"code", b"region")]
    assert len([k for k in keys if k.startswith(b"book:")]) > 3


@pytest.mark.engine("mariadb", why=ONLY_MARIADB)
def test_text_keys_under_a_collation_are_followed_with_every_parent_left_out(  # type: ignore[no-untyped-def]
    mariadb_db, redis_url: str, redis_client: redis.Redis
) -> None:
    _collated(mariadb_db, redis_url, redis_client)


def test_text_keys_with_every_parent_left_out_on_mysql_with_innodb_foreign_keys(  # type: ignore[no-untyped-def]
    innodb_fk_mysql, redis_url: str, redis_client: redis.Redis
) -> None:
    _on_innodb_fk_mysql(innodb_fk_mysql, lambda db: _collated(db, redis_url, redis_client))
