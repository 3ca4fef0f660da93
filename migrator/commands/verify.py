"""``migrator verify``: compare Redis with the source, table by table."""

from __future__ import annotations

import time
from typing import Any

from migrator.commands.session import (
    check_batch_size,
    load,
    retry_policy,
    source_url,
    target_url,
)
from migrator.commands.shard_nesting import note_cross_shard
from migrator.commands.shards import note_overlaps, opened_any
from migrator.errors import MigratorError, docs
from migrator.mapping.model import Mapping
from migrator.mapping.resolve import Resolved, resolve
from migrator.plan.keyspace import KeySpace
from migrator.plan.nesting import trees
from migrator.plan.planner import TablePlan
from migrator.plan.search import SearchIndex, definitions
from migrator.progress import NULL_PROGRESS, Progress
from migrator.retry import Retrying
from migrator.scaleout import dask_tasks as scaleout
from migrator.scaleout.dask_verify import Cluster, check_tables
from migrator.source.chunks import CHUNK_ROWS
from migrator.source.mysql import Source
from migrator.store import features, search_index
from migrator.store.checkpoint import record_keys_hint
from migrator.store.cluster import connect_any
from migrator.urls import mask
from migrator.verify import nesting
from migrator.verify.checker import Checker
from migrator.verify.cluster_reader import reader_for
from migrator.verify.keys import Reader
from migrator.verify.repair import Repairer
from migrator.verify.report import VerifyReport
from migrator.verify.search import check as search_check
from migrator.verify.streams import check as stream_check


def verify(
    mapping: Any,
    *,
    source: str | None = None,
    target: str | None = None,
    tables: list[str] | None = None,
    counts_only: bool = False,
    sample: int | None = None,
    batch_size: int | None = None,
    fix: bool = False,
    progress: Progress = NULL_PROGRESS,
    dask: str | None = None,
    chunk_rows: int | None = None,
    retries: int | None = None,
    again: str | None = None,
) -> VerifyReport:
    """Compare Redis with the source, table by table, inside one consistent snapshot of the
    source. Returns a report; raises MigratorError.

    ``fix``: repair every difference found, writing from the source (repair.py), then, if
    anything was changed, verify again in a new snapshot; the report is that second pass's,
    with what was changed in ``repaired`` and the first pass in ``found``. A fix of every
    table that ends with Redis matching records the keys it holds as the checkpoint's
    ``@keys`` hint (store/checkpoint.py). ``retries``: ``--retries N``, the attempts of the
    mapping's ``options.retries`` (retry.py), which reads of MySQL and Redis follow.
    ``dask``: check on the Dask cluster at that address (scaleout/dask_verify.py): the full
    comparison chunk by chunk (``chunk_rows``), each chunk in a snapshot of its own;
    ``counts_only`` and ``sample`` a table per task. ``again``: the command that runs this
    check again, the hint when the Dask scheduler is lost."""
    m = load(mapping)
    if sample is not None and sample < 1:
        raise MigratorError("--sample must be a positive number of rows, e.g. --sample 1000")
    if counts_only and sample is not None:
        raise MigratorError("--counts-only and --sample exclude each other", "choose one of them")
    if fix and (counts_only or sample is not None):
        raise MigratorError(
            "--fix repairs what a full verify finds; it cannot be combined with "
            f"{'--counts-only' if counts_only else '--sample'}",
            "drop that option: migrator verify MAPPING --fix",
        )
    check_batch_size(batch_size)
    policy = retry_policy(m, retries)
    mode = "counts-only" if counts_only else f"sample {sample}" if sample else "full"
    started = time.perf_counter()
    if dask and m.sources:
        raise MigratorError(
            "verify --dask reads one server: the mapping lists the shards of a sharded source",
            f"drop --dask: verify reads every shard in turn ({docs('sharding.md#verify')})",
        )
    with opened_any(m, source, tables) as (src, resolved):
        src.retrying = Retrying(policy)
        everything = resolved
        if tables:  # the other tables still own their keys, and may be parents
            try:
                everything = resolve(m, src.schema(), shard=resolved[0].shard)
            except MigratorError:
                everything = resolved
        plans = {r.name: TablePlan(r) for r in everything}
        space = KeySpace(list(plans.values()), m.kept())
        client = connect_any(target_url(m, target))
        searches = definitions(resolved, m, everything)
        features.require(client, resolved, searches)
        reader = reader_for(client, Retrying(policy))
        size = batch_size or m.options.batch_size
        cluster = None
        if dask:
            again = again or f"migrator verify {m.file or 'MAPPING'} --dask {dask}"
            cluster = Cluster(scaleout.connect(dask), dask, everything, m.kept(),
                              (source_url(m, source), target_url(m, target)),
                              chunk_rows or CHUNK_ROWS, f"run it again: {again}")  # fmt: skip
        try:
            report, keys = _pass(m, src, reader, plans, space, resolved, mode, size, sample,
                                 fix, progress, everything_verified=not tables,
                                 cluster=cluster)  # fmt: skip
            if fix:
                report.repaired = report.changes
                if any(t.total for t in report.repaired):  # check again, from a new snapshot
                    second, keys = _pass(m, src, reader, plans, space, resolved, mode, size,
                                         sample, False, progress,
                                         everything_verified=not tables,
                                         cluster=cluster)  # fmt: skip
                    second.repaired, second.found = report.repaired, report.tables
                    report = second
                if report.ok and not tables:  # every key the mapping explains, and no other
                    record_keys_hint(client, m.name, keys)
            _searches(src, client, m.name, resolved, searches, report, fix)
            stream_check(client, m.name, resolved, {t.table: t for t in report.tables},
                         everything, [s.name for s in m.sources])  # fmt: skip
        finally:
            client.close()
            if cluster is not None:
                cluster.client.close()
        report.source = src.shown_url
        report.target = mask(target_url(m, target))
        report.seconds = time.perf_counter() - started
        return report


