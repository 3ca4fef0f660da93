"""``verify --dask ADDRESS``: verify's checks on a Dask cluster.

The full comparison (with or without ``--fix``): each table is cut into the chunks migrate
uses (source/chunks.py). A task checks one chunk on a Dask worker exactly as the local pass
checks those rows (``TableVerifier.full`` over the chunk, in a snapshot of its own; with
``--fix`` repairing what it finds from there) and returns what it counted: differences,
per-row keys found, the members each coalesced key should hold, the keys it expects, what it
repaired. The caller merges them into the table's verifier and concludes there, as a local
pass does: members nobody explains (one SCARD/HLEN/ZCARD per coalesced key against the merged
counts), counters and latest lists, keys several rows share, and the stray-key SCAN.

``--counts-only`` and ``--sample N``: a task checks one whole table on a worker, as the
local pass checks it (``Checker.table``), in a snapshot of its own.

Every task checks the run's stop event between batches (scaleout.StopCheck): Ctrl-C or an
error stops the running checks within about a second, and the others are cancelled.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass
from typing import Any

from migrator.mapping.resolve import Resolved
from migrator.plan.keyspace import KeySpace
from migrator.plan.planner import TablePlan
from migrator.progress import NullProgress, Progress
from migrator.scaleout import dask_tasks as scaleout
from migrator.scaleout.pool import drain
from migrator.source.chunks import plan_chunks
from migrator.source.mysql import Source
from migrator.source.selects import keyset_value
from migrator.store.cluster import connect_any
from migrator.verify.checker import Checker
from migrator.verify.cluster_reader import reader_for
from migrator.verify.report import EXAMPLES, TableCheck, TableRepair
from migrator.verify.tables import TableVerifier

#: what a chunk's check hands back (TableVerifier attributes)
COUNTED = ("present", "rows_present", "keyed_present", "expected", "set_members",
           "expected_keys", "absent", "check")  # fmt: skip


@dataclass
class Cluster:
    """verify --dask: the cluster's client and what its tasks need."""

    client: Any
    address: str
    everything: list[Resolved]
    ignore: Any
    urls: tuple[str, str]
    chunk_rows: int
    again: str  # the hint of a lost scheduler: how to run the check again


def check_tables(
    cluster: Cluster,
    checker: Checker,
    resolved: list[Resolved],
    mode: str,
    size: int,
    sample: int | None,
    progress: Progress,
) -> list[TableVerifier]:
    """Every table's check in ``mode``, its rows checked on the cluster (see the docstring)."""
    run = _Run(scaleout.DaskPool(cluster.client, cluster.address, cluster.again), cluster,
               checker, size, progress)  # fmt: skip
    try:
        return run.full(resolved) if mode == "full" else run.whole(resolved, mode, sample)
    finally:
        run.pool.close()


class _Run:
    """One pass's tasks on the cluster, and what the caller's tables gather from them."""

    def __init__(
        self, pool: scaleout.DaskPool, cluster: Cluster, checker: Checker, size: int,
        progress: Progress,
    ) -> None:  # fmt: skip
        self.pool, self.cluster, self.checker = pool, cluster, checker
        self.progress = progress
        self.job = Job(cluster.everything, cluster.ignore, cluster.urls, size, pool.topic,
                       pool.stop_name)  # fmt: skip
        self.verifiers: dict[str, TableVerifier] = {}
        self.pending: dict[Future[dict[str, Any]], str] = {}

    def _table(self, r: Resolved, rows: int | None) -> None:
        self.verifiers[r.name] = TableVerifier(self.checker, self.checker.plans[r.name])
        self.progress.start(r.name, rows or r.schema.row_estimate or None)

    def _send(self, table: str, fn: Callable[..., dict[str, Any]], *args: Any) -> None:
        key = f"verify-{self.pool.topic[-12:]}-{table}-{len(self.pending)}"
        self.pending[self.pool.call(fn, self.job, table, *args, key=key)] = table

    def full(self, resolved: list[Resolved]) -> list[TableVerifier]:
        """The full comparison (--fix too): a task per chunk, each table concluded here."""
        for r in resolved:
            self._table(r, None)
            pk = [r.schema.column(c) for c in r.primary_key]
            unique = not r.trusts_declared_key and not any(c.nullable for c in pk)
            chunks = plan_chunks(self.checker.src, r.name, pk, self.cluster.chunk_rows,
                                 r.schema.row_estimate)  # fmt: skip
            bounds = [(c.after, c.until) for c in chunks] if unique and chunks else [(None, None)]
            for after, until in bounds:
                self._send(r.name, check_chunk, after, until, self.checker.fix)
        started = time.perf_counter()
        self._gather(lambda name, got: merge(self.verifiers[name], got))
        for tv in self.verifiers.values():
            tv.conclude()
            tv.finish()
            tv.flush()
            tv.shared_keys()
            tv.shared_uniques()
            self.progress.finish(tv.name)
            tv.check.seconds = time.perf_counter() - started
        return list(self.verifiers.values())

    def whole(self, resolved: list[Resolved], mode: str, sample: int | None) -> list[TableVerifier]:
        """--counts-only, --sample: a task per table."""
        for r in resolved:
            self._table(r, sample)
            self._send(r.name, check_table, mode, sample)

        def done(name: str, got: dict[str, Any]) -> None:
            self.verifiers[name].check = got["check"]
            self.progress.finish(name)

        self._gather(done)
        return list(self.verifiers.values())

    def _gather(self, done: Callable[[str, dict[str, Any]], None]) -> None:
        """Wait for every task, handing on its progress and each result to ``done``; on any
        failure (or Ctrl-C) the tasks still running are stopped."""
        pool, progress, pending = self.pool, self.progress, self.pending
        try:
            while pending:
                ended, _ = wait(list(pending), timeout=0.05, return_when=FIRST_COMPLETED)
                drain(pool.progress, progress.advance, progress.note, 0.0 if ended else 0.05)
                for fut in ended:
                    done(pending.pop(fut), fut.result())
            drain(pool.progress, progress.advance, progress.note, 0.0)
        except BaseException:
            pool.close(cancel=True)
            raise


