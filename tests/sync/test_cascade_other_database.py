"""Cascades whose parent table is in another database of the same server (issue 36 item 1),
on servers whose log lacks the rows a foreign key's rule changes (MariaDB; MySQL 9.7 with
``innodb_native_foreign_keys=ON``): sync reads that table's row changes from the log, only
the columns the foreign keys reference, keyed ``database.table`` (plan/cascade_parents.py),
and applies the rules to the mapped children.

* ``team`` of another database, parent of ``player`` (a hash with an index on the foreign
  key, ``SET NULL`` / ``ON UPDATE CASCADE``) and of ``membership`` (the join table ``init``
  drafts, ``as: none``); a ``team`` of the source's database too, with the same ids, left out
  and parent of ``roster``: random writes with DELETEs and key UPDATEs of both, an ALTER of
  the other database's table between two runs, ``verify`` 0 and every key equal to a fresh
  ``migrate``'s (a ``team`` taken for the other would change the wrong children);
* a RENAME of the other database's table stops ``sync`` (exit 1) before it;
* an account that cannot read the other database is refused (exit 2), naming the grant.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import redis
from typer.testing import CliRunner

from migrator.cli import app
from migrator.commands import init, validate
from migrator.commands.sync import sync
from migrator.mapping.loader import parse_mapping
from migrator.reports import SchemaChanged
from migrator.sync.figures import SyncFigures
from tests.services import create_database, drop_database, new_database_name
from tests.sync.helpers import RandomTransactions, stopped_by
from tests.sync.test_cascade_images import (
    ONLY_MARIADB,
    _on_innodb_fk_mysql,
    _rows,
    equals_a_fresh_migrate,
)
from tests.sync.test_cascade_images import mariadb_db as mariadb_db
from tests.sync.test_cascade_keys import innodb_fk_mysql as innodb_fk_mysql

_ids = iter(range(9900, 9950))

SCHEMA = """
CREATE TABLE {other}.team (id INT PRIMARY KEY, name VARCHAR(20));
CREATE TABLE team (id INT PRIMARY KEY, label VARCHAR(20));
CREATE TABLE roster (id INT PRIMARY KEY, team_id INT NOT NULL, KEY (team_id),
  CONSTRAINT fk_roster FOREIGN KEY (team_id) REFERENCES team (id)
  ON DELETE CASCADE ON UPDATE CASCADE);
CREATE TABLE player (id INT PRIMARY KEY, name VARCHAR(20), team_id INT NULL, KEY (team_id),
  CONSTRAINT fk_player FOREIGN KEY (team_id) REFERENCES {other}.team (id)
  ON DELETE SET NULL ON UPDATE CASCADE);
CREATE TABLE membership (player_id INT NOT NULL, team_id INT NOT NULL,
  PRIMARY KEY (player_id, team_id), KEY (team_id),
  CONSTRAINT fk_m_player FOREIGN KEY (player_id) REFERENCES player (id)
  ON DELETE CASCADE ON UPDATE CASCADE,
  CONSTRAINT fk_m_team FOREIGN KEY (team_id) REFERENCES {other}.team (id)
  ON DELETE CASCADE ON UPDATE CASCADE);
