"""The binary log's hard cases (issue 17 item 4) and the counter rule under sync (item 5), on
the private MariaDB with the row binary log:

* every column type the suite covers, UUID and INET6 included: the same rows written through
  the log while sync follows, and read by ``migrate``, give byte-identical Redis content (one
  test per type, one sync run for all of them);
* system-versioned tables keep exactly the current rows;
* a table whose rows a foreign key's CASCADE / SET NULL changes unlogged is refused at start
  (naming the constraint), and ``validate`` and ``init`` say so;
* the highest row deleted under sync: a caught-up ``verify`` exits 0.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from typer.testing import CliRunner

from migrator.cli import app
from migrator.commands import init, migrate, validate, verify
from migrator.commands.sync import sync
from migrator.errors import MigratorError
from migrator.mapping.loader import parse_mapping
from migrator.source.binlog.values import inet4_text, inet6_text, uuid_text
from tests.services import create_database, drop_database, new_database_name, redis_db_url
from tests.sync.helpers import master_position
from tests.sync.test_binlog_values import _binlog, _snapshot
from tests.test_workers import snapshot as dump

_ids = iter(range(8100, 8400))


def _inet6_values(n: int) -> list[str]:
    """IPv6 addresses with zero groups in every place (runs of 1..8, ties, IPv4-compatible
    and -mapped forms), as 16-byte literals: MariaDB's text is what the log must give."""
    rng = random.Random(17)
    out = []
    for _ in range(n):
        words = [rng.choice([0, 0, 0xFFFF, rng.randrange(1, 0x10000)]) for _ in range(8)]
        out.append("UNHEX('" + "".join(f"{w:04x}" for w in words) + "')")
    fixed = ["00000000000000000000000000000001", "0" * 32, "00000000000000000000ffff01020304",
             "00000000000000000000000001020304", "00000000000000000000000000010000",
             "20010db8000000000000000000000000", "0000000000000000ffff000001020304"]  # fmt: skip
    return out + [f"UNHEX('{h}')" for h in fixed]


def _uuid_values() -> list[str]:
    """UUIDs of every version MariaDB stores swapped or not, with trailing zero bytes."""
    return [
        "'6ccd780c-baba-1026-9564-5b8c656024db'", "'123e4567-e89b-12d3-a456-426655440000'",
        "UUID()", "'ffffffff-ffff-ffff-ffff-ffffffffffff'",
        "'00000000-0000-0000-0000-000000000000'", "'01234567-89ab-4def-8123-456789abcdef'",
        "'01234567-89ab-6def-8123-456789abcdef'", "'01234567-89ab-1def-c123-456789abcd00'",
        "'00000000-0000-0000-0000-000000000001'",
    ]  # fmt: skip


