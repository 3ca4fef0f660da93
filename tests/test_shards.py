"""A sharded source (docs/sharding.md): one mapping over several MySQL databases holding shards
of one schema, loaded, dry-run and verified exact over their union; collisions reported with
their shards and SQL; a shard that does not answer (exit 3) or whose schema differs (exit 2).
The shards are databases of their own on the engine's server (and, in ``test_mixed_engines``,
one on MariaDB and one on the session's Oracle MySQL 9.7)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from typer.testing import CliRunner

from migrator.cli import app
from migrator.commands import migrate
from migrator.commands.dryrun import dry_run
from migrator.commands.verify import verify
from migrator.errors import MigratorError
from migrator.plan.expiry import encode_row
from migrator.verify import report as vr
from tests.services import (
    MySQLDatabase,
    create_database,
    drop_database,
    new_database_name,
    shard_databases,
)

SCHEMA = """
CREATE TABLE customer (
  id INT PRIMARY KEY, name VARCHAR(40), email VARCHAR(60), region VARCHAR(10),
  created DATETIME, UNIQUE KEY (email), KEY (region));
"""
MAPPING = """version: 1
sources:
{sources}
tables:
  customer:
    unique: [email]
    indexes: [region]
    latest: [{{key: "customer:latest", order_by: created, limit: 3}}]
