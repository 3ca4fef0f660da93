"""migrate's start-up (issue 17 item 7): everything before the first batch, as one step the
caller retries when Redis goes away or loses the run's marker midway — the target checked for
keys in the way and memory (preflight.py), the checkpoint begun or resumed (``--resume``
refuses one bound to another mapping or source), what it vouches for checked, the guard
attached (store/guard.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from migrator.commands.preflight import check_memory, check_target
from migrator.errors import MigratorError, TargetLost
from migrator.mapping.fingerprint import changes, fingerprint
from migrator.mapping.model import Mapping
from migrator.mapping.resolve import Resolved
from migrator.plan.layout import TableLayout
from migrator.plan.planner import TablePlan
from migrator.scaleout.tasks import RANGE
from migrator.source.mysql import Source
from migrator.source.where import clause
from migrator.store.checkpoint import (
    REPLACING,
    Checkpoint,
    TableState,
    removal_pending,
    tables_of,
)
from migrator.store.guard import Guard, new_token, run_id
from migrator.store.sink import Client, transient

#: the name start-up's notes (retries before the first table starts) are shown under
STARTING = "start-up"


@dataclass
class Begun:
    """What start-up established: the run's binding, its checkpoint (marker written), the
    table states to continue from, the guard, and the tables whose checkpoint was dropped."""

    run: dict[str, Any]
    checkpoint: Checkpoint
    state: dict[str, TableState]
    guard: Guard
    recoveries: list[str]
    notes: list[str]


def start_up(
    client: Client,
    m: Mapping,
    src: Source,
    resolved: list[Resolved],
    *,
    replace: bool,
    resume: bool,
    into_existing: bool,
    memory_check: bool,
    part: Any = None,
) -> Begun:
    """Everything before the first batch: the target checked (keys in the way, memory), the
    checkpoint begun or resumed, what it vouches for checked, the guard attached. Repeatable
    as a whole, so the caller retries it when Redis goes away or loses the run's marker
    midway (each try begins the checkpoint afresh or resumes what the target holds then).
    ``part``: a shard's load (commands/shards.py ``ShardPart``): its own checkpoint, and the
    keys an earlier run of any shard wrote are no keys in the way."""
    plans = [TablePlan(r) for r in resolved]
    names = (m.name,) if part is None else part.checkpoints
    check_target(client, m, plans, into_existing=into_existing or replace, names=names)
    if memory_check and not resume and not replace:  # (--replace frees memory first)
        check_memory(client, src, resolved)
    run = {"mapping": fingerprint(m, resolved), "source": src.identity()}
    checkpoint = Checkpoint(client, m.name if part is None else part.run_name)
    notes: list[str] = []
    state = begin(checkpoint, run, resume, m, resolved, replace=replace, notes=notes)
    recoveries = untrusted(src, client, checkpoint, resolved, state)
    assert checkpoint.token is not None
    guard = Guard(checkpoint.key, checkpoint.token, run_id(client))
    try:
        guard.attach(client)
    except TargetLost:
        guard.armed = False  # its check stays on the client's connections: off for a retry
        raise
    return Begun(run, checkpoint, state, guard, recoveries, notes)


def lost_or_transient(e: BaseException) -> str | None:
    """Start-up's retry rule: what is transient anywhere, and a target that lost the run's
    marker before the first batch (start-up then begins again)."""
    return f"the target lost data ({e.message})" if isinstance(e, TargetLost) else transient(e)


def begin(
    checkpoint: Checkpoint,
    run: dict[str, Any],
    resume: bool,
    m: Mapping,
    resolved: list[Resolved],
    *,
    replace: bool,
    notes: list[str],
) -> dict[str, TableState]:
    """The table states to start from: none for a fresh run (its marker and binding
    written; a ``--replace`` run's removal recorded with them, before anything could be
    skipped on its account), else the checkpoint's, once it is proven bound to this mapping
    and source and to be a run still to finish (issue 27 item 1): a ``--replace --resume``
    resumes only a ``--replace`` run's checkpoint (any other starts the replace over), and a
    plain ``--resume`` refuses a checkpoint whose run had finished, for a run stopped before
    its first write (in its first second) leaves no checkpoint of its own: resuming the one
    before it would pass off that run's load, unremoved keys and all, as this one's."""
    if resume:
        marker, was = checkpoint.run()
        states = checkpoint.load()
        if states and (marker is None or was is None):
            raise MigratorError(
                f"--resume refused: the checkpoint in the target ({checkpoint.key}) records "
                "neither the mapping nor the source it was made for (an older migrator)",
                f"start over without --resume: migrator migrate {m.file or 'MAPPING'}",
            )
        if marker is not None and was is not None:
            refuse_changed(was, run, tables_of(states), m)
            done = [states.get(r.name) for r in resolved]
            finished = not removal_pending(states) and all(s and s.done for s in done)
            if replace and (REPLACING not in states or finished):
                why = "it had finished" if finished else "it was not a --replace"
                notes.append(
                    f"--resume found no --replace to finish in the target's checkpoint ({why}): "
                    "this --replace starts over, removing every key the mapping owns, then "
                    "loading every table"
                )
            elif finished:
                name = m.file or "MAPPING"
                raise MigratorError(
                    "--resume refused: nothing is left to resume: the checkpoint in the target "
                    f"({checkpoint.key}) records a run that finished. A run stopped before its "
                    "first write (in its first second) leaves no checkpoint of its own, so "
                    "which load you meant to finish cannot be told",
                    f"load again: migrator migrate {name} --replace (removes the keys the "
                    "mapping owns first: Redis then matches MySQL), or migrator migrate "
                    f"{name} (overwrites; keys of rows deleted since stay)",
                )
            else:
                bound = {**was, "source": run["source"]}
                bound["mapping"] = {
                    "options": run["mapping"]["options"],
                    "tables": {**was["mapping"].get("tables", {}), **run["mapping"]["tables"]},
                }
                checkpoint.token = marker
                checkpoint.bind(bound)
                return states
    checkpoint.begin(new_token(), run, replacing=replace)
    return checkpoint.load()


def untrusted(
    src: Source,
    client: Client,
    checkpoint: Checkpoint,
    resolved: list[Resolved],
    states: dict[str, TableState],
) -> list[str]:
    """Trust a table's checkpoint only while the target holds what it vouches for: the row
    key of the last row it says was written (of the table's last row, once done). A table
    whose key is missing (evicted, deleted, restored from elsewhere) loads again from its
    start: its states are dropped here and in the target. Returns what was dropped, why."""
    out = []
    for r in resolved:
        if r.table.kind != "hash" or not set(r.key.columns) <= set(r.primary_key):
            continue  # no row key made of the primary key alone to look for
        own = {f: s for f, s in states.items() if f == r.name or f.startswith(r.name + RANGE)}
        vouched = [s.after for s in own.values() if s.rows and s.after is not None]
        state = own.get(r.name)
        if state is not None and state.done:
            pk = [r.schema.column(c) for c in r.primary_key]
            last = src.latest(r.name, pk, pk[0], 1, clause(r))  # the last row loaded
            vouched = [tuple(v or b"" for v in row) for row in last]
        keys = [row_key(r, after) for after in vouched]
        missing = [k for k in keys if not client.exists(k)]
        if missing:
            for f in own:
                del states[f]
            checkpoint.forget(list(own))
            out.append(
                f"{r.name}: the checkpoint says rows up to {missing[0].decode(errors='replace')} "
                "were written, but the target lacks that key: loading the table again"
            )
    return out


def row_key(r: Resolved, pk: tuple[bytes, ...]) -> bytes:
    """The row key of the row whose primary key is ``pk`` (raw text), made as the load
    makes it: under ``escape: backslash`` its values escaped (issue 27 item 4)."""
    layout = TableLayout(r)
    row: list[bytes | None] = [None] * len(layout.select)
    for column, value in zip(r.primary_key, pk):
        row[layout.pos[column]] = value
    key = layout.row_key(row)
    assert key is not None  # (every column of the key is in the primary key)
    return key


def refuse_changed(
    was: dict[str, Any], now: dict[str, Any], states: dict[str, TableState], m: Mapping
) -> None:
    """Exit 2 when the checkpoint was made for another source or another mapping."""
    changed = []
    if was.get("source") != now["source"]:
        before, after = was.get("source") or {}, now["source"]
        changed.append(
            f"the source (was database '{before.get('database')}' on {before.get('server')}, "
            f"now '{after['database']}' on {after['server']})"
        )
    tables = sorted({name.split(RANGE, 1)[0] for name in states})
    changed += changes(was.get("mapping", {}), now["mapping"], tables)
    if changed:
        raise MigratorError(
            "--resume refused: the checkpoint was made for another mapping or source; "
            f"changed since: {'; '.join(changed)}",
            f"start over without --resume (migrator migrate {m.file or 'MAPPING'}), "
            "or resume with the mapping and source the checkpoint was made with",
        )