# type -> (column type, SQL values: the first is in the snapshot, the rest come through the
# log; NULL among them), and whether the column can be a sorted-set score
# fmt: off
TYPES: dict[str, tuple[str, list[str], bool]] = {
    "bigint_unsigned": ("BIGINT UNSIGNED", ["18446744073709551615", "0", "NULL", "42"], True),
    "bigint": ("BIGINT", ["-9223372036854775808", "9223372036854775807", "NULL", "-1"], True),
    "tinyint1": ("TINYINT(1)", ["1", "0", "-128", "NULL"], True),
    "mediumint": ("MEDIUMINT", ["-8388608", "8388607", "0", "NULL"], True),
    "bit10": ("BIT(10)", ["b'1111111111'", "b'0'", "NULL", "b'101'"], True),
    "decimal": ("DECIMAL(10,2)", ["1234.5", "-0.5", "99999999.99", "NULL", "0"], True),
    "decimal0": ("DECIMAL(5,0)", ["12345", "-1", "NULL"], True),
    "decimal30": ("DECIMAL(30,20)", ["-1234567890.12345678901234567890",
                                     "0.00000000000000000001", "NULL"], True),
    "float": ("FLOAT", ["1.2345678", "-2.5", "3.4028235e38", "-1e-7", "0", "NULL"], True),
    "double": ("DOUBLE", ["0.1", "1e300", "1e-5", "1234567890123456.7", "-0.000000000000001",
                          "NULL"], True),
    "double_scaled": ("DOUBLE(12,8)", ["206.9816391", "2", "-0.001", "0", "NULL"], True),
    "datetime": ("DATETIME", ["'2020-01-02 03:04:05'", "'0000-00-00 00:00:00'",
                              "'2020-00-15 10:11:12'", "'9999-12-31 23:59:59'", "NULL"],
                 True),
    "datetime6": ("DATETIME(6)", ["'2020-01-02 03:04:05.123456'",
                                  "'1000-01-01 00:00:00.000001'", "'2021-02-00 00:00:00.5'",
                                  "NULL"], True),
    "timestamp3": ("TIMESTAMP(3) NULL", ["'2020-06-01 12:00:00.5'", "'1970-01-01 00:00:01'",
                                         "'0000-00-00 00:00:00'", "'2038-01-19 03:14:07.999'",
                                         "NULL"], True),
    "date": ("DATE", ["'2020-01-02'", "'0000-00-00'", "'2020-01-00'", "'9999-12-31'", "NULL"],
             True),
    "time": ("TIME", ["'-12:30:00'", "'100:00:00'", "'-838:59:59'", "'00:00:00'", "NULL"], False),
    "time3": ("TIME(3)", ["'838:59:58.999'", "'-00:00:01.500'", "'-00:00:00.001'",
                          "'23:59:59.5'", "NULL"], False),
    "year": ("YEAR", ["2021", "1901", "0", "2155", "NULL"], True),
    "char": ("CHAR(10)", ["'pad  '", "''", "'é'", "NULL"], False),
    "varchar": ("VARCHAR(40)", ["'héllo wörld 漢字'", "''", "'a:b'", "NULL"], False),
    "latin1": ("VARCHAR(10) CHARACTER SET latin1", ["'café'", "''", "NULL"], False),
    "enum": ("ENUM('small','large')", ["'large'", "'small'", "''", "NULL"], False),
    "set": ("SET('a','b','c')", ["'a,c'", "''", "'c,b,a'", "NULL"], False),
    "binary4": ("BINARY(4)", ["'ab'", "UNHEX('61620000')", "UNHEX('00000000')", "NULL"], False),
    "varbinary": ("VARBINARY(16)", ["UNHEX('00FF0A0D')", "''", "NULL"], False),
    "blob": ("BLOB", ["UNHEX('89504E470D0A1A0A00')", "''", "NULL"], False),
    "json": ("JSON", ["'{\"k\": [1, 2.5, \"x\"]}'", "'[]'", "'{\"k\": \"é\"}'", "NULL"], False),
    "geometry": ("GEOMETRY NULL", ["ST_GeomFromText('POINT(1 2)')",
                                   "ST_GeomFromText('LINESTRING(0 0,1 1.5)')",
                                   "ST_GeomFromText('POLYGON((0 0,10 0,10 10,0 10,0 0))')",
                                   "NULL"], False),
    "point": ("POINT NULL", ["ST_GeomFromText('POINT(-1.5 2.25)')",
                             "ST_GeomFromText('POINT(0.1 1e20)')", "NULL"], False),
    "uuid": ("UUID", [*_uuid_values(), "NULL"], False),
    "inet6": ("INET6", [*_inet6_values(60), "NULL"], False),
}
# fmt: on

# what may be a key (an index on the column: its text is in the key's name)
NOT_KEYED = {"blob", "json", "geometry", "point"}
# MariaDB's own types: left out on MySQL, their tests say so
MARIADB_TYPES = {
    "uuid": "UUID is a MariaDB type (MySQL keeps UUIDs in BINARY(16) or CHAR(36))",
    "inet6": "INET6 is a MariaDB type",
}
MARIADB_ONLY_SQL = "system versioning (WITH SYSTEM VERSIONING) is MariaDB's"


