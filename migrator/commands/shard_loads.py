"""``migrate`` over a sharded source (docs/sharding.md#migrate): every shard loaded in turn,
each in a snapshot and checkpoint of its own (``run_shards``), one shard alone reloaded
(``reload_shard``), ``--resume`` leaving the shards whose load finished (``finished_on``), and
the shards' reports merged into one (``merged``). commands/migrate.py runs each shard's load
(a ``ShardPart``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from migrator.commands.nested import nesting_trees
from migrator.commands.session import shards
from migrator.commands.shard_nesting import cross_rejects
from migrator.commands.shards import opened_union
from migrator.errors import MigratorError, docs
from migrator.mapping.model import Mapping
from migrator.plan.planner import TablePlan
from migrator.reports import MigrateReport, TableReport
from migrator.retry import Retrying
from migrator.source.shards import Union
from migrator.store.checkpoint import Checkpoint, removal_pending
from migrator.store.cluster import connect_any
from migrator.store.shard_keys import refuse_irreversible, remove_shard_rows


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
    #: the run removed the mapping's keys first (``--replace`` over every shard): what an
    #: earlier run of this shard wrote is gone, whichever part removed it
    replaced: bool = False

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
        parts = [ShardPart(s.name, s.url, m.name, union, names, replace) for s in chosen]
        reports: list[tuple[ShardPart, MigrateReport]] = []
        skipped: list[str] = []
        for p in parts:
            if finished is not None and finished(p, [r.name for r in resolved]):
                skipped.append(p.name)
            else:
                reports.append((p, load_one(p, not reports)))
        # the nested children no shard's documents hold (commands/shard_nesting.py)
        crossed = cross_rejects(union.sources, nesting_trees(m, cast(Any, union), resolved), only)
    if not reports:
        raise MigratorError(
            f"--resume refused: nothing is left to resume: every shard's checkpoint records a "
            f"finished load ({', '.join(skipped)})",
            f"load again: migrator migrate {m.file or 'MAPPING'} --replace",
        )
    out = merged(reports)
    fold(out, crossed)
    out.notes += [f"shard {name}: its checkpoint records a finished load; not loaded again "
                  "(--resume)" for name in skipped]  # fmt: skip
    return out


def fold(out: MigrateReport, crossed: list[TableReport]) -> None:
    """The cross-shard children (commands/shard_nesting.py) into the report's line of their
    table and shard (``tag@west``), one line each."""
    lines = {t.table: t for t in out.tables}
    for t in crossed:
        held = lines.get(t.table)
        if held is None:
            out.tables.append(t)
            continue
        for reason, n in t.rejected.items():
            held.rejected[reason] = held.rejected.get(reason, 0) + n
        held.rejects += t.rejects


def finished_on(target: str) -> Callable[[ShardPart, list[str]], bool]:
    """``--resume`` over shards: whether a shard's checkpoint records a finished load of the
    tables (``run_shards`` leaves that shard as it is)."""

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
        crossed = cross_rejects(union.sources, nesting_trees(m, cast(Any, union), resolved),
                                chosen.name)  # fmt: skip
    out = merged([(part, loaded)])
    fold(out, crossed)
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
    collided = out.collided
    if collided:
        out.notes.append(
            f"{collided:,} row(s) collide with another shard's (a primary key or unique value "
            "two shards hold): not written; Redis keeps the first shard's row "
            f"({docs('sharding.md#collisions')})"
        )
    return out
