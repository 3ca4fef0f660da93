"""``sync`` over a sharded source (docs/sharding.md#sync): one process per shard.

``migrator sync MAPPING --shard NAME`` follows that shard's binary log only; its state, lock,
first-load progress and fingerprints are its own (``migrator:<m>:sync:<shard>``,
``migrator:<m>:sync:<shard>:lock``), so the processes of two shards run side by side against
one Redis without touching each other's. What they share (the tables' keys, index and unique
structures, counters) each writes for its own rows only, so the union stays exact:

* a counter is raised, never set, by every shard (its first load included): the highest
  primary key over every shard wins, whichever shard finishes last;
* a first load or ``--reload`` removes no other shard's keys, and a DDL whose effect would
  remove or re-read a table's keys for every shard (TRUNCATE, a re-snapshot) stops that
  shard's process (exit 1) with the fix, leaving the others following;
* latest lists are merged over the shards' newest rows (sync/shard_latest.py).

This module holds those rules, so the coordinator and the online snapshot only ask it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from migrator.errors import MigratorError, docs
from migrator.mapping.model import Mapping
from migrator.plan.batch import Command
from migrator.plan.planner import TablePlan
from migrator.reports import SchemaChanged
from migrator.source.binlog.reconnect import surfaced
from migrator.source.mysql import Source
from migrator.source.where import clause
from migrator.store.sync_state import raise_counter
from migrator.sync.shard_latest import finish

TEMPLATE = "migrator-sync@.service"


def refuse_unsharded(m: Mapping, shard: str | None) -> None:
    """A sharded mapping is followed one shard per process: without ``--shard``, exit 2
    naming the shards and the service template that runs one each."""
    if not m.sources or shard is not None:
        return
    names = [s.name for s in m.sources]
    per = "; ".join(f"migrator sync {m.file or 'MAPPING'} --shard {n}" for n in names)
    raise MigratorError(
        f"the mapping names a sharded source ({', '.join(names)}): sync follows one shard's "
        "binary log per process",
        f"run one sync per shard: {per} (as a service: {TEMPLATE} with --shard %i, "
        f"{docs('sharding.md#sync')})",
    )


def refuse_resnapshot(tables: Sequence[str], shard: str) -> None:
    """``--resnapshot`` removes a table's keys, every shard's: refused for one shard (exit 2)."""
    if shard and tables:
        raise MigratorError(
            f"--resnapshot {tables[0]} would remove the keys of every shard's rows of that "
            f"table, but this sync follows shard {shard} only",
            f"reload this shard with 'migrator sync MAPPING --shard {shard} --reload' "
            f"({docs('sharding.md#sync')})",
        )


def counter_keys(plan: TablePlan) -> set[bytes]:
    """The table's counter key (none without ``counter:``)."""
    cmd = plan.counter_command(b"0")
    return set() if cmd is None else {cmd[1]}


def refuse_changed(changed: Sequence[tuple[str, str]], shard: str) -> None:
    """A table the mapping changed since the shard's load is re-read online by an unsharded
    sync, removing its keys first (every shard's): one shard's sync stops (exit 2)."""
    if shard and changed:
        table, why = changed[0]
        raise MigratorError(
            f"the mapping changed table '{table}' since shard {shard}'s load ({why}); its keys "
            "hold every shard's rows, so one shard's sync does not re-read it",
            f"reload every shard: 'migrator sync MAPPING --shard NAME --reload' for each "
            f"({docs('sharding.md#sync')})",
        )


def shard_ends(
    client: Any, src: Source, plan: TablePlan, ends: Sequence[Command], shard: str, m: Mapping
) -> list[Command]:
    """A table's end-of-load commands (plan/finish.py) for one shard: its latest lists merged
    with the other shards' newest (sync/shard_latest.py), its counter raised."""
    names = [s.name for s in m.sources]
    where = clause(plan.resolved)
    merged = surfaced(lambda: finish(client, src, plan, ends, shard, names, where),
                      f"finishing {plan.table.name}", src.close)  # fmt: skip
    return raised(merged, counter_keys(plan))


def raised(commands: Sequence[Command], counters: set[bytes]) -> list[Command]:
    """A table's end-of-load commands with its counter (``SET key MAX(pk)``) raised instead:
    another shard's higher key must stay (the highest over every shard wins)."""
    out: list[Command] = []
    for c in commands:
        if c[0] == b"SET" and len(c) == 3 and c[1] in counters:
            out.append(raise_counter(c[1], int(c[2])))
        else:
            out.append(c)
    return out


def shard_resnapshot(shard: str) -> Callable[[str, str], None]:
    """The re-snapshot hook of a shard's follower: a DDL that would read a table again stops
    this shard's process (exit 1, its position kept); the other shards keep following."""

    def stop(table: str, reason: str) -> None:
        raise SchemaChanged(
            f"table '{table}' on shard {shard} needs a re-snapshot: {reason}; this shard's "
            "sync stopped before the statement (everything up to it is applied, its position "
            "kept; the other shards' processes keep following)",
            f"apply the change on every shard and fix the mapping if it must change, then "
            f"'migrator sync MAPPING --shard {shard} --reload' for each shard "
            f"({docs('sharding.md#sync')})",
        )

    return stop


def truncate_stops(shard: str, table: str, where: str) -> SchemaChanged:
    """A TRUNCATE on one shard: the table's keys hold every shard's rows, so removing them
    all is wrong; this shard's process stops (exit 1) before it, its position kept."""
    return SchemaChanged(
        f"{where}: table '{table}' was truncated on shard {shard}; its keys hold every "
        "shard's rows, so this shard's sync stopped before the statement (its position kept)",
        f"'migrator sync MAPPING --shard {shard} --reload' reloads this shard's rows "
        f"({docs('sharding.md#sync')})",
    )
