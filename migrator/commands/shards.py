"""What every command reading a sharded source (``sources:``) starts with: each shard
connected (one that does not answer stops the command with exit 3, naming the shard and its
URL, password masked), its schema read and checked against the first shard's (a table or
column that differs stops it with exit 2, naming them: the shards hold one schema), and the
mapping's tables resolved. docs/sharding.md says what each command does over the shards."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from migrator.commands.session import opened, refuse_invalid, select_tables, shards
from migrator.errors import ConnectError, MigratorError, docs
from migrator.mapping.model import Mapping
from migrator.mapping.resolve import Resolved, resolve
from migrator.mapping.schema import Schema
from migrator.plan.owners import UNION
from migrator.plan.planner import TablePlan
from migrator.reports import MigrateReport
from migrator.retry import Retrying
from migrator.source.mysql import Source
from migrator.source.shards import Union
from migrator.source.where import clause
from migrator.store.checkpoint import Checkpoint, removal_pending
from migrator.store.claims import COLLISION
from migrator.store.cluster import connect_any
from migrator.store.shard_keys import refuse_irreversible, remove_shard_rows
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


def spelt(column_type: str) -> str:
    """A column's type as both engines agree on it: an integer's display width left out
    (MariaDB spells ``int(11)`` what MySQL 8.0.19+ spells ``int``)."""
    return re.sub(r"^((?:tiny|small|medium|big)?int)\(\d+\)", r"\1", column_type.lower())


def refuse_different(table: str, first: str, name: str, want: Schema, got: Schema) -> None:
    """Exit 2 when shard ``name``'s table differs from the first shard's (columns, types)."""
    mine, theirs = want.tables[table], got.tables.get(table)
    hint = "the shards of one mapping hold one schema: apply the same DDL on every shard"
    if theirs is None:
        raise MigratorError(f"shard {name} has no table '{table}' (shard {first} has)", hint)
    cols = {c.name: c for c in theirs.columns}
    for c in mine.columns:
        other = cols.pop(c.name, None)
        if other is None:
            raise MigratorError(
                f"{table}.{c.name}: shard {name} has no such column (shard {first} has)", hint
            )
        if (spelt(other.column_type), other.kind) != (spelt(c.column_type), c.kind):
            raise MigratorError(
                f"{table}.{c.name}: shard {first} has {c.column_type}, shard {name} has "
                f"{other.column_type}",
                hint,
            )
    if cols:
        extra = next(iter(cols))
        raise MigratorError(
            f"{table}.{extra}: shard {name} has this column, shard {first} has not", hint
        )
    if theirs.primary_key != mine.primary_key:
        raise MigratorError(
            f"{table}: the primary key is {list(mine.primary_key)} on shard {first}, "
            f"{list(theirs.primary_key)} on shard {name}",
            hint,
        )


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
                refuse_different(r.name, first, name, schemas[0], schema)
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


# -- migrate: shard by shard ----------------------------------------------------------------
def run_name(mapping_name: str, shard: str) -> str:
    """The name a shard's load keeps its checkpoint under: ``migrator:<m>@<shard>:checkpoint``
    (a table done on one shard is not done on another)."""
    return f"{mapping_name}@{shard}"


@dataclass(frozen=True)
class ShardPart:
    """One shard's load within a run over a sharded source (commands/migrate.py ``part``)."""

    name: str
    url: str
    mapping: str
    ends: Union  # every shard: each table's counter and latest lists are the union's
    checkpoints: tuple[str, ...]  # every shard's ``run_name``

    @property
    def run_name(self) -> str:
        return run_name(self.mapping, self.name)


