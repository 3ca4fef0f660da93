"""One set of bytes (issue 36 item 2): random values of every column type, written through
INSERT and UPDATE while ``sync`` follows, leave Redis byte for byte as a fresh ``migrate`` of
the same rows writes it, on both engines. Fixed seeds by default (each failure names its seed);
``MIGRATOR_SEED=N`` runs another one."""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable

import pytest
import redis

from migrator.commands import migrate
from migrator.commands.sync import sync
from migrator.mapping.loader import parse_mapping
from tests.services import create_database, drop_database, new_database_name
from tests.test_workers import snapshot as dump

_ids = iter(range(8600, 8700))
SEEDS = [int(os.environ["MIGRATOR_SEED"])] if os.environ.get("MIGRATOR_SEED") else [1, 2]
ROWS = 8

Gen = Callable[[random.Random], str]  # a random SQL literal of the type


def _digits(rnd: random.Random, n: int) -> str:
    return "".join(rnd.choice("0123456789") for _ in range(n)) or "0"


def _decimal(m: int, d: int) -> Gen:
    def gen(rnd: random.Random) -> str:
        whole = _digits(rnd, rnd.randint(0, m - d)).lstrip("0") or "0"
        frac = _digits(rnd, rnd.randint(0, d)) if d else ""
        sign = rnd.choice(["", "-"])
        return f"{sign}{whole}.{frac}" if frac else f"{sign}{whole}"

    return gen


def _float(scale: float) -> Gen:
    def gen(rnd: random.Random) -> str:
        pick = rnd.random()
        if pick < 0.1:
            return rnd.choice(["0", "-1", "1", "0.5"])
        value = rnd.uniform(-scale, scale)
        if pick < 0.3:
            value *= 10 ** rnd.randint(-12, 12)
        return repr(value)

    return gen


def _moment(rnd: random.Random, lo: int, hi: int, fsp: int) -> str:
    import datetime

    at = datetime.datetime(1970, 1, 1) + datetime.timedelta(seconds=rnd.randint(lo, hi))
    micro = f".{rnd.randint(0, 999999):06d}" if fsp else ""
    return f"'{at:%Y-%m-%d %H:%M:%S}{micro}'"


def _time(rnd: random.Random) -> str:
    sign = rnd.choice(["", "-"])
    return f"'{sign}{rnd.randint(0, 838):02d}:{rnd.randint(0, 59):02d}:{rnd.randint(0, 59):02d}.{rnd.randint(0, 999999):06d}'"  # noqa: E501


CHARS = {  # characters each character set holds (both engines, Python's codecs agree)
    "latin1": "aZ09 _-'\\\"éüñßÀÿ¿©",
    "utf8mb4": "aZ09 _-'\\\"é€😀漢字ñ𝄞\u00a0ع",
    "utf8mb3": "aZ09 _-'é€漢字ñ",
    "utf16": "aZ09 é€😀漢字",
    "utf16le": "aZ09 é€😀漢字",
    "utf32": "aZ09 é€😀漢字",
    "ucs2": "aZ09 é€漢字",
    "gbk": "aZ09 汉字中文",
    "big5": "aZ09 漢字中文",
    "sjis": "aZ09 あいうカタ",
    "cp1251": "aZ09 Привет",
    "ascii": "aZ09 _-'!~",
}


def _text(charset: str) -> Gen:
    def gen(rnd: random.Random) -> str:
        body = "".join(rnd.choice(CHARS[charset]) for _ in range(rnd.randint(0, 12)))
        body = body.replace("\\", "\\\\").replace("'", "''")
        return f"_utf8mb4'{body}' COLLATE utf8mb4_bin"

    return gen


def _json(rnd: random.Random) -> str:
    def value(depth: int) -> object:
        pick = rnd.randint(0, 6 if depth < 3 else 3)
        if pick == 0:
            return rnd.randint(-(2**53), 2**53)
        if pick == 1:
            return rnd.choice([0.5, -2.25, 1e20, 3.0, 123.456])
        if pick == 2:
            return "".join(rnd.choice(CHARS["utf8mb4"]) for _ in range(rnd.randint(0, 5)))
        if pick == 3:
            return rnd.choice([True, False, None])
        if pick in (4, 5):
            return {f"k{i}": value(depth + 1) for i in range(rnd.randint(0, 3))}
        return [value(depth + 1) for _ in range(rnd.randint(0, 3))]

    text = json.dumps(value(0), ensure_ascii=False).replace("\\", "\\\\").replace("'", "''")
    return f"'{text}'"


