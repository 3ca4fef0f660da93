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
from migrator.plan.owners import UNION, owners_of
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
    None when no row is due. A shard's sync (its plans resolved for one shard) sweeps the
    rows the owner hash gives to its shard, or to none, and reads past the others' (their
    own process sweeps them, in order with its own writes of them)."""
    total = Delta()
    for d in tables:
        now = d.expiry.now_ms()
        schedule, memo = d.expiry.schedule, d.expiry.memo
        owners = owners_of(d.plan)
        mine = None if owners is None or owners.shard == UNION.encode() else owners.shard
        swept, start = 0, 0
        while swept < SWEEP_ROWS:
            got = client.zrangebyscore(schedule, "-inf", now, start=start, num=SWEEP_ROWS,
                                       withscores=True)  # fmt: skip
            if not got:
                break
            start += len(got)
            blobs = client.hmget(memo, [pk for pk, _ in got])
            rows = [None if b is None else decode_row(b) for b in blobs]
            theirs: set[int] = set()
            if mine is not None and owners is not None:
                at = [i for i, r in enumerate(rows) if r is not None]
                fields = [owners.field(rows[i]) for i in at]  # type: ignore[arg-type]
                held = client.hmget(owners.key, fields) if fields else []
                theirs = {i for i, o in zip(at, held) if o not in (None, mine)}
            for i, ((pk, score), row) in enumerate(zip(got, rows)):
                if i in theirs:  # another shard's row: its process sweeps it
                    continue
                swept += 1
                if row is None:  # no image to plan from: only the schedule's entry goes
                    total.put(("z", schedule, pk), REMOVED)
                    continue
                d.sweep(row, b"%d" % int(score), total)
                if owners is not None and mine is None:  # verify --fix of the shards: the
                    total.put(("h", owners.key, owners.field(row)), REMOVED)  # row's owner
            if len(got) < SWEEP_ROWS or mine is None:
                break
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
