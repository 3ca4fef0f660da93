"""docs/values.md, per engine: every value `migrate` writes is byte for byte what that engine's
own command-line client prints for it (``mariadb -B`` on MariaDB, MySQL's ``mysql -B`` on
MySQL), not a list of expected strings.

One table of every type the engine has (VECTOR on MySQL; invisible and generated columns; a
functional index on MySQL, an index on a virtual column on MariaDB, which has no functional
indexes; a ``utf8mb3`` table beside the ``utf8mb4`` one) is loaded with edge values, migrated,
and each column is printed by the client in batch mode (``\\t``, ``\\n``, ``\\\\`` and ``\\0``
escaped, undone here) in a session at ``time_zone = '+00:00'`` as the tool's. The documented
exceptions are printed the way docs/values.md says the tool writes them: BIT as
``CAST(b AS UNSIGNED)``, geometries as ``ST_AsText(g)``; FLOAT, which both clients print with 6
significant digits, is left to test_the_engines_differ_where_docs_values_says.
"""

from __future__ import annotations

import subprocess
from typing import Any

import pytest
import redis

from migrator.commands import migrate
from migrator.mapping.loader import parse_mapping
from tests.services import MySQLDatabase, cli_args, cli_argv, cli_env, is_mariadb

# outcome decided by migrate's worker count: again in CI with MIGRATOR_WORKERS=4
pytestmark = pytest.mark.workers

COMMON = """
  i8 TINYINT, u64 BIGINT UNSIGNED, i64 BIGINT, b BIT(10), b1 BIT(1),
  d DECIMAL(10,2), d0 DECIMAL(30,0), f FLOAT, g DOUBLE,
  dt DATETIME, dt3 DATETIME(3), dt6 DATETIME(6), ts TIMESTAMP(3) NULL, da DATE,
  t TIME, t3 TIME(3), t6 TIME(6), y YEAR,
  c CHAR(10), s VARCHAR(40), tx TEXT, l1 VARCHAR(20) CHARACTER SET latin1,
  e ENUM('small','large'), st SET('a','b','c'),
  bn BINARY(4), vb VARBINARY(16), bl BLOB, j JSON, geo GEOMETRY NULL, pt POINT NULL,
  hidden INT INVISIBLE,
  gv VARCHAR(50) AS (CONCAT(s, '!')) VIRTUAL,
  gs INT AS (i8 * 2) STORED"""

# (values of COMMON's columns but the generated ones, in order), per row; the engines' own
# ranges differ: MySQL's TIME ends at 838:59:59.000000, MariaDB's at 838:59:59.999999
ROWS = [
    "127, 18446744073709551615, -9223372036854775808, b'1111111111', b'1', 1234.5, "
    "123456789012345678901234567890, 1.2345678, 0.1, '2020-01-02 03:04:05', "
    "'2021-06-01 00:00:00', '2020-01-02 03:04:05.123456', '2020-06-01 12:00:00.5', "
    "'2020-01-02', '-12:30:00', '{t3max}', '-838:59:59', 2021, 'pad  ', "
    "'héllo wörld 漢字 \U0001f600', 'tab\\there\\nnewline \\\\ back', 'café', 'large', 'a,c', "
    "UNHEX('00FF0A00'), UNHEX('00FF0A0D5C09'), UNHEX('89504E470D0A1A0A00'), "
    '\'{{"b": 1, "a": [1.50, true, null], "c": {{"z": "x"}}}}\', '
    "ST_GeomFromText('POLYGON((0 0,1 0,1 1,0 0))'), ST_GeomFromText('POINT(1 2)'), 42",
    "-128, 0, 0, b'0', b'0', -0.5, 0, -2.5, 1e300, '0000-00-00 00:00:00', "
    "'1000-01-01 00:00:00.001', '9999-12-31 23:59:59.999999', '1970-01-01 05:00:01', "
    "'0000-00-00', '100:00:00', '-00:00:01.500', '00:00:00.000001', 1901, '', '', '', '', "
    "'small', '', UNHEX('00'), '', '', '[]', ST_GeomFromText('LINESTRING(0 0,1 1.5)'), "
    "ST_GeomFromText('POINT(-0.5 1e10)'), NULL",
    "0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 3.4028234e38, NULL, NULL, NULL, NULL, NULL, "
    "NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, "
    "'\"just a string\"', NULL, NULL, 0",
]
NAMES = [
    "i8", "u64", "i64", "b", "b1", "d", "d0", "f", "g", "dt", "dt3", "dt6", "ts", "da", "t",
    "t3", "t6", "y", "c", "s", "tx", "l1", "e", "st", "bn", "vb", "bl", "j", "geo", "pt",
    "hidden",
]  # fmt: skip
GENERATED = ["gv", "gs"]