def _type_params(names: list[str]) -> list[object]:
    return [
        pytest.param(n, marks=pytest.mark.engine("mariadb", why=MARIADB_TYPES[n]))
        if n in MARIADB_TYPES
        else n
        for n in names
    ]


def _types(kind: str) -> dict[str, tuple[str, list[str], bool]]:
    """TYPES that the server of ``kind`` (``mariadb``, ``mysql``) has."""
    return {n: t for n, t in TYPES.items() if kind == "mariadb" or n not in MARIADB_TYPES}


def _mapping_text(kind: str) -> str:
    lines = ["version: 1", "tables:"]
    for name, (_, _, scorable) in _types(kind).items():
        lines.append(f"  t_{name}:")
        if name not in NOT_KEYED:
            lines.append("    indexes: [c]")
        if scorable:
            lines.append(f"    sorted:\n      - key: 't_{name}:by:c'\n        score: c")
    return "\n".join(lines) + "\n"


def _schema_sql(kind: str) -> str:
    out = ["SET SESSION sql_mode = ''; SET SESSION time_zone = '+05:00';"]
    for name, (ctype, values, _) in _types(kind).items():
        out.append(f"CREATE TABLE t_{name} (id INT PRIMARY KEY, c {ctype}, n INT);")
        out.append(f"INSERT INTO t_{name} VALUES (1, {values[0]}, 1);")
    return "\n".join(out)


def _log_writes(name: str, values: list[str]) -> list[str]:
    """Transactions for one table: every value inserted, changed, set NULL, a primary key
    moved, a row deleted (never the highest: the counter is compared too)."""
    t = f"t_{name}"
    head = "SET SESSION sql_mode = ''; SET SESSION time_zone = '+05:00'; "
    inserts = ", ".join(f"({i + 2}, {v}, {i})" for i, v in enumerate(values))
    return [
        head + f"INSERT INTO {t} VALUES {inserts}",
        head + f"UPDATE {t} SET c = {values[1]} WHERE id = 1",
        head + f"UPDATE {t} SET c = {values[0]}, n = n + 1 WHERE id = 2",
        head + f"UPDATE {t} SET c = NULL WHERE id = 4",
        head + f"UPDATE {t} SET id = 100 WHERE id = 3",
        head + f"UPDATE {t} SET c = {values[-2]} WHERE id = 5",
        head + f"DELETE FROM {t} WHERE id = 6",
    ]


@pytest.fixture(scope="module")
def both_ways(
    binlog_server, redis_server_url: str, redis_test_db: int
) -> Iterator[tuple[dict, dict]]:  # type: ignore[no-untyped-def,type-arg]
    """(what sync wrote through the log, what migrate writes for the same rows)."""
    db = create_database(binlog_server.url, new_database_name())
    url = redis_db_url(redis_server_url, redis_test_db)
    client = redis.Redis.from_url(url)
    try:
        client.flushdb()
        kind = binlog_server.kind
        db.run(_schema_sql(kind))
        mapping = parse_mapping(_mapping_text(kind), name="types")
        sid = next(_ids)
        loaded = sync(mapping, source=db.url, target=url, until_caught_up=True, server_id=sid)
        assert loaded.snapshot is not None
        for name, (_, values, _) in _types(kind).items():
            for txn in _log_writes(name, values):
                db.run(txn)
        followed = sync(mapping, source=db.url, target=url, until_caught_up=True, server_id=sid)
        assert followed.snapshot is None and followed.rows_changed > 7 * len(_types(kind))
        through_log = dump(client)
        client.flushdb()
        report = migrate(mapping, source=db.url, target=url)
        assert report.exit_code == 0
        printed = {
            name: {f"t_{name}:{i}".encode(): text.encode() for i, text in db.query(
                f"SELECT id, CAST(c AS CHAR) FROM t_{name} WHERE c IS NOT NULL")}
            for name in MARIADB_TYPES if kind == "mariadb"
        }  # fmt: skip
        yield through_log, dump(client), printed
    finally:
        client.flushdb()
        client.close()
        drop_database(binlog_server.url, db.name)


