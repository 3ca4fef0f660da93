"""The rows a shard owns in Redis (plan/owners.py), for writing nested documents over a
sharded source (docs/sharding.md#nested-documents): a document is written from its top
row's shard only when the owner hash names that shard, or no shard yet; a row another shard
owns (a collision, left out by the row pass) keeps that shard's document. So is a nested
child: one whose primary key another shard's child holds (claimed by the row pass as any
row) is left out of the shard's document, with its own children."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from migrator.plan.batch import Row
from migrator.plan.layout import TableLayout
from migrator.plan.nesting import Level
from migrator.plan.owners import Owners, sharded
from migrator.retry import Retrying
from migrator.store.sink import transient


def owned(
    client: Any, layout: TableLayout, retrying: Retrying | None
) -> Callable[[Level, list[Row]], list[Row]] | None:
    """The filter of a page of a nesting tree's rows (source/nesting.py ``all_trees``'
    ``keep``), ``layout`` the top's; None for a table that keeps no owner hash (one source)."""
    if not sharded(layout.resolved):
        return None
    known: dict[str, Owners] = {}

    def keep(level: Level, rows: list[Row]) -> list[Row]:
        if not rows or not sharded(level.layout.resolved):
            return rows
        owners = known.get(level.name) or known.setdefault(level.name, Owners(level.layout))
        fields = [owners.field(row) for row in rows]
        read = lambda: client.hmget(owners.key, fields)  # noqa: E731
        held = (retrying or Retrying()).call(read, transient, "Redis")
        return [row for row, h in zip(rows, held) if h is None or h == owners.shard]

    return keep


def owner_fields(
    client: Any, asked: dict[str, tuple[bytes, list[bytes]]], retrying: Retrying | None
) -> dict[tuple[str, bytes], bytes]:
    """Per table, its owner hash's key and the fields asked: (table, field) -> the shard
    each names (b"" for a field no shard holds), one HMGET per table."""
    out: dict[tuple[str, bytes], bytes] = {}
    for table, (key, fields) in asked.items():
        if not fields:
            continue
        got = (retrying or Retrying()).call(partial(client.hmget, key, fields), transient, "Redis")
        out |= {(table, f): o or b"" for f, o in zip(fields, got)}
    return out
