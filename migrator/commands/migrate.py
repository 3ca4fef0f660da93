"""``migrator migrate``: load every mapped table into Redis (worker processes in parallel.py)."""

from __future__ import annotations

import os
import time

from migrator.commands.parallel import default_workers, load_tables
from migrator.commands.reports import MigrateReport
from migrator.commands.session import load, opened, source_url, target_url
from migrator.errors import ConnectError, MigratorError, TargetError
from migrator.mapping.model import Mapping
from migrator.progress import NULL_PROGRESS, Progress
from migrator.target.checkpoint import Checkpoint
from migrator.target.cluster import connect_any
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
) -> MigrateReport:
    """Load every mapped table into Redis. Returns a report; raises MigratorError.

    ``workers`` (else $MIGRATOR_WORKERS) splits each single-integer primary key's range
    across processes and loads tables side by side (migrator/parallel.py); default: 1 on
    machines of up to 2 CPUs or for loads under 200,000 rows, else min(4, CPUs)."""

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
        state = checkpoint.load() if resume else {}
        if not resume:
            checkpoint.clear()
        common = {
            "source": source_url(m, source),
            "target": target_url(m, target),
            "mapping": m.name,
            "batch_size": size,
        }
        n_workers = workers or default_workers(sum(r.schema.row_estimate for r in resolved))
        try:
            reports = load_tables(
                src, client, checkpoint, resolved, state, progress, n_workers, common
            )
        except (TargetError, ConnectError) as e:
            raise partial(e, m) from None
        client.close()

        return MigrateReport(
            mapping=m.file or m.name,
            source=mask_source(src.url),
            target=mask_target(target_url(m, target)),
            tables=reports,
            seconds=time.perf_counter() - started,
        )


def partial(e: TargetError | ConnectError, m: Mapping) -> MigratorError:
    """The same error, saying that Redis now holds part of the load and how to go on."""
    then = (
        "Redis holds the batches written before it (checkpointed); once fixed, "
        f"'migrator migrate {m.file or 'MAPPING'} --resume' continues from there"
    )
    return type(e)(e.message, f"{e.hint}; {then}" if e.hint else then)