TYPES: dict[str, tuple[str, Gen]] = {
    "double_m_d": ("DOUBLE(14,6)", _decimal(8, 6)),
    "double_m_0": ("DOUBLE(10,0)", _decimal(9, 0)),
    "float_m_d": ("FLOAT(7,3)", _decimal(4, 3)),
    "float": ("FLOAT", _float(1e6)),
    "double": ("DOUBLE", _float(1e12)),
    "decimal_wide": ("DECIMAL(65,30)", _decimal(35, 30)),
    "decimal_frac": ("DECIMAL(10,10)", _decimal(10, 10)),
    "decimal_int": ("DECIMAL(18,0) UNSIGNED", lambda r: _digits(r, r.randint(1, 18))),
    "datetime6": ("DATETIME(6)", lambda r: _moment(r, -10**10, 2 * 10**11, 6)),
    "datetime2": ("DATETIME(2)", lambda r: _moment(r, -10**10, 2 * 10**11, 6)),
    "timestamp3": ("TIMESTAMP(3) NULL", lambda r: _moment(r, 86400, 2**31 - 86400, 3)),
    "date": ("DATE", lambda r: _moment(r, -10**10, 2 * 10**11, 0)[:11] + "'"),
    "time4": ("TIME(4)", _time),
    "year": ("YEAR", lambda r: str(r.choice([0, 1901, 2155, r.randint(1901, 2155)]))),
    "bit1": ("BIT(1)", lambda r: str(r.randint(0, 1))),
    "bit64": ("BIT(64)", lambda r: str(r.randint(0, 2**64 - 1))),
    "tiny_unsigned": ("TINYINT UNSIGNED", lambda r: str(r.randint(0, 255))),
    "bigint": ("BIGINT", lambda r: str(r.randint(-(2**63), 2**63 - 1))),
    "set": ("SET('a','b c','d')",
            lambda r: "'" + ",".join(r.sample(["a", "b c", "d"], r.randint(0, 3))) + "'"),
    "enum": ("ENUM('x','y z','')", lambda r: r.choice(["'x'", "'y z'", "''"])),
    "json": ("JSON", _json),
    "varbinary": ("VARBINARY(20)", lambda r: f"X'{r.randbytes(r.randint(0, 20)).hex()}'"),
    "binary5": ("BINARY(5)", lambda r: f"X'{r.randbytes(r.randint(0, 5)).hex()}'"),
    "point": ("POINT", lambda r: f"ST_GeomFromText('POINT({r.uniform(-180, 180)!r} "
                                 f"{r.uniform(-90, 90)!r})')"),
    **{f"text_{cs}": (f"VARCHAR(20) CHARACTER SET {cs}", _text(cs)) for cs in CHARS},
}  # fmt: skip
NOT_KEYED = {"json", "point", "varbinary", "binary5"}  # no index set on these


def _sql(kind: str, rnd: random.Random) -> tuple[str, list[str]]:
    """The tables with their first rows, and the writes sync follows."""
    head = "SET SESSION sql_mode = ''; SET SESSION time_zone = '+05:00'; "
    create, writes = [head], []
    for name, (ctype, gen) in TYPES.items():
        t = f"t_{name}"
        create.append(f"CREATE TABLE {t} (id INT PRIMARY KEY, c {ctype});")
        create.append(f"INSERT INTO {t} VALUES (1, {gen(rnd)});")
        rows = ", ".join(f"({i}, {gen(rnd)})" for i in range(2, ROWS + 2))
        writes.append(head + f"INSERT INTO {t} VALUES {rows}")
        for i in range(1, ROWS + 2):
            writes.append(head + f"UPDATE {t} SET c = {gen(rnd)} WHERE id = {i}")
        writes.append(head + f"UPDATE {t} SET c = NULL WHERE id = 2")
        writes.append(head + f"DELETE FROM {t} WHERE id = 3")
    if kind == "mysql":
        create.append(
            "CREATE TABLE t_vector (id INT PRIMARY KEY, c VECTOR(3), "
            "t VARCHAR(10) CHARACTER SET latin1, u VARCHAR(10) CHARACTER SET utf16);"
        )
        vec = lambda: "STRING_TO_VECTOR('[" + ",".join(  # noqa: E731
            repr(rnd.uniform(-5, 5)) for _ in range(3)) + "]')"  # fmt: skip
        create.append(f"INSERT INTO t_vector VALUES (1, {vec()}, 'é', '€');")
        writes.append(f"INSERT INTO t_vector VALUES (2, {vec()}, 'ü', '漢'), (3, {vec()}, '', '')")
        writes.append(f"UPDATE t_vector SET c = {vec()}, t = 'ñ', u = '😀' WHERE id = 1")
    return "\n".join(create), writes


def _mapping(kind: str) -> str:
    lines = ["version: 1", "tables:"]
    names = [*TYPES, *(["vector"] if kind == "mysql" else [])]
    for name in names:
        lines.append(f"  t_{name}:")
        lines.append("    indexes: [c]" if name not in NOT_KEYED | {"vector"} else "    {}")
    return "\n".join(lines).replace(":\n    {}", ": {}") + "\n"


@pytest.mark.parametrize("seed", SEEDS)
def test_sync_writes_every_type_as_migrate_does(  # type: ignore[no-untyped-def]
    binlog_server, redis_url: str, seed: int
) -> None:
    kind = binlog_server.kind
    rnd = random.Random(seed)
    create, writes = _sql(kind, rnd)
    db = create_database(binlog_server.url, new_database_name())
    client = redis.Redis.from_url(redis_url)
    try:
        db.run(create)
        m = parse_mapping(_mapping(kind), name="bytes")
        sid = next(_ids)
        assert sync(m, source=db.url, target=redis_url, until_caught_up=True,
                    server_id=sid).snapshot is not None  # fmt: skip
        for txn in writes:
            db.run(txn)
        followed = sync(m, source=db.url, target=redis_url, until_caught_up=True, server_id=sid)
        assert followed.snapshot is None and followed.rows_changed >= len(writes)
        through_log = dump(client)
        client.flushdb()
        assert migrate(m, source=db.url, target=redis_url).exit_code == 0
        migrated = dump(client)
        differ = sorted(k for k in through_log.keys() | migrated.keys()
                        if through_log.get(k) != migrated.get(k))  # fmt: skip
        shown = [(k, through_log.get(k), migrated.get(k)) for k in differ[:5]]
        assert not differ, f"seed {seed} ({kind}): sync, migrate: {shown}"
    finally:
        client.flushdb()
        client.close()
        drop_database(binlog_server.url, db.name)