def _schema(mariadb: bool) -> str:
    t3max = "838:59:59.999" if mariadb else "838:59:59.000"
    vector = "" if mariadb else ", vec VECTOR(3)"
    index = "KEY ix_gv (gv)" if mariadb else "KEY ix_fn ((LOWER(s)))"
    parts = [
        "SET SESSION sql_mode = ''; SET SESSION time_zone = '+05:00';",
        f"CREATE TABLE v (id INT PRIMARY KEY,{COMMON}{vector}, {index}) CHARACTER SET utf8mb4;",
        f"CREATE TABLE v3 (id INT PRIMARY KEY,{COMMON}, {index}) CHARACTER SET utf8mb3;",
    ]
    names = ", ".join(NAMES)
    for table in ("v", "v3"):
        for i, row in enumerate(ROWS, 1):
            values = row.format(t3max=t3max)
            if table == "v3":  # utf8mb3 holds no 4-byte character
                values = values.replace(" \U0001f600", "")
            extra_names, extra = "", ""
            if table == "v" and not mariadb:
                extra_names = ", vec"
                extra = [", STRING_TO_VECTOR('[1, -2.5, 3.4028234e38]')",
                         ", STRING_TO_VECTOR('[0,0,0]')", ", NULL"][i - 1]  # fmt: skip
            parts.append(
                f"INSERT INTO {table} (id, {names}{extra_names}) VALUES ({i}, {values}{extra});"
            )
    return "\n".join(parts)


def _printed_as(column: str, mariadb: bool) -> str:
    """The expression the client prints for ``column`` as docs/values.md says it is written."""
    if column in ("b", "b1"):
        return f"CAST({column} AS UNSIGNED)"
    if column in ("geo", "pt"):
        return f"ST_AsText({column})"
    return column


def _unescape(text: bytes) -> bytes:
    """Undo the client's batch-mode escapes (\\0 \\b \\n \\r \\t \\\\)."""
    out, i = bytearray(), 0
    codes = {ord("0"): 0, ord("b"): 8, ord("n"): 10, ord("r"): 13, ord("t"): 9, ord("\\"): 92}
    while i < len(text):
        if text[i] == 92 and i + 1 < len(text) and text[i + 1] in codes:
            out.append(codes[text[i + 1]])
            i += 2
        else:
            out.append(text[i])
            i += 1
    return bytes(out)


def client_prints(db: MySQLDatabase, sql: str) -> list[list[bytes | None]]:
    """The rows the engine's own client prints for ``sql`` (batch mode, UTC), unescaped;
    ``None`` for its NULL."""
    argv = [*cli_argv(db.url), *cli_args(db.url), "--batch", "--skip-column-names",
            "--init-command=SET time_zone = '+00:00'", "-e", sql]  # fmt: skip
    if not is_mariadb(db.server_url):
        argv.insert(len(cli_argv(db.url)), "--skip-binary-as-hex")
    done = subprocess.run(argv, capture_output=True, env=cli_env(db.url), timeout=120)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    rows = []
    for line in done.stdout.split(b"\n")[:-1]:
        rows.append([None if v == b"NULL" else _unescape(v) for v in line.split(b"\t")])
    return rows


@pytest.fixture
def loaded(
    mysql_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis
) -> tuple[MySQLDatabase, redis.Redis, bool]:
    mariadb = is_mariadb(mysql_db.server_url)
    mysql_db.run(_schema(mariadb))
    columns = [*NAMES, *GENERATED] + ([] if mariadb else ["vec"])
    listed = "\n".join(f"      - {c}" for c in columns)
    v3 = "\n".join(f"      - {c}" for c in [*NAMES, *GENERATED])
    mapping = parse_mapping(
        f"version: 1\ntables:\n  v:\n    counter: false\n    columns:\n{listed}\n"
        f"  v3:\n    counter: false\n    columns:\n{v3}\n"
    )
    report = migrate(mapping, source=mysql_db.url, target=redis_url)
    assert report.rows == 6 and report.exit_code == 0
    return mysql_db, redis_client, mariadb


@pytest.mark.parametrize("table", ["v", "v3"])
def test_every_value_is_what_the_engines_client_prints(
    loaded: tuple[MySQLDatabase, redis.Redis, bool], table: str
) -> None:
    db, client, mariadb = loaded
    columns = [*NAMES, *GENERATED] + ([] if mariadb or table == "v3" else ["vec"])
    columns.remove("f")  # both clients print 6 digits; the tool writes the 32-bit float
    exprs = ", ".join(_printed_as(c, mariadb) for c in columns)
    printed = client_prints(db, f"SELECT id, {exprs} FROM {table} ORDER BY id")
    assert len(printed) == len(ROWS)
    checked = 0
    for row in printed:
        stored: dict[bytes, Any] = client.hgetall(f"{table}:{row[0].decode()}")  # type: ignore[union-attr]
        for column, value in zip(columns, row[1:]):
            assert stored.get(column.encode()) == value, (table, row[0], column, value)
            checked += 1
    assert checked == len(ROWS) * len(columns)


def test_the_engines_differ_where_docs_values_says(
    loaded: tuple[MySQLDatabase, redis.Redis, bool],
) -> None:
    """The differences docs/values.md lists, on this engine: JSON (MariaDB keeps the text as
    written, MySQL prints its normalised form), TIME's range; and FLOAT, which both clients
    print with 6 significant digits, written as the shortest text of the 32-bit float."""
    db, client, mariadb = loaded
    if mariadb:
        assert client.hget("v:1", "j") == b'{"b": 1, "a": [1.50, true, null], "c": {"z": "x"}}'
        assert client.hget("v:1", "t3") == b"838:59:59.999"
    else:
        assert client.hget("v:1", "j") == b'{"a": [1.5, true, null], "b": 1, "c": {"z": "x"}}'
        assert client.hget("v:1", "t3") == b"838:59:59.000"
    assert client_prints(db, "SELECT f FROM v WHERE id = 1") == [[b"1.23457"]]
    assert client.hget("v:1", "f") == b"1.2345678"
    assert client.hget("v:1", "hidden") == b"42"  # an invisible column is read when mapped