@pytest.mark.parametrize("name", _type_params(list(TYPES)))
def test_through_the_log_as_migrate_writes_it(both_ways, name: str) -> None:  # type: ignore[no-untyped-def]
    through_log, migrated, _ = both_ways
    prefix = f"t_{name}:".encode()
    mine = {k: v for k, v in through_log.items() if k.startswith(prefix)}
    theirs = {k: v for k, v in migrated.items() if k.startswith(prefix)}
    assert len(theirs) >= len(TYPES[name][1])  # rows, index sets, counter...
    assert mine == theirs


@pytest.mark.engine("mariadb", why=MARIADB_TYPES["uuid"] + "; " + MARIADB_TYPES["inet6"])
@pytest.mark.parametrize("name", ["uuid", "inet6"])
def test_uuid_and_inet6_are_the_text_mariadb_prints(both_ways, name: str) -> None:  # type: ignore[no-untyped-def]
    through_log, migrated, printed = both_ways
    assert len(printed[name]) >= len(TYPES[name][1]) - 3  # NULLs, the deleted row
    for key, text in printed[name].items():
        assert migrated[key][1][b"c"] == text
        assert through_log[key][1][b"c"] == text


@pytest.mark.parametrize(
    "raw, text",
    [("0000000000000000000000000000ffff", b"::ffff"), ("00010000000100010001000100010001",
     b"1::1:1:1:1:1:1"), ("00010000000000010000000000010001", b"1::1:0:0:1:1"),
     ("00010000000000010000000000000001", b"1:0:0:1::1"),
     ("000000000000000000000000c0a80001", b"::192.168.0.1"), ("00010002", b"1:2::")],
)  # fmt: skip
def test_inet6_text_as_mariadb_compresses_it(raw: str, text: bytes) -> None:
    """A single zero group is compressed too, the first run wins a tie; the log cuts the
    trailing zero bytes (the last case)."""
    assert inet6_text(bytes.fromhex(raw)) == text


def test_inet4_and_uuid_from_their_cut_binary_form() -> None:
    assert inet4_text(bytes([192, 168, 1])) == b"192.168.1.0"
    assert uuid_text(b"") == b"00000000-0000-0000-0000-000000000000"


@pytest.mark.engine("mariadb", why=MARIADB_TYPES["uuid"] + "; " + MARIADB_TYPES["inet6"])
@pytest.mark.parametrize("fast", [True, False], ids=["binlog_rows", "library"])
def test_uuid_and_inet6_on_both_decoding_paths(binlog_db, fast: bool) -> None:  # type: ignore[no-untyped-def]
    """The fast decoder and the library's give the same text as the snapshot."""
    start = master_position(binlog_db)
    values = [*zip(_uuid_values(), _inet6_values(8)), ("NULL", "NULL")]
    binlog_db.run(
        "CREATE TABLE ui (id INT PRIMARY KEY, u UUID, i INET6); INSERT INTO ui VALUES "
        + ", ".join(f"({n}, {u}, {i})" for n, (u, i) in enumerate(values))
    )
    mapping = "version: 1\ntables:\n  ui:\n    counter: false\n"
    snap = _snapshot(binlog_db.url, mapping)["ui"]
    logged = _binlog(binlog_db, start, mapping, fast)["ui"]
    assert len(logged) == len(snap) == len(values)
    for image in logged:
        assert image == snap[image[0]]


# -- system-versioned tables ---------------------------------------------------------------

