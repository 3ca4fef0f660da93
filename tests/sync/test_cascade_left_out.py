"""Row filters a foreign key's unlogged rule can bring a row into, and filtered parents whose own
rows change by such a rule (issue 36; MariaDB, MySQL 9.7 with ``innodb_native_foreign_keys=ON``):
such a table keeps the row images of the rows its filter leaves out as well
(mapping/filter_rules.py ``keeps_left_out``, plan/row_images.py), so ``sync`` finds them when
the rule fires and filters each again with its new values. On MySQL 9.7's default the cascaded
rows are logged, and the images are kept from them like any other change.

* ``shift`` (a hash with an index on its foreign key) under ``crew_id IS NULL OR note = 'x'``:
  its ``ON DELETE SET NULL`` brings rows into the filter;
* ``duty`` (``as: columns``) under ``crew_id < ... OR crew_id > ...``: its ``ON UPDATE CASCADE``
  moves rows in and out by their new key;
* ``crew``, their parent, under ``active = 1``, whose own rows go with their team (``ON DELETE
  CASCADE``) and change their ``team_id`` (``ON UPDATE CASCADE``): the children of the crews
  its filter leaves out are found through their images (a cascade of a cascade).

Random writes move rows in and out of every filter, delete parents and change their keys, the
tables once read again online (``sync --resnapshot``); each run ends with ``verify`` 0 and
every key, the images included, equal to a fresh ``migrate``'s; ``verify`` then finds a
left-out row's image and SET member missing and a stray image, and ``verify --fix`` repairs
them. A ``migrate`` by two workers in chunks writes the same keys; ``dry-run`` counts the
images. Last, a crew with shifts of every kind, then its team
deleted. The same with ``expire:`` on ``shift`` (past, far and no moments): the images of the
rows its filter leaves out are kept whatever their moment, those of the rows it keeps until it
passes.
"""

from __future__ import annotations

from typing import Any

import redis

from migrator.commands import dry_run, migrate, validate, verify
from migrator.commands.sync import sync
from migrator.mapping.loader import parse_mapping
from migrator.mapping.model import Mapping
from migrator.plan.expiry import encode_row
from tests.sync.test_cascade_images import (
    Writes,
    _keys,
    _on_innodb_fk_mysql,
    _rows,
    equals_a_fresh_migrate,
)
from tests.sync.test_cascade_images import innodb_fk_mysql as innodb_fk_mysql

_ids = iter(range(12200, 12230))

CREWS = """
CREATE TABLE team (id INT PRIMARY KEY, name VARCHAR(20) NOT NULL);
CREATE TABLE crew (id INT PRIMARY KEY, team_id INT NOT NULL, active TINYINT NOT NULL,
  KEY (team_id), CONSTRAINT fk_crew_team FOREIGN KEY (team_id) REFERENCES team (id)
  ON DELETE CASCADE ON UPDATE CASCADE);
CREATE TABLE shift (id INT PRIMARY KEY, crew_id INT NULL, note VARCHAR(20), ends DATETIME NULL,
  KEY (crew_id),
  CONSTRAINT fk_shift_crew FOREIGN KEY (crew_id) REFERENCES crew (id)
  ON DELETE SET NULL ON UPDATE CASCADE);
CREATE TABLE duty (id INT PRIMARY KEY, crew_id INT NULL, hours INT NOT NULL, KEY (crew_id),
  CONSTRAINT fk_duty_crew FOREIGN KEY (crew_id) REFERENCES crew (id)
  ON DELETE SET NULL ON UPDATE CASCADE);
"""

