"""Acceptance (issue 3 item 3): on Sakila and employees, ``init`` then ``migrate``, then every
key and every value in Redis is checked against MySQL's own text for each column, read here
with plain SQL (``CAST(col AS CHAR)``, ``HEX(col)`` for binary, ``ST_AsText(col)`` for
geometry), independently of the tool's value encoder and planner."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
import redis
import sqlalchemy as sa
import yaml
from typer.testing import CliRunner

from migrator.cli import app
from migrator.commands import migrate
from migrator.mapping.loader import load_mapping
from migrator.mapping.model import Mapping, Table, Template
from tests.test_json_schema import schema_errors

pytestmark = [pytest.mark.acceptance, pytest.mark.workers]  # workers: as in test_migrate.py

BINARY = {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"}
GEOMETRY = {
    "geometry", "point", "linestring", "polygon", "multipoint", "multilinestring",
    "multipolygon", "geometrycollection",
}  # fmt: skip
Value = bytes | None


class MySQL:
    """Plain SQLAlchemy reads of MySQL's own text for each value, in UTC."""

    def __init__(self, url: str) -> None:
        self.engine = sa.create_engine(
            url, connect_args={"init_command": "SET time_zone = '+00:00'", "charset": "utf8mb4"}
        )
        self.quote = self.engine.dialect.identifier_preparer.quote
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.text(
                    "SELECT TABLE_NAME, COLUMN_NAME, DATA_TYPE, CHARACTER_SET_NAME "
                    "FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE()"
                )
            ).all()
        self.types = {(t, c): (d.lower(), cs) for t, c, d, cs in rows}

    def expr(self, table: str, column: str) -> str:
        data_type, charset = self.types[table, column]
        q = self.quote(column)
        if data_type in BINARY or charset == "binary":
            return f"HEX({q})"
        if data_type in GEOMETRY:
            return f"ST_AsText({q})"
        if data_type == "bit":
            return f"CAST({q} AS UNSIGNED)"
        assert data_type not in ("float",), "FLOAT needs a float32-aware comparison"
        return f"CAST({q} AS CHAR)"

    def rows(self, table: str, columns: list[str]) -> list[dict[str, Value]]:
        sql = f"SELECT {', '.join(self.expr(table, c) for c in columns)} FROM {self.quote(table)}"
        with self.engine.connect() as conn:
            result = conn.execute(sa.text(sql)).all()
        out = []
        for row in result:
            values: dict[str, Value] = {}
            for c, v in zip(columns, row):
                data_type, charset = self.types[table, c]
                if v is None:
                    values[c] = None
                elif data_type in BINARY or charset == "binary":
                    values[c] = bytes.fromhex(v)
                else:
                    values[c] = str(v).encode("utf-8")
            out.append(values)
        return out

    def max_text(self, table: str, column: str) -> bytes:
        q = self.quote
        with self.engine.connect() as conn:
            value = conn.execute(
                sa.text(f"SELECT CAST(MAX({q(column)}) AS CHAR) FROM {q(table)}")
            ).scalar()
        return str(value if value is not None else 0).encode()

    def table_names(self) -> set[str]:
        with self.engine.connect() as conn:
            return set(
                conn.execute(
                    sa.text(
                        "SELECT TABLE_NAME FROM information_schema.TABLES "
                        "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_TYPE = 'BASE TABLE'"
                    )
                ).scalars()
            )


def render(template: Template, values: dict[str, Value]) -> bytes | None:
    out = []
    for part in template.parts:
        if isinstance(part, str):
            out.append(part.encode())
        else:
            v = values[template.columns[part]]
            if v is None:
                return None
            out.append(v)
    return b"".join(out)


class Expected:
    """Every key the mapping must have produced, and its exact content."""

    def __init__(self) -> None:
        self.hashes: dict[bytes, dict[bytes, bytes]] = {}
        self.sets: dict[bytes, set[bytes]] = defaultdict(set)
        self.strings: dict[bytes, bytes] = {}

    def keys(self) -> set[bytes]:
        return set(self.hashes) | set(self.sets) | set(self.strings)


def expect_table(db: MySQL, mapping: Mapping, table: Table, exp: Expected) -> None:
    sep = mapping.options.separator.encode()
    name = table.name
    if table.kind == "none":
        pk = list(dict.fromkeys(c for s in table.sets for c in s.key.columns + s.member.columns))
    else:
        assert table.key is not None
        pk = list(table.primary_key or table.key.columns)
    columns = list(table.columns or ())
    needed = list(dict.fromkeys(pk + columns))
    for values in db.rows(name, needed):
        pk_text = sep.join(values[c] or b"" for c in pk)
        if table.kind == "hash":
            assert table.key is not None
            key = render(table.key, values)
            assert key is not None and key not in exp.hashes, key
            fields = {c.encode(): values[c] for c in columns if values[c] is not None}
            exp.hashes[key] = fields or {c.encode(): values[c] or b"" for c in pk}  # type: ignore[misc]
        for u in table.unique:
            assert u.key is None
            if all(values[c] is not None for c in u.columns):
                hkey = sep.join([name.encode(), b"uniques", *(c.encode() for c in u.columns)])
                field = sep.join(values[c] for c in u.columns)  # type: ignore[misc]
                assert field not in exp.hashes.get(hkey, {}), (hkey, field)
                exp.hashes.setdefault(hkey, {})[field] = pk_text
        index_columns = list(
            dict.fromkeys(
                [i.columns for i in table.indexes] + [r.columns for r in table.references]
            )
        )
        for cols in index_columns:
            if all(values[c] is not None for c in cols):
                parts = [name.encode(), b"indices"]
                for c in cols:
                    parts += [c.encode(), values[c]]  # type: ignore[list-item]
                exp.sets[sep.join(parts)].add(pk_text)
        for s in table.sets:
            key, member = render(s.key, values), render(s.member, values)
            if key is not None and member is not None:
                exp.sets[key].add(member)
    if table.counter:
        exp.strings[table.counter.render({}).encode()] = db.max_text(name, pk[0])


