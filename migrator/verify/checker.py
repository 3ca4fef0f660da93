"""verify's run over the tables: each table checked in the mode asked (``TableVerifier``,
verify/tables.py), the stray-key SCAN started with the pass, and stale keys looked for after it
(unless the database holds exactly the keys the verified tables explain)."""

from __future__ import annotations

import time

from migrator.mapping.resolve import Resolved
from migrator.mapping.validate import plural
from migrator.plan.keyspace import KeySpace
from migrator.plan.planner import TablePlan
from migrator.progress import NULL_PROGRESS, Progress
from migrator.source.mysql import Source
from migrator.store.checkpoint import held_keys, keys_hint
from migrator.store.expiry_sweep import sweep_now
from migrator.verify.keys import Reader
from migrator.verify.stray import StrayScan, scan_now
from migrator.verify.tables import TableVerifier


class Checker:
    def __init__(
        self,
        src: Source,
        reader: Reader,
        plans: dict[str, TablePlan],
        space: KeySpace,
        fix: bool = False,
        progress: Progress = NULL_PROGRESS,
    ) -> None:
        self.src, self.reader, self.plans, self.space = src, reader, plans, space
        self.fix = fix
        #: what the checks after a table's pass say they are doing (SCAN, lookups, naming
        #: members): a verify that finds differences spends most of its time there
        self.progress = progress

    def table(
        self, r: Resolved, mode: str, size: int, sample: int | None, progress: Progress
    ) -> TableVerifier:
        t0 = time.perf_counter()
        self.progress = progress
        tv = TableVerifier(self, self.plans[r.name])
        if self.fix and tv.plan.expiry is not None:  # rows past their expiry leave first
            swept = sweep_now(self.reader.client, [tv.plan], self.reader.retrying)
            tv.check.notes.append(f"expiry: {plural(swept, 'row')} past it swept")
        progress.start(r.name, sample or r.schema.row_estimate or None)
        if mode == "full":
            tv.full(size, progress)
            tv.finish()
        elif sample:
            tv.sampled(sample, size, progress)
            tv.finish()
            tv.row_counts(lookup=True)
        else:
            tv.counts_only()
            tv.finish()
            tv.row_counts(lookup=False)
        tv.flush()
        tv.shared_keys()
        tv.shared_uniques()
        progress.finish(r.name)
        tv.check.seconds = time.perf_counter() - t0
        return tv

    def scan_ahead(self, tables: list[str], everything: bool, name: str) -> StrayScan | None:
        """Start the stray-key SCAN of ``tables``' key spaces, to run during the pass, unless
        every table is verified and the target holds as many keys as the last complete load
        wrote (the checkpoint's hint): then the SCAN is likely not needed at all (``stale``
        decides, and scans after the pass if it is)."""
        if everything:
            client = self.reader.client
            hint = keys_hint(client, name)
            if hint is not None and hint == held_keys(client, name):
                return None
        policy = self.reader.retrying.policy
        return StrayScan(self.reader.client, self.space, tables, policy).start()

    def stale(
        self,
        verifiers: list[TableVerifier],
        everything_verified: bool,
        name: str,
        scan: StrayScan | None = None,
    ) -> None:
        """Look for stale keys, unless the database holds exactly the keys the verified tables
        explain (DBSIZE, less this mapping's checkpoint and sync state): then there can be
        none (``scan``, the SCAN started with the pass, is left to its owner to stop). Otherwise
        one SCAN over
        the verified tables' key spaces (``scan``'s, or one now): a key that fits none of its
        table's patterns, or a keyed structure the pass did not expect, is stale at once;
        per-row keys are counted, and looked up in the source only when there are more of
        them than the pass found."""
        if everything_verified:
            held = held_keys(self.reader.client, name)
            if held == sum(tv.present + tv.keyed_present for tv in verifiers):
                return
        t0 = time.perf_counter()
        by_name = {tv.name: tv for tv in verifiers}
        for tv in verifiers:
            self.progress.note(tv.name, "looking for stale keys: a SCAN of the key space")
        if scan is not None:
            rows, others = scan.result()
        else:
            rows, others = scan_now(
                self.reader.client, self.space, list(by_name), self.reader.retrying.policy
            )
        for key, table, p in others:
            tv = by_name[table]
            if p is None:
                tv.stray(key, "(fits none of the table's key patterns)")
            elif p.family == "row":
                rows[table] += 1
            elif key not in tv.expected_keys:
                tv.stray(key, f"({p.what}, no source row has it)")
        spent = (time.perf_counter() - t0) / len(verifiers) if verifiers else 0.0
        for tv in verifiers:
            t1 = time.perf_counter()
            if rows[tv.name] > tv.present:
                tv.lookup_rows()
            tv.flush()
            tv.check.seconds += spent + time.perf_counter() - t1