def _searches(
    src: Source, client: Any, name: str, resolved: list[Resolved], searches: list[SearchIndex],
    report: VerifyReport, fix: bool,
) -> None:  # fmt: skip
    """Each table's search index against MySQL (verify/search.py); ``fix``: first made
    current under its alias (store/search_index.py), as migrate does."""
    checks = {t.table: t for t in report.tables}
    tables = {r.name: r for r in resolved}
    for index in searches:
        if index.table not in checks:
            continue
        if fix and search_index.has_search(client):
            search_index.ensure(client, name, index)
        search_check(src, client, tables[index.table], index, checks[index.table])


def _pass(
    m: Mapping,
    src: Source,
    reader: Reader,
    plans: dict[str, TablePlan],
    space: KeySpace,
    resolved: list[Resolved],
    mode: str,
    size: int,
    sample: int | None,
    fix: bool,
    progress: Progress,
    everything_verified: bool,
    cluster: Cluster | None = None,
) -> tuple[VerifyReport, int]:
    """One comparison of every table, in a snapshot of its own (with a Dask ``cluster``: the
    rows of each chunk, or each table, in a snapshot of their own, the rest in this one);
    and the number
    of keys of the tables that Redis holds (as a full pass counts them)."""
    snapshot = src.snapshot()
    checker = Checker(src, reader, plans, space, fix=fix, progress=progress)
    # the stray-key SCAN runs alongside the pass; stopped here, whether its tally was used
    # (stale), not needed (DBSIZE settled it) or the pass failed
    names = [r.name for r in resolved]
    scan = checker.scan_ahead(names, everything_verified, m.name) if mode == "full" else None
    try:
        if cluster is None:
            verifiers = [checker.table(r, mode, size, sample, progress) for r in resolved]
        else:
            verifiers = check_tables(cluster, checker, resolved, mode, size, sample, progress)
        if mode == "full":
            checker.stale(verifiers, everything_verified, m.name, scan)
    finally:
        if scan is not None:
            scan.cancel()
    report = VerifyReport(
        mapping=m.file or m.name, source="", target="", mode=mode,
        tables=[tv.check for tv in verifiers], snapshot=snapshot if cluster is None else None,
    )  # fmt: skip
    note_overlaps(src, report.tables)  # a sharded source's collisions (commands/shards.py)
    report.changes = [tv.fixer.done for tv in verifiers if tv.fixer is not None]
    present = sum(tv.present + tv.keyed_present for tv in verifiers)
    if mode == "full":
        present += _nested(src, reader, plans, report, size, fix)
    return report, present


def _nested(
    src: Source, reader: Reader, plans: dict[str, TablePlan], report: VerifyReport,
    size: int, fix: bool,
) -> int:  # fmt: skip
    """The nested documents (verify/nesting.py) of the tables checked, in the pass's
    snapshot; the documents present."""
    checks = {t.table: t for t in report.tables}
    present = 0
    for name, top in trees(plans).items():
        if name not in checks:
            continue
        fixer = Repairer(reader.client, name, reader.retrying) if fix else None
        found = nesting.check(src, reader, top, checks[name], size, fixer)
        note_cross_shard(src, top, checks)  # (a sharded source: commands/shard_nesting.py)
        checks[name].redis_rows = (checks[name].redis_rows or 0) + found
        present += found
        if fixer is not None:
            report.changes.append(fixer.done)
    return present
