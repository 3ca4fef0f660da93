"""``migrator migrate``: load every mapped table into Redis (worker processes in parallel.py)."""

from __future__ import annotations

import os
import time

from migrator.commands.parallel import default_workers, load_tables
from migrator.commands.reports import MigrateReport
from migrator.commands.session import load, opened, source_url, target_url
from migrator.errors import ConnectError, MigratorError, TargetError
from migrator.mapping.model import Mapping
from migrator.mapping.resolve import Resolved, resolve
from migrator.plan.keyspace import KeySpace
from migrator.plan.planner import TablePlan
from migrator.progress import NULL_PROGRESS, Progress
from migrator.source.mysql import Source
from migrator.target.checkpoint import Checkpoint, TableState
from migrator.target.cluster import connect_any
from migrator.target.cluster_sink import sink_for
from migrator.target.keys import remove_owned
from migrator.target.sink import Client
from migrator.urls import mask_source, mask_target


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
    one overwrites what changed but removes nothing (``report.notes`` says how to)."""

    m = load(mapping)
    if batch_size is not None and batch_size < 1:
        raise MigratorError("--batch-size must be a positive number of rows")
    if workers is None and os.environ.get("MIGRATOR_WORKERS"):
        raw = os.environ["MIGRATOR_WORKERS"]
        if not raw.isdigit():
            raise MigratorError(f"MIGRATOR_WORKERS={raw!r} is not a number", "e.g. 2")
        workers = int(raw)
    if workers is not None and workers < 1:
        raise MigratorError("--workers must be at least 1", "e.g. --workers 2")
    size = batch_size or m.options.batch_size
    started = time.perf_counter()
    with opened(m, source, tables) as (src, resolved):
        client = connect_any(target_url(m, target))
        checkpoint = Checkpoint(client, m.name)
        earlier = checkpoint.load()
        state = earlier if resume else {}
        if not resume:
            checkpoint.clear()
        n_workers = workers or default_workers(sum(r.schema.row_estimate for r in resolved))
        common = {
            "source": source_url(m, source),
            "target": target_url(m, target),
            "mapping": m.name,
            "batch_size": size,
            "snapshot": n_workers > 1,
        }
        report = MigrateReport(
            mapping=m.file or m.name,
            source=mask_source(src.url),
            target=mask_target(target_url(m, target)),
            tables=[],
        )
        try:
            if (replace and not (resume and state)) or REPLACING in state:
                report.removed = _replace(m, src, client, checkpoint, resolved, state)
            if n_workers == 1:
                report.snapshot = src.snapshot()
            report.tables = load_tables(
                src, client, checkpoint, resolved, state, progress, n_workers, common
            )
        except (TargetError, ConnectError) as e:
            raise partial(e, m) from None
        client.close()
        report.consistency = consistency(report, n_workers, resumed=bool(state))
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


def partial(e: TargetError | ConnectError, m: Mapping) -> MigratorError:
    """The same error, saying that Redis now holds part of the load and how to go on."""
    then = (
        "Redis holds the batches written before it (checkpointed); once fixed, "
        f"'migrator migrate {m.file or 'MAPPING'} --resume' continues from there"
    )
    return type(e)(e.message, f"{e.hint}; {then}" if e.hint else then)
