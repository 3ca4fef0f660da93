"""What every command reading a sharded source (``sources:``) starts with: each shard
connected (one that does not answer stops the command with exit 3, naming the shard and its
URL, password masked), its schema read and checked against the first shard's (a table or
column that differs stops it with exit 2, naming them: the shards hold one schema), and the
mapping's tables resolved, as one source (``opened_union``; ``opened_any`` for any mapping);
and what dry-run and verify add to their reports over the shards: a line per shard, the
collisions found. migrate's loop over the shards: commands/shard_loads.py. docs/sharding.md
says what each command does over the shards."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from migrator.commands.session import opened, refuse_invalid, select_tables, shards
from migrator.errors import ConnectError, MigratorError, docs
from migrator.mapping.model import Mapping, Table
from migrator.mapping.resolve import Resolved, resolve
from migrator.mapping.schema import Schema
from migrator.mapping.shard_schemas import FIX as SCHEMA_FIX
from migrator.mapping.shard_schemas import ORDER_FIX, order_differences, table_differences
from migrator.plan.owners import UNION
from migrator.source.mysql import Source
from migrator.source.shards import Union
from migrator.source.where import clause
from migrator.urls import mask
from migrator.verify.report import COLLIDING, TableCheck


def connect(name: str, url: str) -> tuple[Source, Schema]:
    """A shard's source and schema; ConnectError (exit 3) naming the shard when it fails."""
    src = Source(url)
    try:
        return src, src.schema()
    except ConnectError as e:
        src.close()
        raise ConnectError(
            f"shard {name} ({mask(url)}): {e.message}",
            e.hint or "check that the shard's server is up, or load the others with --shard",
        ) from None


def refuse_different(table: Table, first: str, name: str, want: Schema, got: Schema) -> None:
    """Exit 2 when shard ``name``'s table differs from the first shard's as validate says it
    (mapping/shard_schemas.py: columns, types whose values print otherwise, primary key; a
    column ordering a latest list under another collation)."""
    problems = table_differences(table.name, {first: want, name: got})
    if problems:
        raise MigratorError("; ".join(problems), SCHEMA_FIX)
    problems = order_differences(table, {first: want, name: got})
    if problems:
        raise MigratorError("; ".join(problems), ORDER_FIX)


@contextmanager
def opened_union(
    mapping: Mapping, tables: list[str] | None = None
) -> Iterator[tuple[Union, list[Resolved]]]:
    """Every shard connected and checked, as one source (source/shards.py ``Union``), and
    the tables resolved for the union (the owner of a row: the shard it is read from)."""
    only = select_tables(mapping, tables)
    sources: list[tuple[str, Source]] = []
    try:
        schemas = []
        for shard in shards(mapping):
            src, schema = connect(shard.name, shard.url)
            sources.append((shard.name, src))
            refuse_invalid(mapping, schema, only)
            schemas.append(schema)
        resolved = resolve(mapping, schemas[0], only, shard=UNION)
        first = sources[0][0]
        for (name, _), schema in zip(sources[1:], schemas[1:]):
            for r in resolved:
                refuse_different(r.table, first, name, schemas[0], schema)
        uniques = {r.name: [u.columns for u in r.table.unique] for r in resolved}
        yield Union(sources, uniques), resolved
    finally:
        for _, src in sources:
            src.close()


@contextmanager
def opened_any(
    mapping: Mapping, source: str | None = None, tables: list[str] | None = None
) -> Iterator[tuple[Source, list[Resolved]]]:
    """``session.opened`` for a mapping of one source; the union of the shards for a
    sharded one."""
    if not mapping.sources:
        with opened(mapping, source, tables) as got:
            yield got
        return
    shards(mapping, source)  # --source refused
    with opened_union(mapping, tables) as (union, resolved):
        yield union, resolved  # type: ignore[misc]  # (a Source in all it is asked)


def shard_lines(src: object, resolved: list[Resolved]) -> list[str]:
    """For a union of shards: a line per shard, its rows (those the tables' row filters
    keep) and the snapshot they were read in; [] for one source."""
    if not isinstance(src, Union):
        return []
    out = []
    for name, shard in src.sources:
        rows = sum(shard.count(r.name, clause(r)) for r in resolved)
        taken = src.snapshots.get(name)
        at = f", read from {taken.describe()}" if taken is not None else ""
        out.append(f"shard {name} ({shard.shown_url}): {rows:,} rows{at}")
    return out


def note_overlaps(src: object, checks: list[TableCheck]) -> None:
    """The collisions a pass over the union of the shards found (source/overlaps.py), as
    differences of their tables (exit 1), each named with its shards and SQL."""
    if not isinstance(src, Union):
        return
    for check in checks:
        n = src.overlaps.counts.get(check.table, 0)
        if not n:
            continue
        for o in src.overlaps.listed.get(check.table, []):
            what = "primary key" if o.primary else f"unique {', '.join(o.columns)}"
            shards = f"a {what} on shards {o.other} and {o.shard}"
            check.add(COLLIDING, f"({check.table})", o.sql, shards, f"{o.other}'s row")
        rest = n - len(src.overlaps.listed.get(check.table, []))
        if rest > 0:
            check.add(COLLIDING, f"({check.table})", None, "(more collisions)", n=rest)
        check.notes += [o.describe() for o in src.overlaps.listed.get(check.table, [])[:3]]
        check.notes.append(
            f"{n:,} row(s) collide with an earlier shard's (a primary key or unique value two "
            "shards hold): Redis holds the earlier shard's row; not repaired by --fix "
            f"({docs('sharding.md#collisions')})"
        )
