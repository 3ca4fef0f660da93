"""sync's expiry sweep (docs/sync.md#expiry): the rows of each table with ``expire:`` whose
moment has passed, by the clock of the machine running migrator, are removed from every
shared structure — each planned as a DELETE of the image its memo holds
(plan/expiry_delta.py) — and from the schedule, in a transaction of its own written with the
applied position (which it leaves as it is), so a crash leaves the sweep done or not done.

Redis expires the rows' own keys by itself; the sweep only removes what other rows share."""

from __future__ import annotations

from typing import Any

from migrator.plan.delta import REMOVED, Delta, TableDelta
from migrator.plan.expiry import decode_row
from migrator.plan.expiry_delta import ExpiringTableDelta

#: how often sync sweeps (seconds), and the rows of one table one sweep removes at most
SWEEP_SECONDS = 0.5
SWEEP_ROWS = 1000


def expiring(deltas: dict[str, TableDelta]) -> list[ExpiringTableDelta]:
    return [d for d in deltas.values() if isinstance(d, ExpiringTableDelta)]


def due(client: Any, tables: list[ExpiringTableDelta]) -> Delta | None:
    """The sweep's Delta: the rows past their moment (at most SWEEP_ROWS per table), or
    None when no row is due."""
    total = Delta()
    for d in tables:
        now = d.expiry.now_ms()
        schedule, memo = d.expiry.schedule, d.expiry.memo
        got = client.zrangebyscore(schedule, "-inf", now, start=0, num=SWEEP_ROWS,
                                   withscores=True)  # fmt: skip
        if not got:
            continue
        pks = [pk for pk, _ in got]
        for (pk, score), blob in zip(got, client.hmget(memo, pks)):
            if blob is None:  # no image to plan from: only the schedule's entry goes
                total.put(("z", schedule, pk), REMOVED)
                continue
            d.sweep(decode_row(blob), b"%d" % int(score), total)
    return total if total.ops or total.row_dels else None
