"""Every column type the suite covers, read by each reader, is the text the server prints
(issue 18, item 2).

The types and values are those of sync's hard cases (tests/sync/test_hard_cases.py: every
integer width, BIT, DECIMAL scales, FLOAT and DOUBLE extremes, zero and partial dates, TIME
beyond 24 h and negative, YEAR, padded CHAR, latin1 text, ENUM, SET, BINARY with trailing
zeros, BLOB, JSON, geometries, UUID and INET6 where the server has them), all values in one
table per type. Each table is read through ``Source.batches`` (migrate's path: the select
expression, the raw bytes, the value converter) by asyncmy and by PyMySQL, and every value is
compared with the server's own text of the same expression, ``HEX(CONCAT(expr))`` (for text
columns, ``CONVERT(c USING utf8mb4)``: the session's character set), fetched as hex digits and
put through the same converter: what the reader hands on is what the server printed.
"""

from __future__ import annotations

from typing import Any

import pymysql
import pytest
import sqlalchemy as sa

from migrator.mapping.kinds import Kind
from migrator.source.drivers import RAW_DRIVER_ENV
from migrator.source.mysql import Source
from migrator.source.selects import column_expr
from tests.sync.test_hard_cases import TYPES

READERS = ("asyncmy", "pymysql")
MODULES = {"asyncmy": "migrator.source.asyncmy_sync", "pymysql": "pymysql"}


@pytest.fixture
def typed(mysql_db: Any) -> tuple[str, list[str]]:
    """``t_<type>`` (id, c) with every value of the type; the types this server lacks (UUID
    and INET6 on MySQL) are left out. Returns the database URL and the types made."""
    made = []
    for name, (ctype, values, _) in TYPES.items():
        rows = ", ".join(f"({i}, {v})" for i, v in enumerate(values, 1))
        try:
            mysql_db.run(
                "SET SESSION sql_mode = ''; SET SESSION time_zone = '+05:00';"
                f"CREATE TABLE t_{name} (id INT PRIMARY KEY, c {ctype});"
                f"INSERT INTO t_{name} VALUES {rows};"
            )
        except pymysql.err.MySQLError:
            assert name in ("uuid", "inet6"), name  # only these are MariaDB's alone
            continue
        made.append(name)
    return mysql_db.url, made


@pytest.mark.parametrize("reader", READERS)
def test_every_type_is_what_the_server_prints(
    typed: tuple[str, list[str]], reader: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, names = typed
    monkeypatch.setenv(RAW_DRIVER_ENV, reader)
    checked = 0
    with Source(url) as src:
        assert type(src.raw_connection()).__module__.startswith(MODULES[reader])
        schema = src.schema()
        for name in names:
            table, values = f"t_{name}", TYPES[name][1]
            column = schema.tables[table].column("c")
            selector = src.selector(table, ["id", "c"])
            read = [row for batch in src.batches(table, selector, ["id"], 3) for row in batch]
            t = sa.table(table, sa.column("id"), sa.column("c"))
            expr = column_expr(column, t)
            if column.kind is Kind.TEXT:
                expr = sa.text("CONVERT(`c` USING utf8mb4)")
            printed = src.fetch_all(
                sa.select(t.c.id, sa.func.hex(sa.func.concat(expr))).order_by(t.c.id)
            )
            assert len(read) == len(printed) == len(values), name
            convert = selector.converters[1]
            for (key, value), (_, hexed) in zip(read, printed):
                text = None if hexed is None else bytes.fromhex(hexed.decode())
                expected = text if text is None or convert is None else convert(text)
                assert value == expected, (reader, name, key, value, expected)
                assert value is None or isinstance(value, bytes)
                checked += 1
    assert checked >= sum(len(TYPES[n][1]) for n in names) > 100