VERSIONED = """
CREATE TABLE sv (id INT PRIMARY KEY, a VARCHAR(10)) WITH SYSTEM VERSIONING;
CREATE TABLE sx (id INT PRIMARY KEY, a VARCHAR(10),
  s TIMESTAMP(6) GENERATED ALWAYS AS ROW START INVISIBLE,
  e TIMESTAMP(6) GENERATED ALWAYS AS ROW END INVISIBLE,
  PERIOD FOR SYSTEM_TIME (s, e)) WITH SYSTEM VERSIONING;
CREATE TABLE st (id INT PRIMARY KEY, a VARCHAR(10),
  s TIMESTAMP(6) GENERATED ALWAYS AS ROW START,
  e TIMESTAMP(6) GENERATED ALWAYS AS ROW END,
  PERIOD FOR SYSTEM_TIME (s, e)) WITH SYSTEM VERSIONING;
CREATE TABLE trx (id INT PRIMARY KEY, a VARCHAR(10),
  s BIGINT UNSIGNED GENERATED ALWAYS AS ROW START,
  e BIGINT UNSIGNED GENERATED ALWAYS AS ROW END,
  PERIOD FOR SYSTEM_TIME (s, e)) ENGINE=InnoDB WITH SYSTEM VERSIONING;
"""
VERSIONED_TABLES = ("sv", "sx", "st")
VERSIONED_MAPPING = "version: 1\ntables:\n" + "".join(
    f"  {t}:\n    indexes: [a]\n" for t in VERSIONED_TABLES
)


@pytest.mark.engine("mariadb", why=MARIADB_ONLY_SQL)
def test_system_versioned_tables_keep_exactly_the_current_rows(  # type: ignore[no-untyped-def]
    binlog_db, redis_url: str, redis_client: redis.Redis
) -> None:
    binlog_db.run(VERSIONED)
    for t in VERSIONED_TABLES:
        binlog_db.run(f"INSERT INTO {t} (id, a) VALUES (1, 'x'), (2, 'y'), (3, 'z'), (5, 'q')")
    mapping = parse_mapping(VERSIONED_MAPPING, name="versioned")
    sid = next(_ids)
    sync(mapping, source=binlog_db.url, target=redis_url, until_caught_up=True, server_id=sid)
    for t in VERSIONED_TABLES:
        # an UPDATE logs the old version as an INSERT, a DELETE is an UPDATE ending the row
        binlog_db.run(f"UPDATE {t} SET a = 'w' WHERE id = 1")
        binlog_db.run(f"DELETE FROM {t} WHERE id = 2")
        binlog_db.run(f"INSERT INTO {t} (id, a) VALUES (4, 'n')")
        binlog_db.run(f"UPDATE {t} SET id = 30 WHERE id = 3")
        binlog_db.run(f"UPDATE {t} SET a = 'v' WHERE id = 4")
        binlog_db.run(f"DELETE HISTORY FROM {t}")  # history rows deleted: no current row changes
        binlog_db.run(f"DELETE FROM {t} WHERE id = 5")
    followed = sync(
        mapping, source=binlog_db.url, target=redis_url, until_caught_up=True, server_id=sid
    )
    assert followed.transactions >= 7 * len(VERSIONED_TABLES)
    report = verify(mapping, source=binlog_db.url, target=redis_url)
    assert report.exit_code == 0, report.as_dict()
    assert redis_client.hgetall("sv:1") == {b"a": b"w"}
    assert redis_client.smembers("sv:indices:a:n") == set()
    assert redis_client.smembers("sv:indices:a:v") == {b"4"}
    assert not redis_client.exists("sv:2", "sv:3", "sv:5")
    through_log = dump(redis_client)
    redis_client.flushdb()
    assert migrate(mapping, source=binlog_db.url, target=redis_url).exit_code == 0
    assert through_log == dump(redis_client)


@pytest.mark.engine("mariadb", why=MARIADB_ONLY_SQL)
def test_transaction_precise_versioning_is_refused_at_start(binlog_db, redis_url: str) -> None:  # type: ignore[no-untyped-def]
    """MariaDB logs its changes as statements even with binlog_format=ROW."""
    binlog_db.run(VERSIONED)
    mapping = parse_mapping(_tables_mapping("sv", "trx"), name="trx")
    with pytest.raises(MigratorError) as caught:
        sync(mapping, source=binlog_db.url, target=redis_url, until_caught_up=True,
             server_id=next(_ids))  # fmt: skip
    assert caught.value.exit_code == 2
    text = str(caught.value)
    assert "trx: transaction-precise system versioning (ROW END e is a transaction id)" in text
    assert "sv:" not in text


# -- foreign keys whose rules change rows without a trace in the log -------------------------