MAPPING = """
version: 1
tables:
  team: {}
  crew:
    indexes: [team_id]
    where: "active = 1"
  shift:
    indexes: [crew_id]
    where: "crew_id IS NULL OR note = 'x'"
  duty:
    as: columns
    where: "crew_id < 10025 OR crew_id > 40040"
"""
#: shift with expire: too: the rows its filter leaves out keep their images whatever their
#: moment, those it keeps only until it passes (the sweep's rule, plan/expiry_delta.py)
EXPIRING = MAPPING.replace(
    "    where: \"crew_id IS NULL OR note = 'x'\"\n",
    "    where: \"crew_id IS NULL OR note = 'x'\"\n    expire: {column: ends}\n",
)
#: an end in the past, none, or one far off
ENDS = ["'2001-01-01 00:00:00'", "NULL", "'2099-01-01 00:00:00'"]
SHIFT = "crew_id IS NULL OR note = 'x'"  # shift's filter, as SQL


class CrewWrites(Writes):
    """Inserts everywhere; rows moved in and out of the filters by logged updates; teams and
    crews deleted and their keys changed (cascaded by the server, not logged)."""

    def step(self) -> str:
        r = self.rng
        teams, crews = self.ids("team"), self.ids("crew")
        choice = r.randrange(17)
        if choice < 1 or not teams:
            return f"INSERT INTO team VALUES ({self.fresh()}, 'n{r.randrange(99)}')"
        if choice < 3 or choice > 13 or not crews:
            return f"INSERT INTO crew VALUES ({self.fresh()}, {r.choice(teams)}, {r.randrange(2)})"
        crew = r.choice(crews) if r.random() < 0.85 else "NULL"
        if choice < 5:
            note = r.choice(["'x'", "'y'", "NULL"])
            return f"INSERT INTO shift VALUES ({self.fresh()}, {crew}, {note}, {r.choice(ENDS)})"
        if choice < 7:
            return f"INSERT INTO duty VALUES ({self.fresh()}, {crew}, {r.randrange(9)})"
        if choice == 7:  # in and out of the filters by logged changes
            return f"UPDATE crew SET active = 1 - active WHERE id = {r.choice(crews)}"
        if choice == 8:
            one, note = r.choice(self.ids("shift") or [0]), r.choice(["x", "y"])
            new = f"note = {note!r}, ends = {r.choice(ENDS)}, crew_id = {crew}"
            return f"UPDATE shift SET {new} WHERE id = {one}"
        if choice == 9:
            one = r.choice(self.ids("duty") or [0])
            return f"UPDATE duty SET crew_id = {crew} WHERE id = {one}"
        if choice == 10:  # the crews' team_id follows (ON UPDATE CASCADE)
            return f"UPDATE team SET id = {self.fresh()} WHERE id = {r.choice(teams)}"
        if choice == 11:  # shifts and duties follow: duties move in and out of the filter
            return f"UPDATE crew SET id = {self.fresh()} WHERE id = {r.choice(crews)}"
        if choice == 12 and r.random() < 0.4:  # its crews go, their shifts and duties NULL
            return f"DELETE FROM team WHERE id = {r.choice(teams)}"
        if choice == 12:
            return f"INSERT INTO team VALUES ({self.fresh()}, 'n{r.randrange(99)}')"
        return f"DELETE FROM crew WHERE id = {r.choice(crews)}"


def _count(db: Any, sql: str) -> int:
    return int(_rows(db, sql)[0][0])