def run_shards(
    m: Mapping,
    only: str | None,
    source: str | None,
    replace: bool,
    tables: list[str] | None,
    load_one: Callable[[ShardPart, bool], MigrateReport],
    finished: Callable[[ShardPart, list[str]], bool] | None = None,
) -> MigrateReport:
    """``migrate`` of a sharded mapping: every shard answers and holds one schema (else
    exit 3 / 2 before anything is written), then each shard (``only``: that one) is loaded
    in turn by ``load_one(part, first)``, in a snapshot of its own; ``replace`` removes the
    mapping's keys once, before the first (``tables``: of these tables; ``replace`` with
    ``only``: ``reload_shard``). ``finished``
    (``--resume``): whether a shard's checkpoint records a finished load of these tables:
    that shard is left as it is. The reports are merged: a table's rows per shard
    (``table@shard``), and a note per shard."""
    chosen = shards(m, source, only)
    with opened_union(m, tables) as (union, resolved):
        names = tuple(run_name(m.name, s.name) for s in m.sources)
        parts = [ShardPart(s.name, s.url, m.name, union, names) for s in chosen]
        reports: list[tuple[ShardPart, MigrateReport]] = []
        skipped: list[str] = []
        for p in parts:
            if finished is not None and finished(p, [r.name for r in resolved]):
                skipped.append(p.name)
            else:
                reports.append((p, load_one(p, not reports)))
    if not reports:
        raise MigratorError(
            f"--resume refused: nothing is left to resume: every shard's checkpoint records a "
            f"finished load ({', '.join(skipped)})",
            f"load again: migrator migrate {m.file or 'MAPPING'} --replace",
        )
    out = merged(reports)
    out.notes += [f"shard {name}: its checkpoint records a finished load; not loaded again "
                  "(--resume)" for name in skipped]  # fmt: skip
    return out


def finished_on(target: str) -> Callable[[ShardPart, list[str]], bool]:
    """``--resume`` over shards: whether a shard's checkpoint records a finished load of the
    tables (commands/shards.py ``run_shards`` leaves that shard as it is)."""

    def finished(part: ShardPart, tables: list[str]) -> bool:
        client = connect_any(target)
        try:
            states = Checkpoint(client, part.run_name).load()
        finally:
            client.close()
        done = [states.get(t) for t in tables]
        return not removal_pending(states) and all(s is not None and s.done for s in done)

    return finished


def reload_shard(
    m: Mapping,
    only: str,
    target: str,
    tables: list[str] | None,
    retrying: Retrying,
    load_one: Callable[[ShardPart, bool], MigrateReport],
) -> MigrateReport:
    """``migrate --replace --shard NAME``: NAME's rows removed from Redis, found by the owner
    hash and undone write by write (store/shard_keys.py), then NAME loaded again by
    ``load_one``; other shards' rows are not touched. Counters and latest lists are rebuilt
    over every shard, as any load does."""
    (chosen,) = shards(m, None, only)
    with opened_union(m, tables) as (union, resolved):
        names = tuple(run_name(m.name, s.name) for s in m.sources)
        part = ShardPart(chosen.name, chosen.url, m.name, union, names)
        plans = [TablePlan(dataclasses.replace(r, shard=chosen.name)) for r in resolved]
        refuse_irreversible(plans)
        client = connect_any(target)
        try:
            removed = remove_shard_rows(client, plans, chosen.name, retrying)
        finally:
            client.close()
        loaded = load_one(part, False)
    out = merged([(part, loaded)])
    out.removed = removed
    out.notes.append(
        f"--replace --shard {only}: the {removed:,} row(s) Redis held from shard {only} were "
        "removed (their keys and members), then the shard loaded again; other shards' rows "
        "were not touched"
    )
    return out


def merged(reports: list[tuple[ShardPart, MigrateReport]]) -> MigrateReport:
    """One report of the shards' loads."""
    first = reports[0][1]
    out = MigrateReport(
        mapping=first.mapping,
        source=", ".join(f"{p.name}: {r.source}" for p, r in reports),
        target=first.target,
        tables=[],
    )
    for p, r in reports:
        for t in r.tables:
            t.table = f"{t.table}@{p.name}"
            out.tables.append(t)
        out.seconds += r.seconds
        out.rerun = out.rerun or r.rerun
        out.recoveries += [f"shard {p.name}: {x}" for x in r.recoveries]
        if r.removed is not None:
            out.removed = (out.removed or 0) + r.removed
        out.notes.append(f"shard {p.name} ({r.source}): {r.rows:,} rows; {r.consistency}")
        out.notes += [n for n in r.notes if n not in out.notes]
    out.consistency = "per shard: each shard in a snapshot of its own (see its note)"
    collided = sum(t.rejected.get(COLLISION, 0) for t in out.tables)
    if collided:
        out.notes.append(
            f"{collided:,} row(s) collide with another shard's (a primary key or unique value "
            "two shards hold): not written; Redis keeps the first shard's row "
            f"({docs('sharding.md#collisions')})"
        )
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