CASCADES = """
CREATE TABLE parent (id INT PRIMARY KEY, name VARCHAR(10));
CREATE TABLE child (id INT PRIMARY KEY, parent_id INT, x VARCHAR(10),
  CONSTRAINT fk_child_parent FOREIGN KEY (parent_id) REFERENCES parent (id)
  ON DELETE CASCADE ON UPDATE CASCADE);
CREATE TABLE nulled (id INT PRIMARY KEY, parent_id INT, y VARCHAR(10),
  CONSTRAINT fk_nulled_parent FOREIGN KEY (parent_id) REFERENCES parent (id)
  ON DELETE SET NULL ON UPDATE SET NULL);
CREATE TABLE grand (a INT, b INT, child_id INT, PRIMARY KEY (a, b),
  CONSTRAINT fk_grand_child FOREIGN KEY (child_id) REFERENCES child (id) ON DELETE CASCADE);
CREATE TABLE kept (id INT PRIMARY KEY, parent_id INT,
  CONSTRAINT fk_kept_parent FOREIGN KEY (parent_id) REFERENCES parent (id) ON DELETE RESTRICT);
CREATE TABLE plain (id INT PRIMARY KEY, parent_id INT,
  CONSTRAINT fk_plain_parent FOREIGN KEY (parent_id) REFERENCES parent (id));
CREATE TABLE tree (id INT PRIMARY KEY, up INT,
  CONSTRAINT fk_tree_up FOREIGN KEY (up) REFERENCES tree (id) ON DELETE CASCADE);
INSERT INTO tree VALUES (1, NULL), (2, 1), (3, 2), (4, 1), (5, NULL), (6, 5);
CREATE TABLE named (code VARCHAR(5) PRIMARY KEY);
CREATE TABLE by_code (id INT PRIMARY KEY, code VARCHAR(5),
  CONSTRAINT fk_by_code FOREIGN KEY (code) REFERENCES named (code) ON DELETE CASCADE);
INSERT INTO parent VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd'), (5, 'e');
INSERT INTO child VALUES (1, 1, 'p'), (2, 1, 'q'), (3, 2, 'p'), (4, 4, 'r'), (5, 5, 's');
INSERT INTO nulled VALUES (1, 1, 'u'), (2, 2, 'u'), (3, 3, 'v');
INSERT INTO grand VALUES (1, 1, 1), (1, 2, 2), (2, 1, 3), (2, 2, 4);
"""

FOLLOWED = """
version: 1
tables:
  parent: {}
  child:
    references: [{columns: [parent_id], table: parent}]
    indexes: [x]
  nulled:
    references: [{columns: [parent_id], table: parent}]
    indexes: [y]
    latest: [{key: "nulled:latest", order_by: parent_id, limit: 2}]
  grand:
    references: [{columns: [child_id], table: child}]
  tree:
    references: [{columns: [up], table: tree}]
"""


def _tables_mapping(*tables: str) -> str:
    return "version: 1\ntables:\n" + "".join(f"  {t}: {{}}\n" for t in tables)