def merge(tv: TableVerifier, got: dict[str, Any]) -> None:
    """Add a chunk's counts (and repairs) to the table's."""
    tv.present += got["present"]
    tv.rows_present += got["rows_present"]
    tv.keyed_present += got["keyed_present"]
    for name, counts in got["expected"].items():
        mine = tv.expected[name]
        for key, n in counts.items():
            mine[key] = mine.get(key, 0) + n
    if tv.set_members is not None and got["set_members"] is not None:
        for key, members in got["set_members"].items():
            tv.set_members.setdefault(key, set()).update(members)
    tv.expected_keys |= got["expected_keys"]
    if tv.images is not None and got.get("images") is not None:
        tv.images.absorb(got["images"])
    tv.absent.update(got["absent"])
    check, theirs = tv.check, got["check"]
    check.mysql_rows += theirs.mysql_rows
    check.counts.update(theirs.counts)
    check.refused.update(theirs.refused)
    check.readers.update(theirs.readers)
    _examples(check.examples, theirs.examples)
    check.notes += [n for n in theirs.notes if n not in check.notes]
    if tv.fixer is not None and got["repaired"] is not None:
        mine_done: TableRepair = tv.fixer.done
        mine_done.counts.update(got["repaired"].counts)
        mine_done.commands += got["repaired"].commands
        _examples(mine_done.examples, got["repaired"].examples)


def _examples(shown: dict[str, list[Any]], more: dict[str, list[Any]]) -> None:
    for kind, examples in more.items():
        have = shown.setdefault(kind, [])
        have += examples[: max(0, EXAMPLES - len(have))]


_THREAD = threading.local()


class _Events(NullProgress):
    """A task's progress, as Dask events of the run's topic; stopped with the run."""

    def __init__(self, topic: str, stop_name: str) -> None:
        import distributed

        self.worker, self.topic = distributed.get_worker(), topic
        self.stop = scaleout.StopCheck(stop_name)

    def advance(self, table: str, rows: int) -> None:
        self.worker.log_event(self.topic, (table, rows))
        self.stop()


@dataclass(frozen=True)
class Job:
    """What every task of a pass is sent: the mapping's tables, the URLs, the batch size,
    the run's progress topic and stop event."""

    everything: list[Resolved]
    ignore: Any
    urls: tuple[str, str]
    size: int
    topic: str
    stop_name: str

    def checker(self, fix: bool) -> Checker:
        """A checker on this worker thread, with its connections (opened once per thread)."""
        cache = _THREAD.__dict__.setdefault("open", {})
        if self.urls not in cache:
            cache[self.urls] = (Source(self.urls[0]), reader_for(connect_any(self.urls[1])))
        src, reader = cache[self.urls]
        plans = {r.name: TablePlan(r) for r in self.everything}
        return Checker(src, reader, plans, KeySpace(list(plans.values()), self.ignore), fix=fix)

    def events(self) -> _Events:
        return _Events(self.topic, self.stop_name)


def check_chunk(
    job: Job,
    table: str,
    after: tuple[bytes, ...] | None,
    until: tuple[bytes, ...] | None,
    fix: bool,
) -> dict[str, Any]:
    """One chunk's row checks (and repairs), on a Dask worker, in a snapshot of its own."""
    checker = job.checker(fix)
    tv = TableVerifier(checker, checker.plans[table])
    r = checker.plans[table].resolved
    kinds = [r.schema.column(c).kind for c in r.primary_key]

    def values(key: tuple[bytes, ...] | None) -> Any:
        return None if key is None else [keyset_value(v, k) for v, k in zip(key, kinds)]

    checker.src.snapshot(f"verifying {table} (starting its snapshot)")
    try:
        tv.full(job.size, job.events(), after=values(after), until=values(until),
                whole=False)  # fmt: skip
    finally:
        checker.src.end_snapshot()
    tv.flush()
    out = {name: getattr(tv, name) for name in COUNTED}
    out["images"] = None if tv.images is None else tv.images.state()  # verify/row_images.py
    out["repaired"] = tv.fixer.done if tv.fixer is not None else None
    return out


def check_table(job: Job, table: str, mode: str, sample: int | None) -> dict[str, TableCheck]:
    """One table's --counts-only or --sample check, on a Dask worker, in a snapshot of its
    own."""
    checker = job.checker(False)
    checker.src.snapshot(f"verifying {table} (starting its snapshot)")
    r = checker.plans[table].resolved
    try:
        tv = checker.table(r, mode, job.size, sample, job.events())
    finally:
        checker.src.end_snapshot()
    return {"check": tv.check}