def _synced(
    db: Any, text: str, redis_url: str, redis_client: redis.Redis, tmp_path: Any
) -> tuple[Mapping, dict[bytes, Any]]:
    """``text`` validated for sync, then synced through random writes; verify exits 0 and
    every key equals a fresh migrate's. Returns the mapping and the keys."""
    db.run(CREWS)
    path = tmp_path / "crews.yaml"
    path.write_text(f"source: {db.url}\n{text}")
    report = validate(path, for_sync=True)  # nothing refused, nothing noted against it
    assert report.exit_code == 0 and not [p for p in report.warnings if p.brief], report
    mapping = parse_mapping(text, name="crews")
    sid = next(_ids)
    run = {"source": db.url, "target": redis_url, "until_caught_up": True}
    work = CrewWrites(db, 1)
    work.run(50)
    sync(mapping, server_id=sid, **run)  # type: ignore[arg-type]
    work.close()
    work = CrewWrites(db, 4)
    for n in range(4):
        work.run(60)
        # once, the filtered tables read again online (sync --resnapshot), chunk by chunk
        again = ["crew", "shift", "duty"] if n == 2 else []
        sync(mapping, server_id=sid, resnapshot_tables=again, **run)  # type: ignore[arg-type]
    work.close()
    # last, one crew with a shift of each kind, then its team deleted: the rule brings the
    # shifts left out into the filter, and takes its duty out of it
    team, crew = 99001, 99002
    last = [
        f"INSERT INTO team VALUES ({team}, 'last')",
        f"INSERT INTO duty VALUES (99000, {crew}, 1)",
    ]
    last[1:1] = [f"INSERT INTO crew VALUES ({crew + n}, {team}, {1 - n})" for n in (0, 1)]
    shifts = [(c, note, ends) for c in (crew, crew + 1) for note in ("'x'", "'y'") for ends in ENDS]
    last += [f"INSERT INTO shift VALUES ({crew + 3 + n}, {c}, {note}, {ends})"
             for n, (c, note, ends) in enumerate(shifts)]  # fmt: skip
    db.run(";".join(last))
    sync(mapping, server_id=sid, **run)  # type: ignore[arg-type]
    db.run(f"DELETE FROM team WHERE id = {team}")
    sync(mapping, server_id=sid, **run)  # type: ignore[arg-type]
    assert _count(db, f"SELECT COUNT(*) FROM shift WHERE id > {crew} AND crew_id IS NULL") == 12
    return mapping, equals_a_fresh_migrate(db, mapping, redis_url, redis_client)


def _left_out(db: Any, redis_url: str, redis_client: redis.Redis, tmp_path: Any) -> None:
    mapping, keys = _synced(db, MAPPING, redis_url, redis_client, tmp_path)
    # the filters leave rows out, and every row's image is kept, those left out included
    for table, kept in (("crew", "active = 1"), ("shift", "crew_id IS NULL OR note = 'x'")):
        every = _count(db, f"SELECT COUNT(*) FROM {table}")
        assert 0 < _count(db, f"SELECT COUNT(*) FROM {table} WHERE {kept}") < every
        assert len(keys[b"migrator:crews:rows:" + table.encode()][1]) == every
    duties = _count(db, "SELECT COUNT(*) FROM duty")
    assert len(keys[b"migrator:crews:rows:duty"][1]) == duties
    # the rules did what the test is about: shifts nulled into the filter, duties moved
    assert _count(db, "SELECT COUNT(*) FROM shift WHERE crew_id IS NULL AND note = 'y'")
    assert _count(db, "SELECT COUNT(*) FROM duty WHERE crew_id > 40040")
    # a load in chunks by two workers reads them too: the same keys
    redis_client.flushdb()
    done = migrate(mapping, source=db.url, target=redis_url, workers=2, chunk_rows=7)
    loaded = {k: v for k, v in _keys(redis_client).items() if not k.endswith(b":id")}
    assert done.exit_code == 0 and loaded == keys  # (counters: equals_a_fresh_migrate's)
    # dry-run counts the images of the rows left out: one field per row of the table
    planned = {t["table"]: t for t in dry_run(mapping, source=db.url).as_dict()["tables"]}
    shift = planned["shift"]
    assert shift["rows"] == _count(db, "SELECT COUNT(*) FROM shift WHERE crew_id IS NULL "
                                       "OR note = 'x'")  # fmt: skip
    values = _count(db, "SELECT COUNT(DISTINCT crew_id) FROM shift")  # a SET per value
    assert values > _count(db, "SELECT COUNT(DISTINCT crew_id) FROM shift WHERE note = 'x'")
    assert shift["keys"]["rows"] == 1 + values and shift["memory_bytes"]["rows"] > 0, shift
    _fixed(db, mapping, redis_url, redis_client, keys)


