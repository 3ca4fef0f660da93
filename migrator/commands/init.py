"""``migrator init``: draft a mapping from the live schema (and what its rows say); over
several shards (``shards``), from the first one's, once every shard is found to hold the same
tables (docs/sharding.md#init)."""

from __future__ import annotations

from collections.abc import Sequence

from migrator.commands.shards import connect
from migrator.errors import MigratorError
from migrator.mapping.loader import parse_mapping
from migrator.mapping.profile import questions
from migrator.mapping.resolve import resolve
from migrator.mapping.scaffold import Draft, draft, source_setting
from migrator.mapping.schema import Schema
from migrator.mapping.shard_schemas import FIX as SCHEMA_FIX
from migrator.mapping.shard_schemas import table_differences
from migrator.plan.planner import TablePlan
from migrator.source.distinct import count_distinct
from migrator.source.mysql import Source
from migrator.source.probe import rejected_rows


def init(
    source: str, tables: list[str] | None = None, shards: Sequence[tuple[str, str]] = ()
) -> Draft:
    """Read the live schema at ``source``, count what the draft needs to know of the rows
    (``mapping.profile``: one scan per table asked about), and draft its mapping. Where the
    draft would reject rows (a separator inside a value of an ambiguous composite under the
    default ``escape: reject``), the draft says how many per table and sets
    ``escape: backslash`` on those tables alone (the other tables' keys stay as they are).
    ``shards`` ((name, URL), ...; ``source`` unused): a ``sources:`` mapping drafted from the
    first shard's schema and rows, its rejected rows counted on every shard; shards whose
    tables differ are refused (exit 2, naming the differences), one that does not answer
    exits 3 naming it."""
    if not shards:
        with Source(source) as src:
            return _drafted([src], src.schema(), source, tables)
    opened: list[Source] = []
    try:
        schemas: dict[str, Schema] = {}
        for name, url in shards:
            src, schemas[name] = connect(name, url)
            opened.append(src)
        schema = schemas[shards[0][0]]
        names = sorted({n for s in schemas.values() for n in s.tables})
        found = [p for n in names if not tables or n in tables
                 for p in table_differences(n, schemas)]  # fmt: skip
        if found:
            raise MigratorError("the shards do not hold one schema: " + "; ".join(found),
                                SCHEMA_FIX)  # fmt: skip
        d = _drafted(opened, schema, shards[0][1], tables)
        d.shards = tuple((name, source_setting(url, password_variable(name)))
                         for name, url in shards)  # fmt: skip
        return d
    finally:
        for src in opened:
            src.close()


def password_variable(shard: str) -> str:
    """The environment variable a shard's password is read from in the draft."""
    return "MYSQL_PASSWORD_" + shard.upper().replace("-", "_")


def _drafted(srcs: list[Source], schema: Schema, source: str, tables: list[str] | None) -> Draft:
    src = srcs[0]
    names = [n for n in schema.tables if not tables or n in tables]
    asked = {n: questions(schema.tables[n]) for n in names}
    profile = count_distinct(src.engine, asked)
    d = draft(schema, source=source, tables=tables, profile=profile)
    if d.mapped:
        mapping = parse_mapping(d.render())
        for t in d.mapped:
            try:
                (r,) = resolve(mapping, schema, [t.name])
            except MigratorError:  # validate will say what is wrong with it
                continue
            n = sum(rejected_rows(s, TablePlan(r)) for s in srcs)
            if n:
                d.rejects[r.name] = n
    return d