def scan(client: redis.Redis, pattern: bytes) -> set[bytes]:
    return set(client.scan_iter(match=pattern, count=5000))


def glob_escape(text: bytes) -> bytes:
    out = b""
    for ch in text:
        c = bytes([ch])
        out += b"\\" + c if c in b"*?[]\\" else c
    return out


def chunks(items: Iterable[bytes], n: int = 2000) -> Iterable[list[bytes]]:
    batch: list[bytes] = []
    for item in items:
        batch.append(item)
        if len(batch) == n:
            yield batch
            batch = []
    if batch:
        yield batch


def compare(client: redis.Redis, exp: Expected) -> list[str]:
    """Differences between Redis and the expectation (empty when identical)."""
    problems: list[str] = []
    for kind, expected, fetch in (
        ("hash", exp.hashes, "hgetall"),
        ("set", exp.sets, "smembers"),
        ("string", exp.strings, "get"),
    ):
        keys = sorted(expected)  # type: ignore[type-var]
        for batch in chunks(keys):
            pipe = client.pipeline(transaction=False)
            for key in batch:
                getattr(pipe, fetch)(key)
            for key, got in zip(batch, pipe.execute()):
                want: Any = expected[key]  # type: ignore[index]
                if got != want:
                    problems.append(f"{kind} {key!r}: redis {_short(got)} != mysql {_short(want)}")
    return problems


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) < 300 else text[:300] + "..."


def run_init_and_migrate(url: str, redis_url: str, tmp_path: Path) -> Mapping:
    out = tmp_path / "drafted.yaml"
    result = CliRunner().invoke(app, ["init", "--source", url, "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert schema_errors(yaml.safe_load(out.read_text(encoding="utf-8"))) == []
    report = migrate(out, source=url, target=redis_url)
    assert report.rejected == 0, report.as_dict()
    return load_mapping(out)


def check_everything(url: str, mapping: Mapping, client: redis.Redis) -> Expected:
    db = MySQL(url)
    assert {t.name for t in mapping.tables} == db.table_names()
    exp = Expected()
    for table in mapping.tables:
        expect_table(db, mapping, table, exp)
    problems = compare(client, exp)
    assert not problems, f"{len(problems)} differences, first: " + "\n".join(problems[:10])
    expected_keys = exp.keys()
    sep = mapping.options.separator.encode()
    for table in mapping.tables:
        prefix = glob_escape(table.name.encode() + sep)
        extra = scan(client, prefix + b"*") - expected_keys
        assert not extra, f"{table.name}: keys no row explains: {sorted(extra)[:5]}"
    everything = {k for k in scan(client, b"*") if not k.startswith(b"migrator:")}
    assert everything == expected_keys
    db.engine.dispose()
    return exp


def _no_index_written_twice(mapping: Mapping) -> None:
    for t in mapping.tables:
        idx = [i.columns for i in t.indexes]
        refs = [r.columns for r in t.references]
        assert not set(idx) & set(refs), t.name


def test_sakila_init_then_migrate_matches_mysql(
    sakila_url: str, redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    mapping = run_init_and_migrate(sakila_url, redis_url, tmp_path)
    _no_index_written_twice(mapping)
    rental = mapping.table("rental")
    assert [u.columns for u in rental.unique] == [("rental_date", "inventory_id", "customer_id")]
    assert mapping.table("film_text").indexes == ()  # FULLTEXT left out
    assert "location" in (mapping.table("address").columns or ())
    exp = check_everything(sakila_url, mapping, redis_client)
    assert len(exp.hashes) > 46_000
    assert exp.strings[b"film:id"] == b"1000"
    assert exp.sets[b"film_actor:indices:film_id:1"]  # the foreign key's SET
    assert (
        redis_client.hget(
            b"address:1",
            b"location",
        )
        is not None
    )


def test_employees_init_then_migrate_matches_mysql(
    employees_url: str, redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    mapping = run_init_and_migrate(employees_url, redis_url, tmp_path)
    _no_index_written_twice(mapping)
    assert [u.columns for u in mapping.table("departments").unique] == [("dept_name",)]
    exp = check_everything(employees_url, mapping, redis_client)
    assert len(exp.hashes) > 130_000
    assert b"departments:uniques:dept_name" in exp.hashes
    assert any(k.startswith(b"salaries:indices:emp_no:") for k in exp.sets)