"""
DROP = "DROP TABLE IF EXISTS membership, player, roster, team"  # before the other database


class Writes(RandomTransactions):
    """Random transactions: a new team gets the same id in both databases; each team is
    deleted or renumbered in its own database only."""

    def __init__(self, db: Any, seed: int, other: str) -> None:
        super().__init__(db, seed)
        self.other = other

    def ids(self, table: str) -> list[int]:
        with self.conn.cursor() as cur:
            cur.execute(f"SELECT id FROM {table} ORDER BY 1")
            return [r[0] for r in cur.fetchall()]

    def step(self) -> str:
        r, o = self.rng, f"`{self.other}`.team"
        theirs, ours, players = self.ids(o), self.ids("team"), self.ids("player")
        choice = r.randrange(16)
        if choice < 2 or not theirs or not ours:
            n = self.fresh()
            both = f"INSERT INTO {o} (id, name) VALUES ({n}, 'o{n}'); INSERT INTO team"
            return f"{both} VALUES ({n}, 's')"
        if choice < 4 or not players:
            team = r.choice([*theirs, "NULL"])
            return f"INSERT INTO player VALUES ({self.fresh()}, 'p', {team})"
        if choice < 6:
            return f"INSERT IGNORE INTO membership VALUES ({r.choice(players)}, {r.choice(theirs)})"
        if choice < 7:
            return f"INSERT INTO roster VALUES ({self.fresh()}, {r.choice(ours)})"
        if choice == 7:  # players follow (ON UPDATE CASCADE), membership too
            return f"UPDATE {o} SET id = {self.fresh()} WHERE id = {r.choice(theirs)}"
        if choice == 8:  # players set NULL, memberships go
            return f"DELETE FROM {o} WHERE id = {r.choice(theirs)}"
        if choice == 9:  # the source's team of the same id: only roster follows
            return f"UPDATE team SET id = {self.fresh()} WHERE id = {r.choice(ours)}"
        if choice == 10:
            return f"DELETE FROM team WHERE id = {r.choice(ours)}"
        if choice == 11:
            return f"UPDATE {o} SET name = 'renamed' WHERE id = {r.choice(theirs)}"
        if choice == 12:  # a mapped parent of the join table: logged, its rule applied
            return f"UPDATE player SET id = {self.fresh()} WHERE id = {r.choice(players)}"
        if choice == 13:
            return f"DELETE FROM player WHERE id = {r.choice(players)}"
        return f"UPDATE player SET team_id = {r.choice(theirs)} WHERE id = {r.choice(players)}"

    def execute(self, cur: Any, sql: str) -> None:
        for statement in sql.split("; "):
            cur.execute(statement)


def _drafted(db: Any) -> str:
    """The mapping ``init`` drafts, with the source's ``team`` left out (not read back)."""
    text = init(db.url).render()
    head, _, rest = text.partition("\n  team:\n")
    assert "counter: team:id" in rest and "  # team:" in head
    return head.rsplit("\n  # team:", 1)[0] + "\n"


def _other_database(db: Any, redis_url: str, redis_client: redis.Redis, tmp_path: Path) -> None:
    other = create_database(db.server_url, new_database_name())
    work: Writes | None = None
    try:
        db.run(SCHEMA.format(other=f"`{other.name}`"))
        work = Writes(db, 1, other.name)
        work.run(60)
        text = _drafted(db)
        mapping = parse_mapping(text, name="otherdb")
        join = next(t for t in mapping.tables if t.name == "membership")
        assert join.kind == "none" and join.sets and not join.references  # the draft's shape
        player = next(t for t in mapping.tables if t.name == "player")
        assert ["team_id"] in [list(i.columns) for i in player.indexes] and not player.references
        path = tmp_path / "otherdb.yaml"
        path.write_text(text)
        problems = validate(path, source=db.url).problems
        assert not [p for p in problems if "sync" in p.message], problems
        sid = next(_ids)
        run = {"source": db.url, "target": redis_url, "until_caught_up": True}
        sync(mapping, server_id=sid, **run)  # type: ignore[arg-type]
        for k in range(3):
            work.run(50)
            if k == 1:  # keeps the referenced column: followed on
                other.run("ALTER TABLE team ADD COLUMN note VARCHAR(5), MODIFY name VARCHAR(30)")
            figures = SyncFigures()
            report = sync(mapping, server_id=sid, figures=figures, **run)  # type: ignore[arg-type]
            assert report.stopped == "caught up"
            # read, and counted under its key; the source's team under its name
            assert figures.row_changes[(f"{other.name}.team", "delete")] > 0, figures.row_changes
            assert figures.row_changes[("team", "delete")] > 0, figures.row_changes
        keys = equals_a_fresh_migrate(db, mapping, redis_url, redis_client)
        assert not [k for k in keys if k.startswith(b"team:")]
        # the rules did something: players set NULL and moved, rosters of the source's team
        players = _rows(db, "SELECT id, team_id FROM player")
        assert [i for i, t in players if t is None] and [i for i, t in players if t is not None]
        theirs = {t for (t,) in _rows(db, f"SELECT id FROM `{other.name}`.team")}
        ours = {t for (t,) in _rows(db, "SELECT id FROM team")}
        assert theirs != ours  # the two teams parted: each deleted and renumbered apart
        rosters = _rows(db, "SELECT team_id FROM roster")
        assert len(rosters) > 3 and {t for (t,) in rosters} <= ours
        assert len(_rows(db, "SELECT * FROM membership")) > 3
        _renamed(db, other, mapping, sid, redis_url, redis_client)
    finally:
        if work is not None:  # an open transaction would block the DROP
            work.close()
        db.run(DROP)
        drop_database(db.server_url, other.name)