# RESP2 as well: what redis-py before 8 speaks, where HGETALL's raw reply is a flat list
@pytest.mark.parametrize("protocol", ["", "?protocol=2"], ids=["default", "resp2"])
def test_cascades_are_applied_from_the_parents_change(  # type: ignore[no-untyped-def]
    binlog_db, redis_url: str, redis_client: redis.Redis, protocol: str
) -> None:
    binlog_db.run(CASCADES)
    mapping = parse_mapping(FOLLOWED, name="cascades")
    sid = next(_ids)
    target = redis_url + protocol
    sync(mapping, source=binlog_db.url, target=target, until_caught_up=True, server_id=sid)
    writes = [
        "DELETE FROM parent WHERE id = 1",  # child 1, 2 and their grand rows go; nulled 1 NULL
        "UPDATE parent SET id = 20 WHERE id = 2",  # child 3 follows to 20; nulled 2 NULL
        # in one transaction: a child inserted, then its parent deleted (read from the group)
        "INSERT INTO child VALUES (9, 3, 'n'); INSERT INTO grand VALUES (9, 9, 9); "
        "DELETE FROM parent WHERE id = 3",
        # a child changed, then its parent deleted, in one transaction
        "UPDATE child SET x = 'changed' WHERE id = 4; DELETE FROM parent WHERE id = 4",
        "UPDATE parent SET name = 'same key' WHERE id = 5",  # no cascade
        "DELETE FROM tree WHERE id = 1",  # a cascade down its own table: 2, 3, 4 go too
    ]
    for sql in writes:
        binlog_db.run(sql)
    sync(mapping, source=binlog_db.url, target=target, until_caught_up=True, server_id=sid)
    report = verify(mapping, source=binlog_db.url, target=redis_url)
    assert report.exit_code == 0, report.as_dict()
    assert redis_client.hgetall("child:3") == {b"parent_id": b"20", b"x": b"p"}
    assert redis_client.hgetall("nulled:1") == {b"y": b"u"}
    assert not redis_client.exists("child:1", "child:9", "grand:1:1", "grand:9:9", "child:4")
    assert sorted(redis_client.scan_iter("tree:[0-9]*")) == [b"tree:5", b"tree:6"]
    through_log = dump(redis_client)
    redis_client.flushdb()
    assert migrate(mapping, source=binlog_db.url, target=redis_url).exit_code == 0
    migrated = dump(redis_client)
    # the counter keeps its rule: child 9 was handed out, MAX(pk) is 5 now
    assert through_log.pop(b"child:id")[1] == b"9" and migrated.pop(b"child:id")[1] == b"5"
    assert through_log == migrated


