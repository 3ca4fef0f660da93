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
them. ``dry-run`` counts the images.
"""

from __future__ import annotations

from typing import Any

import redis

from migrator.commands import dry_run, validate, verify
from migrator.commands.sync import sync
from migrator.mapping.loader import parse_mapping
from migrator.plan.expiry import encode_row
from tests.sync.test_cascade_images import (
    Writes,
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
CREATE TABLE shift (id INT PRIMARY KEY, crew_id INT NULL, note VARCHAR(20), KEY (crew_id),
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


class CrewWrites(Writes):
    """Inserts everywhere; rows moved in and out of the filters by logged updates; teams and
    crews deleted and their keys changed (cascaded by the server, not logged)."""

    def step(self) -> str:
        r = self.rng
        teams, crews = self.ids("team"), self.ids("crew")
        choice = r.randrange(14)
        if choice < 1 or not teams:
            return f"INSERT INTO team VALUES ({self.fresh()}, 'n{r.randrange(99)}')"
        if choice < 3 or not crews:
            return f"INSERT INTO crew VALUES ({self.fresh()}, {r.choice(teams)}, {r.randrange(2)})"
        crew = r.choice([*crews, "NULL"])
        if choice < 5:
            note = r.choice(["'x'", "'y'", "NULL"])
            return f"INSERT INTO shift VALUES ({self.fresh()}, {crew}, {note})"
        if choice < 7:
            return f"INSERT INTO duty VALUES ({self.fresh()}, {crew}, {r.randrange(9)})"
        if choice == 7:  # in and out of the filters by logged changes
            return f"UPDATE crew SET active = 1 - active WHERE id = {r.choice(crews)}"
        if choice == 8:
            one = r.choice(self.ids("shift") or [0])
            return f"UPDATE shift SET note = {r.choice(['x', 'y'])!r} WHERE id = {one}"
        if choice == 9:
            one = r.choice(self.ids("duty") or [0])
            return f"UPDATE duty SET crew_id = {crew} WHERE id = {one}"
        if choice == 10:  # the crews' team_id follows (ON UPDATE CASCADE)
            return f"UPDATE team SET id = {self.fresh()} WHERE id = {r.choice(teams)}"
        if choice == 11:  # shifts and duties follow: duties move in and out of the filter
            return f"UPDATE crew SET id = {self.fresh()} WHERE id = {r.choice(crews)}"
        if choice == 12:  # its crews go, their shifts and duties are set NULL
            return f"DELETE FROM team WHERE id = {r.choice(teams)}"
        return f"DELETE FROM crew WHERE id = {r.choice(crews)}"


def _count(db: Any, sql: str) -> int:
    return int(_rows(db, sql)[0][0])


def _left_out(db: Any, redis_url: str, redis_client: redis.Redis, tmp_path: Any) -> None:
    db.run(CREWS)
    path = tmp_path / "crews.yaml"
    path.write_text(f"source: {db.url}\n{MAPPING}")
    report = validate(path, for_sync=True)  # nothing refused, nothing noted against it
    assert report.exit_code == 0 and not [p for p in report.warnings if p.brief], report
    mapping = parse_mapping(MAPPING, name="crews")
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
    keys = equals_a_fresh_migrate(db, mapping, redis_url, redis_client)
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