"""
#: (id, name, email, region, created) per shard: ids split by range, the newest rows on both
EAST = [
    (1, "ann", "ann@x", "eu", "2024-01-01 00:00:00"),
    (2, "bob", "bob@x", "us", "2024-03-01 00:00:00"),
    (3, "cy", "cy@x", "eu", "2024-05-01 00:00:00"),
]
WEST = [
    (101, "dee", "dee@x", "us", "2024-04-01 00:00:00"),
    (102, "eve", "eve@x", "ap", "2024-06-01 00:00:00"),
]


def _shard(server: str) -> MySQLDatabase:
    db = create_database(server, new_database_name())
    db.run(SCHEMA)
    return db


def _fill(db: MySQLDatabase, rows: list[tuple]) -> None:
    db.insert("INSERT INTO customer VALUES (%s, %s, %s, %s, %s)", rows)


@pytest.fixture
def two(mysql_server_url: str) -> Iterator[tuple[MySQLDatabase, MySQLDatabase]]:
    with shard_databases(mysql_server_url, SCHEMA) as (east, west):
        yield east, west


def _mapping(tmp_path: Path, shards: dict[str, str], redis_url: str) -> Path:
    lines = "\n".join(f'  - {{name: {n}, url: "{u}"}}' for n, u in shards.items())
    f = tmp_path / "shop.yaml"
    f.write_text(MAPPING.format(sources=lines) + f"target: {redis_url}\n")
    return f


def expected(shards: dict[str, list[tuple]]) -> dict[bytes, object]:
    """Every key Redis must hold after loading these shards, built from the rows alone."""
    out: dict[bytes, object] = {}
    rows = [(name, r) for name, rs in shards.items() for r in rs]
    for _, (i, name, email, region, created) in rows:
        out[f"customer:{i}".encode()] = {
            b"name": name.encode(), b"email": email.encode(), b"region": region.encode(),
            b"created": created.encode(),
        }  # fmt: skip
    out[b"customer:uniques:email"] = {r[2].encode(): str(r[0]).encode() for _, r in rows}
    for region in {r[3] for _, r in rows}:
        out[f"customer:indices:region:{region}".encode()] = {
            str(r[0]).encode() for _, r in rows if r[3] == region
        }
    out[b"customer:id"] = str(max(r[0] for _, r in rows)).encode()
    newest = sorted((r for _, r in rows), key=lambda r: (r[4], r[0]), reverse=True)[:3]
    out[b"customer:latest"] = [str(r[0]).encode() for r in newest]
    out[b"migrator:shop:shard:customer"] = {
        encode_row((str(r[0]).encode(),)): n.encode() for n, r in rows
    }
    return out


def held(client: redis.Redis) -> dict[bytes, object]:
    """What Redis holds, per key, by type (the checkpoints left out)."""
    out: dict[bytes, object] = {}
    for key in client.scan_iter(count=1000):
        if key.endswith(b":checkpoint"):
            continue
        kind = client.type(key)
        if kind == b"hash":
            out[key] = client.hgetall(key)
        elif kind == b"set":
            out[key] = client.smembers(key)
        elif kind == b"list":
            out[key] = client.lrange(key, 0, -1)
        else:
            out[key] = client.get(key)
    return out


def test_the_union_of_two_shards_is_loaded_and_verified_exactly(
    two, tmp_path, redis_url, redis_client
):
    east, west = two
    _fill(east, EAST)
    _fill(west, WEST)
    f = _mapping(tmp_path, {"east": east.url, "west": west.url}, redis_url)
    plan = dry_run(f)
    assert sum(t.rows for t in plan.tables) == 5
    assert [line.split(" (")[0] for line in plan.shards] == ["shard east", "shard west"]
    assert "3 rows" in plan.shards[0] and "2 rows" in plan.shards[1]
    assert plan.tables[0].keys.get("shard") == 1  # the owner hash, estimated

    report = migrate(f)
    assert report.exit_code == 0, report.tables
    assert {t.table: t.rows for t in report.tables} == {"customer@east": 3, "customer@west": 2}
    assert [n.split(" (")[0] for n in report.notes[:2]] == ["shard east", "shard west"]
    assert held(redis_client) == expected({"east": EAST, "west": WEST})
    assert redis_client.exists(b"migrator:shop@east:checkpoint", b"migrator:shop@west:checkpoint")

    clean = verify(f)
    assert clean.ok, [(t.table, t.counts) for t in clean.tables]
    assert clean.tables[0].mysql_rows == 5
    for mode in ({"sample": 10}, {"counts_only": True}):  # rows of every shard
        other = verify(f, **mode)
        assert other.ok and other.tables[0].mysql_rows == 5, (mode, other.tables[0].counts)

    # a row of west deleted, one added on east, the owner of another changed, a stray key
    west.run("DELETE FROM customer WHERE id = 102")
    _fill(east, [(4, "fay", "fay@x", "eu", "2024-07-01 00:00:00")])
    redis_client.hset(b"migrator:shop:shard:customer", encode_row((b"1",)), b"west")
    redis_client.hset(b"customer:999", b"name", b"ghost")
    redis_client.hset(b"migrator:shop:shard:customer", encode_row((b"555",)), b"north")
    found = verify(f)
    assert not found.ok
    keys = {d.key for t in found.tables for shown in t.examples.values() for d in shown}
    assert {"customer:999", "customer:102", "customer:4"} <= keys, keys
    (check,) = found.tables
    owner = "migrator:shop:shard:customer"
    assert [(d.key, d.field, d.redis) for d in check.examples[vr.DIFFERENT_VALUE]
            if d.key == owner] == [(owner, "1:1", "west")]  # fmt: skip
    # the owner of a row west no longer has, and one of a shard the mapping does not list
    extra = {(d.field, d.redis) for d in check.examples[vr.EXTRA_FIELD] if d.key == owner}
    assert extra == {("3:102", "west"), ("3:555", "north")}, extra

    fixed = verify(f, fix=True)
    assert fixed.ok
    now = {"east": [*EAST, (4, "fay", "fay@x", "eu", "2024-07-01 00:00:00")], "west": WEST[:1]}
    want = expected(now)
    want[b"customer:id"] = b"102"  # a counter is never lowered: at least MAX(id), 101, holds
    assert held(redis_client) == want
    # a --replace over every shard removed what the earlier run wrote: no shard's part says
    # Redis held an earlier run (west's checkpoint of it outlived the removal)
    again = migrate(f, replace=True)
    assert again.exit_code == 0 and not again.rerun, again.notes
    assert not [n for n in again.notes if "earlier run" in n], again.notes


def test_verify_sample_checks_the_owner_fields(two, tmp_path, redis_url, redis_client):
    """``verify --sample`` reads each sampled row from its shard and checks its owner field as
    the full verify does: a wrong one is a *different value*, a missing one a *missing field*
    (exit 1, naming them), as the full verify reports them and its ``--fix`` (which refuses
    ``--sample``) writes them back."""
    east, west = two
    _fill(east, EAST)
    _fill(west, WEST)
    f = _mapping(tmp_path, {"east": east.url, "west": west.url}, redis_url)
    assert migrate(f).exit_code == 0
    owner = b"migrator:shop:shard:customer"
    redis_client.hset(owner, encode_row((b"2",)), b"west")  # east's row, said to be west's
    redis_client.hdel(owner, encode_row((b"101",)))  # west's row, its field gone
    result = CliRunner().invoke(app, ["verify", str(f), "--sample", "10"])
    assert result.exit_code == 1, result.output
    assert "migrator:shop:shard:customer" in result.output, result.output
    (check,) = verify(f, sample=10).tables
    assert check.mysql_rows == 5
    shown = {(kind, d.key, d.field, d.mysql, d.redis) for kind, ds in check.examples.items()
             for d in ds}  # fmt: skip
    assert shown == {
        (vr.DIFFERENT_VALUE, owner.decode(), "1:2", "east", "west"),
        (vr.MISSING_FIELD, owner.decode(), "3:101", "west", None),
    }, shown
    full = {(k, d.key, d.field) for k, ds in verify(f).tables[0].examples.items() for d in ds}
    assert full == {(k, key, field) for k, key, field, _, _ in shown}, full
    verify(f, fix=True)
    assert verify(f).ok and verify(f, sample=10).ok
    assert redis_client.hget(owner, encode_row((b"2",))) == b"east"
    assert redis_client.hget(owner, encode_row((b"101",))) == b"west"


def test_one_shard_alone_and_its_own_checkpoint(two, tmp_path, redis_url, redis_client):
    east, west = two
    _fill(east, EAST)
    _fill(west, WEST)
    f = _mapping(tmp_path, {"east": east.url, "west": west.url}, redis_url)
    first = migrate(f, shard="west")
    assert first.exit_code == 0
    assert [t.table for t in first.tables] == ["customer@west"]
    assert redis_client.exists(b"customer:101") and not redis_client.exists(b"customer:1")
    # the counter and latest list are already the union's: the next INCR is no id east has
    assert redis_client.get(b"customer:id") == b"102"
    assert redis_client.lrange(b"customer:latest", 0, -1) == [b"102", b"3", b"101"]
    # --resume leaves west (its checkpoint: finished) and loads east, not refused for west's
    # keys (the earlier run of another shard)
    second = migrate(f, resume=True)
    assert second.exit_code == 0
    assert [t.table for t in second.tables] == ["customer@east"]
    assert any(n.startswith("shard west: its checkpoint records a finished load")
               for n in second.notes), second.notes  # fmt: skip
    assert held(redis_client) == expected({"east": EAST, "west": WEST})
    assert verify(f).ok
    with pytest.raises(MigratorError, match="nothing is left to resume"):
        migrate(f, resume=True)
    # --replace removes the mapping's keys (owner hash included) once, then loads every shard
    west.run("DELETE FROM customer WHERE id = 101")
    again = migrate(f, replace=True)
    assert again.exit_code == 0 and again.removed
    assert held(redis_client) == expected({"east": EAST, "west": WEST[1:]})


def test_collisions_are_reported_with_their_shards_and_sql(two, tmp_path, redis_url, redis_client):
    east, west = two
    _fill(east, EAST)
    # id 2 on both shards; west's row 103 holds east's email ann@x
    _fill(west, [(2, "bob2", "bob2@x", "us", "2024-07-02 00:00:00"),
                 (103, "ann2", "ann@x", "eu", "2024-07-03 00:00:00"), *WEST])  # fmt: skip
    f = _mapping(tmp_path, {"east": east.url, "west": west.url}, redis_url)
    assert sum(t.rows for t in dry_run(f).tables) == 5  # 7 rows, 2 colliding: left out
    result = CliRunner().invoke(app, ["migrate", str(f), "--json"])
    assert result.exit_code == 1, result.output
    report = migrate(f)  # a second run: the same collisions, again (exit 1)
    assert report.exit_code == 1
    west_table = next(t for t in report.tables if t.table == "customer@west")
    reasons = sorted(r.reason for r in west_table.rejects)
    assert len(reasons) == 2, reasons
    assert "its primary key is on shard east too" in reasons[0]
    assert "SELECT * FROM `customer` WHERE `id` = 2" in reasons[0]
    assert "unique email value is held on shard east" in reasons[1]
    assert "SELECT * FROM `customer` WHERE `email` = 'ann@x'" in reasons[1]
    # Redis keeps east's rows as they were
    assert redis_client.hget(b"customer:2", b"name") == b"bob"
    assert redis_client.hget(b"customer:uniques:email", b"ann@x") == b"1"
    assert not redis_client.exists(b"customer:103")
    # the latest list holds the newest rows Redis holds: not west's 2 nor its 103 (the newest)
    assert redis_client.lrange(b"customer:latest", 0, -1) == [b"102", b"3", b"101"]
    assert any("collide with another shard" in n for n in report.notes)
    shown = CliRunner().invoke(app, ["migrate", str(f)])
    assert shown.exit_code == 1
    said = " ".join(shown.output.split())
    assert "each collides with another shard's row, which Redis keeps" in said, said
    assert "SELECT * FROM `customer` WHERE `id` = 2" in said
    # verify names the same two, and nothing else differs: Redis holds east's rows
    for found in (verify(f), verify(f, fix=True)):
        assert found.exit_code == 1
        (check,) = found.tables
        assert dict(check.counts) == {vr.COLLIDING: 2}, check.counts
        shown = sorted((d.mysql, d.field) for d in check.examples[vr.COLLIDING])
        assert shown == [
            ("a primary key on shards east and west", "SELECT * FROM `customer` WHERE `id` = 2"),
            ("a unique email on shards east and west",
             "SELECT * FROM `customer` WHERE `email` = 'ann@x'"),
        ]  # fmt: skip
    assert redis_client.hget(b"customer:2", b"name") == b"bob"  # --fix left it as it was


def test_a_shard_that_does_not_answer_or_differs_stops_the_run(
    two, tmp_path, redis_url, redis_client
):
    east, west = two
    _fill(east, EAST)
    down = "mysql+pymysql://root:s3cret@127.0.0.1:1/nowhere"
    f = _mapping(tmp_path, {"east": east.url, "west": down}, redis_url)
    result = CliRunner().invoke(app, ["migrate", str(f)])
    assert result.exit_code == 3, result.output
    assert "shard west" in result.output and "s3cret" not in result.output
    assert "127.0.0.1:1" in result.output
    result = CliRunner().invoke(app, ["migrate", str(f), "--shard", "east"])
    assert result.exit_code == 3 and "shard west" in result.output  # (the union's counters)
    assert redis_client.dbsize() == 0
    west.run("ALTER TABLE customer MODIFY region VARCHAR(20)")
    f = _mapping(tmp_path, {"east": east.url, "west": west.url}, redis_url)
    result = CliRunner().invoke(app, ["verify", str(f), "--dask", "tcp://127.0.0.1:1"])
    assert result.exit_code == 2 and "verify --dask reads one server" in result.output
    for command in (["migrate", str(f)], ["verify", str(f)], ["dry-run", str(f)]):
        result = CliRunner().invoke(app, command)
        assert result.exit_code == 2, result.output
        assert "customer.region" in result.output and "on west" in result.output
    assert redis_client.dbsize() == 0


@pytest.mark.engine("mariadb", why="mixes the shared MariaDB with the private MySQL 9.7")
def test_mixed_engines(two, oracle_mysql, tmp_path, redis_url, redis_client):
    east, _ = two
    _fill(east, EAST)
    west = _shard(oracle_mysql.url)
    try:
        _fill(west, WEST)
        f = _mapping(tmp_path, {"east": east.url, "west": west.url}, redis_url)
        report = migrate(f, workers=2, chunk_rows=1)
        assert report.exit_code == 0, report.tables
        assert held(redis_client) == expected({"east": EAST, "west": WEST})
        assert verify(f).ok
    finally:
        drop_database(oracle_mysql.url, west.name)


def test_a_unique_collision_under_an_escaped_composite_key_is_reported(
    two, tmp_path, redis_url, redis_client
):
    """A unique value two shards hold, the holder keyed by a composite primary key whose
    values hold the separator (``escape: backslash``): traced to its owner through the
    escaped entry, reported, and the earlier shard's entry kept (it was overwritten
    silently)."""
    east, west = two
    for db in two:
        db.run("CREATE TABLE pair (a VARCHAR(9), b VARCHAR(9), email VARCHAR(20), "
               "PRIMARY KEY (a, b), UNIQUE KEY (email))")  # fmt: skip
    east.run("INSERT INTO pair VALUES ('x:1', 'y', 'e@x'), ('k', 'l', 'k@x')")
    west.run("INSERT INTO pair VALUES ('z', 'w:2', 'e@x'), ('m', 'n', 'm@x')")
    lines = f'  - {{name: east, url: "{east.url}"}}\n  - {{name: west, url: "{west.url}"}}'
    f = tmp_path / "pairs.yaml"
    f.write_text(f"version: 1\nsources:\n{lines}\ntarget: {redis_url}\n"
                 "tables:\n  pair: {unique: [email], escape: backslash}\n")  # fmt: skip
    report = migrate(f)
    assert report.exit_code == 1
    west_table = next(t for t in report.tables if t.table == "pair@west")
    (reason,) = [r.reason for r in west_table.rejects]
    assert "unique email value is held on shard east" in reason, reason
    assert redis_client.hget(b"pair:uniques:email", b"e@x") == b"x\\:1:y"  # east's, escaped
    assert not redis_client.exists(b"pair:z:w\\:2")
    assert redis_client.exists(b"pair:m:n")
    assert verify(f).exit_code == 1  # the collision, named by verify too


def test_a_latest_list_over_an_enum_is_ordered_by_its_definition(
    mysql_server_url, tmp_path, redis_url, redis_client
):
    """An ENUM ``order_by`` ranks the shards' rows by its members' order of definition, as
    MySQL's ORDER BY does (not by their text): the list is what the query over a database of
    the union's rows answers."""
    schema = "CREATE TABLE task (id INT PRIMARY KEY, stage ENUM('zeta', 'alpha', 'mid'));"
    rows = {"east": [(1, "alpha"), (2, "zeta"), (3, "mid")],
            "west": [(101, "zeta"), (102, "alpha"), (103, "zeta")]}  # fmt: skip
    with shard_databases(mysql_server_url, schema, n=3) as (east, west, union):
        for db, held in ((east, rows["east"]), (west, rows["west"]),
                         (union, rows["east"] + rows["west"])):  # fmt: skip
            db.insert("INSERT INTO task VALUES (%s, %s)", held)
        f = tmp_path / "tasks.yaml"
        f.write_text(
            f'version: 1\nsources:\n  - {{name: east, url: "{east.url}"}}\n'
            f'  - {{name: west, url: "{west.url}"}}\ntarget: {redis_url}\ntables:\n'
            '  task: {latest: [{key: "task:latest", order_by: stage, limit: 4}]}\n'
        )
        assert migrate(f).exit_code == 0
        want = union.query("SELECT id FROM task ORDER BY stage DESC, id DESC LIMIT 4")
        assert redis_client.lrange("task:latest", 0, -1) == [str(r[0]).encode() for r in want]
        assert want[0][0] == 3  # 'mid', defined last
        assert verify(f).ok