@pytest.mark.parametrize(
    "mapping, table, constraint, rule, why",
    [(_tables_mapping("parent", "child") + "  grand:\n    columns: []\n", "grand",
      "fk_grand_child", "ON DELETE CASCADE",
      "the foreign key's columns child_id are not read by the mapping"),
     # a cascade of a cascade through a table left out (parent left out alone is followed:
     # tests/sync/test_cascade_unmapped.py)
     (FOLLOWED.replace("  child:\n    references: [{columns: [parent_id], table: parent}]\n"
                       "    indexes: [x]\n", ""), "grand", "fk_grand_child", "ON DELETE CASCADE",
      "the parent table child is not in the mapping and its own rows change by its foreign key "
      "fk_child_parent -> parent ON DELETE CASCADE, ON UPDATE CASCADE")],
    # (a _ci key of a child with expire: is followed since: tests/sync/test_cascade_expiry.py)
)  # fmt: skip
@pytest.mark.engine(
    "mariadb", why="MySQL 9.7 logs the rows its SQL-layer foreign keys' cascades change, so "
    "sync refuses none of these there (tests/sync/test_cascade_keys.py)",
)  # fmt: skip
def test_sync_refuses_a_cascade_it_cannot_apply_exactly_naming_the_constraint(  # type: ignore[no-untyped-def]
    binlog_db, redis_url: str, redis_client: redis.Redis, tmp_path: Path,
    mapping: str, table: str, constraint: str, rule: str, why: str,
) -> None:  # fmt: skip
    binlog_db.run(CASCADES)
    path = tmp_path / "m.yaml"
    path.write_text(mapping)
    result = CliRunner().invoke(
        app, ["sync", str(path), "--source", binlog_db.url, "--target", redis_url,
              "--until-caught-up", "--server-id", str(next(_ids))],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    message = " ".join(result.output.split())
    assert f"{table}: foreign key {constraint} (" in message and rule in message
    assert why in message
    assert redis_client.dbsize() == 0  # refused before anything is written
    problems = validate(path, source=binlog_db.url).problems
    warned = [p for p in problems if "sync refuses" in p.message]
    mine = [p for p in warned if p.path == f"tables.{table}"]
    assert len(mine) == 1 and constraint in mine[0].message and why in mine[0].message, problems
    assert not [p for p in warned if p.path in ("tables.parent", "tables.named")]


def _above(drafted: str, table: str) -> str:
    """The comment lines init writes above a table."""
    return drafted.split(f"\n  {table}:\n")[0].rsplit("\n\n", 1)[1]


def test_init_says_how_sync_treats_each_cascade_and_its_draft_is_followed(  # type: ignore[no-untyped-def]
    binlog_db, redis_url: str
) -> None:
    binlog_db.run(CASCADES)
    drafted = init(binlog_db.url).render()
    assert "sync applies fk_child_parent's ON DELETE CASCADE, ON UPDATE CASCADE" in _above(
        drafted, "child"
    )
    # a key under a _ci collation: found by its comparison key (test_cascade_collations.py)
    assert "sync applies fk_by_code's ON DELETE CASCADE" in " ".join(
        _above(drafted, "by_code").replace("#", "").split()
    )
    assert "sync" not in _above(drafted, "kept") and "sync" not in _above(drafted, "plain")
    # the draft is followed exactly
    tables = ["parent", "child", "nulled", "grand", "tree", "kept", "plain", "named", "by_code"]
    mapping = parse_mapping(init(binlog_db.url, tables=tables).render(), name="drafted")
    sid = next(_ids)
    sync(mapping, source=binlog_db.url, target=redis_url, until_caught_up=True, server_id=sid)
    binlog_db.run("DELETE FROM parent WHERE id = 1; UPDATE parent SET id = 22 WHERE id = 2")
    binlog_db.run("DELETE FROM tree WHERE id = 1")
    binlog_db.run(
        "INSERT INTO named VALUES ('Ab'), ('cd'); INSERT INTO by_code VALUES "
        "(1, 'ab'), (2, 'AB'), (3, 'cd'); DELETE FROM named WHERE code = 'AB'"
    )
    sync(mapping, source=binlog_db.url, target=redis_url, until_caught_up=True, server_id=sid)
    report = verify(mapping, source=binlog_db.url, target=redis_url)
    assert report.exit_code == 0, report.as_dict()


def test_a_restrict_foreign_key_is_followed(binlog_db, redis_url: str) -> None:  # type: ignore[no-untyped-def]
    binlog_db.run(CASCADES)
    mapping = parse_mapping(_tables_mapping("parent", "kept", "plain"), name="kept")
    sid = next(_ids)
    sync(mapping, source=binlog_db.url, target=redis_url, until_caught_up=True, server_id=sid)
    binlog_db.run(
        "INSERT INTO parent VALUES (12, 'b'); INSERT INTO kept VALUES (1, 12); "
        "INSERT INTO plain VALUES (1, 12); UPDATE plain SET parent_id = 5"
    )
    sync(mapping, source=binlog_db.url, target=redis_url, until_caught_up=True, server_id=sid)
    assert verify(mapping, source=binlog_db.url, target=redis_url).exit_code == 0


# -- the counter rule under sync ------------------------------------------------------------


def test_verify_exits_0_after_sync_applies_the_delete_of_the_highest_row(  # type: ignore[no-untyped-def]
    binlog_db, redis_url: str, redis_client: redis.Redis
) -> None:
    binlog_db.run(
        "CREATE TABLE item (id INT AUTO_INCREMENT PRIMARY KEY, name VARCHAR(10));"
        "INSERT INTO item (name) VALUES ('a'), ('b'), ('c');"
    )
    mapping = parse_mapping(_tables_mapping("item"), name="counter")
    sid = next(_ids)
    sync(mapping, source=binlog_db.url, target=redis_url, until_caught_up=True, server_id=sid)
    assert redis_client.get("item:id") == b"3"
    binlog_db.run("INSERT INTO item (name) VALUES ('d'), ('e')")
    binlog_db.run("DELETE FROM item WHERE id IN (4, 5)")  # the highest rows
    sync(mapping, source=binlog_db.url, target=redis_url, until_caught_up=True, server_id=sid)
    assert redis_client.get("item:id") == b"5"  # raised by the inserts, not lowered
    report = verify(mapping, source=binlog_db.url, target=redis_url)
    assert report.exit_code == 0, report.as_dict()