def _fixed(db: Any, mapping: Any, redis_url: str, client: redis.Redis, keys: Any) -> None:
    """verify compares the images of the rows the filter leaves out, --fix repairs them."""
    images = b"migrator:crews:rows:shift"
    out = _count(db, "SELECT MIN(id) FROM shift WHERE note = 'y' AND crew_id IS NOT NULL")
    pk = encode_row((str(out).encode(),))
    held = client.hget(images, pk)
    assert held is not None  # a row the filter leaves out: its image alone
    assert not client.exists(b"shift:%d" % out)
    by = [k for k in keys if k.startswith(images + b":by:crew_id:") and pk in keys[k][1]]
    client.hdel(images, pk)
    client.srem(by[0], pk)
    client.hset(images, encode_row((b"999999",)), b"6:999999")  # no row's
    report = verify(mapping, source=db.url, target=redis_url)
    (found,) = [t for t in report.as_dict()["tables"] if t["table"] == "shift"]
    assert found["differences"] == {"missing field": 2, "extra field": 1}, found
    assert verify(mapping, source=db.url, target=redis_url, fix=True).exit_code == 0
    assert client.hget(images, pk) == held and client.sismember(by[0], pk)
    assert verify(mapping, source=db.url, target=redis_url).exit_code == 0


def test_filters_a_rule_can_bring_rows_into_keep_the_images_of_the_rows_left_out(  # type: ignore[no-untyped-def]
    binlog_db, redis_url: str, redis_client: redis.Redis, tmp_path
) -> None:
    """MariaDB: the rules applied from the parents' changes; MySQL 9.7's default: the cascaded
    rows are logged, and the images kept from them like any other change."""
    _left_out(binlog_db, redis_url, redis_client, tmp_path)


def test_filters_a_rule_can_bring_rows_into_keep_their_images_on_mysql_with_innodb_foreign_keys(  # type: ignore[no-untyped-def]
    innodb_fk_mysql, redis_url: str, redis_client: redis.Redis, tmp_path
) -> None:
    _on_innodb_fk_mysql(
        innodb_fk_mysql, lambda db: _left_out(db, redis_url, redis_client, tmp_path)
    )


def _expiring(db: Any, redis_url: str, redis_client: redis.Redis, tmp_path: Any) -> None:
    _, keys = _synced(db, EXPIRING, redis_url, redis_client, tmp_path)

    def pks(where: str) -> set[bytes]:
        return {
            encode_row((b"%d" % i,)) for (i,) in _rows(db, f"SELECT id FROM shift WHERE {where}")
        }

    out = f"NOT COALESCE({SHIFT}, FALSE)"
    left, kept = pks(out), pks(f"({SHIFT}) AND (ends IS NULL OR ends > NOW())")
    assert set(keys[b"migrator:crews:rows:shift"][1]) == left | kept and kept and left
    # a row left out past its moment keeps its image; one kept past it has none
    assert pks(f"{out} AND ends < NOW()") and pks(f"({SHIFT}) AND ends < NOW()")


def test_a_filter_a_rule_can_bring_rows_into_with_expire_keeps_the_left_out_images(  # type: ignore[no-untyped-def]
    binlog_db, redis_url: str, redis_client: redis.Redis, tmp_path
) -> None:
    _expiring(binlog_db, redis_url, redis_client, tmp_path)


def test_a_filter_with_expire_keeps_the_left_out_images_on_mysql_with_innodb_foreign_keys(  # type: ignore[no-untyped-def]
    innodb_fk_mysql, redis_url: str, redis_client: redis.Redis, tmp_path
) -> None:
    _on_innodb_fk_mysql(
        innodb_fk_mysql, lambda db: _expiring(db, redis_url, redis_client, tmp_path)
    )