def _renamed(
    db: Any, other: Any, mapping: Any, sid: int, redis_url: str, redis_client: redis.Redis
) -> None:
    """A RENAME of the other database's parent while sync follows stops it before it."""
    stopped = stopped_by(
        mapping,
        lambda: other.run("RENAME TABLE team TO team_old; DELETE FROM team_old"),
        source=db.url, target=redis_url, server_id=sid,
    )  # fmt: skip
    assert isinstance(stopped, SchemaChanged), stopped
    message = " ".join(str(stopped).split())
    key = f"{other.name}.team"
    assert f"table '{key}' was dropped or renamed" in message, message
    assert f"the mapping's children of {key} (its cascading foreign keys)" in message
    assert _rows(db, "SELECT COUNT(*) FROM player WHERE team_id IS NOT NULL")[0][0] == 0
    held = [redis_client.hget(k, "team_id") for k in redis_client.scan_iter("player:[0-9]*")]
    assert [v for v in held if v is not None]  # nothing after the RENAME applied


def _no_grant(db: Any, redis_url: str, tmp_path: Path) -> None:
    """An account that cannot read the other database: refused (exit 2), naming the grant."""
    other = create_database(db.server_url, new_database_name())
    user = f"nosel{next(_ids)}"
    try:
        db.run(SCHEMA.format(other=f"`{other.name}`"))
        db.run(f"CREATE USER '{user}'@'%' IDENTIFIED BY 'pw'")
        db.run(f"GRANT ALL ON `{db.name}`.* TO '{user}'@'%'")
        db.run(f"GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO '{user}'@'%'")
        url = db.url.replace("://root@", f"://{user}:pw@", 1)
        assert url != db.url
        path = tmp_path / "nogrant.yaml"
        path.write_text("version: 1\ntables:\n  player:\n    indexes: [team_id]\n")
        args = ["sync", str(path), "--source", url, "--target", redis_url,
                "--until-caught-up", "--server-id", str(next(_ids))]  # fmt: skip
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2, result.output
        message = " ".join(result.output.split())
        assert f"the schema of the parent table {other.name}.team cannot be read" in message
        assert f"GRANT SELECT ON `{other.name}`.*" in message
    finally:
        db.run(f"DROP USER IF EXISTS '{user}'@'%'; {DROP}")
        drop_database(db.server_url, other.name)


@pytest.mark.engine("mariadb", why=ONLY_MARIADB)
def test_a_parent_in_another_database_has_its_cascades_followed(  # type: ignore[no-untyped-def]
    mariadb_db, redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    _other_database(mariadb_db, redis_url, redis_client, tmp_path)


def test_a_parent_in_another_database_has_its_cascades_followed_on_mysql_innodb_fk(  # type: ignore[no-untyped-def]
    innodb_fk_mysql, redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    _on_innodb_fk_mysql(
        innodb_fk_mysql, lambda db: _other_database(db, redis_url, redis_client, tmp_path)
    )


@pytest.mark.engine("mariadb", why=ONLY_MARIADB)
def test_a_parent_in_a_database_the_account_cannot_read_is_refused(  # type: ignore[no-untyped-def]
    mariadb_db, redis_url: str, tmp_path: Path
) -> None:
    _no_grant(mariadb_db, redis_url, tmp_path)


def test_a_parent_in_a_database_the_account_cannot_read_is_refused_on_mysql_innodb_fk(  # type: ignore[no-untyped-def]
    innodb_fk_mysql, redis_url: str, tmp_path: Path
) -> None:
    _on_innodb_fk_mysql(innodb_fk_mysql, lambda db: _no_grant(db, redis_url, tmp_path))
