"""``migrator migrate``: load every mapped table into Redis (worker processes in parallel.py).

A run is bound to what it loads and guarded against a target that loses it (issue 10):

* it starts by writing its marker and binding into the checkpoint (target/checkpoint.py):
  the fingerprint of the resolved mapping (mapping/fingerprint.py) and the source's identity;
  ``--resume`` refuses (exit 2) a checkpoint bound to something else, naming what changed;
* transient failures are retried by policy (retry.py; ``options.retries``, ``--retries``);
* when the target loses data mid-run (target/guard.py), every task is stopped, the run
  continues from what the target still vouches for, and the report lists the recovery;
  after ``attempts`` such losses it stops with exit 3.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any

from migrator.commands.parallel import RANGE, default_workers, load_tables
from migrator.commands.preflight import check_memory, check_target
from migrator.commands.reports import MigrateReport
from migrator.commands.session import check_batch_size, load, opened, source_url, target_url
from migrator.errors import ConnectError, MigratorError, TargetError, TargetLost
from migrator.mapping.fingerprint import changes, fingerprint
from migrator.mapping.model import Mapping, Retries
from migrator.mapping.resolve import Resolved, resolve
from migrator.plan.keyspace import KeySpace
from migrator.plan.planner import TablePlan
from migrator.progress import NULL_PROGRESS, Progress
from migrator.retry import Retrying
from migrator.source.mysql import Source
from migrator.target.checkpoint import Checkpoint, TableState
from migrator.target.cluster import connect_any
from migrator.target.cluster_sink import sink_for
from migrator.target.guard import Guard, new_token, run_id
from migrator.target.keys import remove_owned
from migrator.target.sink import Client, transient
from migrator.urls import mask


def migrate(
    mapping: Mapping | str | os.PathLike[str],
    *,
    source: str | None = None,
    target: str | None = None,
    tables: list[str] | None = None,
    batch_size: int | None = None,
    resume: bool = False,
    progress: Progress = NULL_PROGRESS,
    workers: int | None = None,
    replace: bool = False,
    retries: int | None = None,
    resume_command: str | None = None,
    into_existing: bool = False,
    memory_check: bool = True,
) -> MigrateReport:
    """Load every mapped table into Redis. Returns a report; raises MigratorError.

    With one worker every table is read inside one consistent snapshot of the source
    (``report.snapshot``: its moment and binlog position). ``workers`` (else
    $MIGRATOR_WORKERS) splits each single-integer primary key's range across processes and
    loads tables side by side (migrator/parallel.py), each range in a snapshot of its own;
    default: 1 on machines of up to 2 CPUs or for loads under 200,000 rows, else
    min(4, CPUs). ``replace`` first removes every key the mapping owns (SCAN + UNLINK, never
    FLUSHDB; ``options.ignore`` and other mappings' keys stay), then loads; a ``--resume``
    of an interrupted replace finishes the removal first. Without it, a run over an earlier
    one overwrites what changed but removes nothing (``report.notes`` says how to).
    ``retries`` overrides ``options.retries.attempts``; ``resume_command`` is how the
    caller says to continue after a failure (default ``migrator migrate FILE --resume``).
    Before writing, the target is checked (commands/preflight.py): keys of the mapping's key
    space that no earlier run of it wrote refuse the run unless ``into_existing`` or
    ``replace``; with ``maxmemory`` set, a load that will not fit is refused unless not
    ``memory_check``."""

    m = load(mapping)
    check_batch_size(batch_size)
    if workers is None and os.environ.get("MIGRATOR_WORKERS"):
        raw = os.environ["MIGRATOR_WORKERS"]
        if not raw.isdigit():
            raise MigratorError(f"MIGRATOR_WORKERS={raw!r} is not a number", "e.g. 2")
        workers = int(raw)
    if workers is not None and workers < 1:
        raise MigratorError("--workers must be at least 1", "e.g. --workers 2")
    if retries is not None and retries < 0:
        raise MigratorError("--retries must be 0 or more", "e.g. --retries 8")
    policy = m.options.retries
    if retries is not None:
        policy = dataclasses.replace(policy, attempts=retries)
    size = batch_size or m.options.batch_size
    again = resume_command or f"migrator migrate {m.file or 'MAPPING'} --resume"
    started = time.perf_counter()
    with opened(m, source, tables) as (src, resolved):
        src.retrying = Retrying(policy)
        n_workers = workers or default_workers(sum(r.schema.row_estimate for r in resolved))
        report = MigrateReport(
            mapping=m.file or m.name,
            source=mask(src.url),
            target=mask(target_url(m, target)),
            tables=[],
        )
        try:
            client = connect_any(target_url(m, target))
            # before anything is written: keys in the way, room for the load (preflight.py)
            plans = [TablePlan(r) for r in resolved]
            check_target(client, m, plans, into_existing=into_existing or replace)
            if memory_check and not resume and not replace:  # (--replace frees memory first)
                check_memory(client, src, resolved)
            run = {"mapping": fingerprint(m, resolved), "source": src.identity()}
            checkpoint = Checkpoint(client, m.name)
            earlier = checkpoint.load()
            state = begin(checkpoint, run, resume, m)
            report.recoveries = untrusted(src, client, checkpoint, resolved, state)
            assert checkpoint.token is not None
            guard = Guard(checkpoint.key, checkpoint.token, run_id(client))
            guard.attach(client)
        except (TargetError, ConnectError, TargetLost) as e:
            raise partial(e, again) from None
        common: dict[str, Any] = {
            "source": source_url(m, source),
            "target": target_url(m, target),
            "mapping": m.name,
            "batch_size": size,
            "snapshot": n_workers > 1,
            "retries": policy,
            "token": checkpoint.token,
            "run_id": guard.run_id,
        }
        for what in report.recoveries:
            progress.note(what.split(":", 1)[0], what)
        resumed = bool(state)
        try:
            if (replace and not (resume and state)) or REPLACING in state:
                report.removed = _replace(m, src, client, checkpoint, resolved, state)
            if n_workers == 1:
                report.snapshot = src.snapshot()
            losses = 0
            while True:
                try:
                    report.tables = load_tables(
                        src, client, checkpoint, resolved, state, progress, n_workers, common
                    )
                    break
                except TargetLost as e:
                    losses += 1
                    if losses > policy.attempts:
                        raise
                    state, what = recover(client, checkpoint, guard, run, policy)
                    report.recoveries.append(f"{e.message}; {what}")
                    common["run_id"] = guard.run_id
                    for r in resolved:
                        progress.note(r.name, f"target lost data: {what}")
            # every table loaded from its start in this one run: its key count is the hint
            # with which verify guesses whether Redis holds keys the mapping does not explain
            whole = not resumed and not losses and not tables
            checkpoint.record_keys(report.keys if whole else None)
        except (TargetError, ConnectError, TargetLost) as e:
            raise partial(e, again) from None
        client.close()
        report.consistency = consistency(report, n_workers, resumed=resumed)
        if src.retaken:  # the snapshot's connection was lost and taken again
            report.consistency += (
                f"; the connection to MySQL was lost {len(src.retaken)} time(s) and the "
                f"snapshot taken again: rows read after that are as of "
                f"{src.retaken[-1].describe()}"
            )
        if earlier and not resume and not replace:
            report.rerun = True
            report.notes.append(rerun_note(m, earlier, resolved))
        report.seconds = time.perf_counter() - started
        return report


#: checkpoint field of a --replace whose removal has not finished
REPLACING = "#replace"


def _replace(
    m: Mapping,
    src: Source,
    client: Client,
    checkpoint: Checkpoint,
    resolved: list[Resolved],
    state: dict[str, TableState],
) -> int:
    """Remove every key the mapping owns under the loaded tables' key spaces; the mark in
    the checkpoint makes a ``--resume`` finish the removal before it loads."""
    sink_for(client).write([checkpoint.command(REPLACING, None, 0)])
    try:  # every table's patterns say who owns a key
        everything = resolve(m, src.schema())
    except MigratorError:  # another table does not resolve (--tables left it out)
        everything = resolved
    space = KeySpace([TablePlan(r) for r in everything], m.options.ignore)
    removed = remove_owned(client, space, [r.name for r in resolved])
    client.hdel(checkpoint.key, REPLACING)
    state.pop(REPLACING, None)
    return removed


def consistency(report: MigrateReport, workers: int, resumed: bool) -> str:
    """What moment of the source the load shows, in one sentence."""
    if report.snapshot is not None:
        text = f"one snapshot: {report.snapshot.describe()}"
    else:
        text = (
            f"per range: {workers} workers each read a key range (or a whole table) in a "
            "snapshot of its own, taken when the range starts, so the tables are not one "
            "moment (--workers 1 reads them all in one snapshot)"
        )
    if resumed:
        text += "; rows loaded before --resume were read in the earlier run's snapshot"
    return text


def rerun_note(m: Mapping, earlier: dict[str, TableState], resolved: list[Resolved]) -> str:
    complete = all(earlier.get(r.name) is not None and earlier[r.name].done for r in resolved)
    name = m.file or "MAPPING"
    return (
        f"Redis held {'a complete' if complete else 'an'} earlier run of this mapping: what "
        "changed in MySQL since was overwritten, but removals are not applied (keys of "
        "deleted rows, old unique entries, index, set and sorted-set members that moved "
        f"stay). Remove them with 'migrator verify {name} --fix', or reload with "
        f"'migrator migrate {name} --replace'."
    )


def begin(
    checkpoint: Checkpoint, run: dict[str, Any], resume: bool, m: Mapping
) -> dict[str, TableState]:
    """The table states to start from: none for a fresh run (its marker and binding
    written), else the checkpoint's, once it is proven bound to this mapping and source."""
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
            refuse_changed(was, run, states, m)
            bound = {**was, "source": run["source"]}
            bound["mapping"] = {
                "options": run["mapping"]["options"],
                "tables": {**was["mapping"].get("tables", {}), **run["mapping"]["tables"]},
            }
            checkpoint.token = marker
            checkpoint.bind(bound)
            return states
    checkpoint.begin(new_token(), run)
    return {}


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
            vouched = [tuple(v or b"" for v in row) for row in src.latest(r.name, pk, pk[0], 1)]
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
    values = {c: v.decode("utf-8", "surrogateescape") for c, v in zip(r.primary_key, pk)}
    return r.key.render(values).encode("utf-8", "surrogateescape")


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


def recover(
    client: Client, checkpoint: Checkpoint, guard: Guard, run: dict[str, Any], policy: Retries
) -> tuple[dict[str, TableState], str]:
    """After the target lost data: wait for it, then continue from what it still holds."""
    guard.armed = False  # the next connections are expected to meet the new server

    def reconcile() -> tuple[dict[str, TableState], str]:
        states, what = checkpoint.reconcile(run)
        guard.run_id = run_id(client)
        return states, what

    try:
        return Retrying(policy).call(reconcile, transient, "Redis")
    finally:
        guard.armed = True


def partial(e: MigratorError, again: str) -> MigratorError:
    """The same error, saying that Redis now holds part of the load and how to go on."""
    then = f"Redis holds the batches written before it (checkpointed); once fixed: {again}"
    return type(e)(e.message, f"{e.hint}; {then}" if e.hint else then)
