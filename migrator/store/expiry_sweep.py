"""The expiry sweep (docs/sync.md#expiry), run by sync between groups and by verify --fix:
the rows of each table with ``expire:`` whose moment has passed, by the clock of the machine
running migrator, are removed from every shared structure, each planned as a DELETE of the
image its memo holds (plan/expiry_delta.py), and from the schedule. Under sync each sweep is
a transaction of its own, written with the applied position (which it leaves as it is), so
a crash leaves it done or not done.

Redis expires the rows' own keys by itself; the sweep removes what other rows share."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from migrator.plan.delta import REMOVED, Delta, TableDelta
from migrator.plan.expiry import decode_row
from migrator.plan.expiry_delta import ExpiringTableDelta
from migrator.plan.planner import TablePlan
from migrator.retry import Retrying
from migrator.store.cluster import is_cluster
from migrator.store.cluster_sink import sink_for
from migrator.store.sync_state import write_atomic

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


def sweep_now(client: Any, plans: Sequence[TablePlan], retrying: Retrying | None = None) -> int:
    """verify --fix: sweep every due row of these tables, a MULTI/EXEC at a time (on a
    Cluster, per node in order); their latest lists are then checked and rebuilt by verify
    itself. Returns the rows swept."""
    tables = [ExpiringTableDelta(p) for p in plans if p.expiry is not None]
    swept = 0
    while tables and (total := due(client, tables)) is not None:
        if is_cluster(client):
            sink_for(client, retrying).write(total.commands)
        else:
            write_atomic(client, total.commands, None, retrying)
        swept += total.rows
    return swept
