"""``migrator verify``: compare Redis with the source, table by table."""

from __future__ import annotations

import time
from typing import Any

from migrator.commands.session import load, opened, target_url
from migrator.errors import MigratorError
from migrator.mapping.resolve import resolve
from migrator.plan.planner import TablePlan
from migrator.progress import NULL_PROGRESS, Progress
from migrator.target.cluster import connect_any
from migrator.urls import mask_target
from migrator.verify.cluster_reader import reader_for
from migrator.verify.keys import Patterns
from migrator.verify.report import VerifyReport
from migrator.verify.tables import Checker


def verify(
    mapping: Any,
    *,
    source: str | None = None,
    target: str | None = None,
    tables: list[str] | None = None,
    counts_only: bool = False,
    sample: int | None = None,
    batch_size: int | None = None,
    progress: Progress = NULL_PROGRESS,
) -> VerifyReport:
    """Compare Redis with the source, table by table. Returns a report; raises MigratorError."""
    m = load(mapping)
    if sample is not None and sample < 1:
        raise MigratorError("--sample must be a positive number of rows, e.g. --sample 1000")
    if counts_only and sample is not None:
        raise MigratorError("--counts-only and --sample exclude each other", "choose one of them")
    if batch_size is not None and batch_size < 1:
        raise MigratorError("--batch-size must be a positive number of rows")
    mode = "counts-only" if counts_only else f"sample {sample}" if sample else "full"
    started = time.perf_counter()
    with opened(m, source, tables) as (src, resolved):
        everything = resolved
        if tables:  # the other tables still own their keys, and may be parents
            try:
                everything = resolve(m, src.schema())
            except MigratorError:
                everything = resolved
        plans = {r.name: TablePlan(r) for r in everything}
        client = connect_any(target_url(m, target))
        try:
            checker = Checker(src, reader_for(client), plans, Patterns(list(plans.values())))
            verifiers = [
                checker.table(r, mode, batch_size or m.options.batch_size, sample, progress)
                for r in resolved
            ]
            if mode == "full":
                checker.stale(verifiers, everything_verified=not tables, name=m.name)
            checks = [tv.check for tv in verifiers]
        finally:
            client.close()
        return VerifyReport(
            mapping=m.file or m.name,
            source=src.shown_url,
            target=mask_target(target_url(m, target)),
            mode=mode,
            tables=checks,
            seconds=time.perf_counter() - started,
        )
