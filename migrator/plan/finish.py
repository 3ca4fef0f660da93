"""End-of-table structures, rebuilt from the source: the counter (``SET Tab:id MAX(pk)``) and
the capped latest lists. Pure: the two source queries come through ``EndReader``, which
``migrator.source.mysql.Source`` implements."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from migrator.mapping.resolve import Resolved
from migrator.mapping.schema import Column
from migrator.plan.batch import Command
from migrator.plan.planner import TablePlan


class EndReader(Protocol):
    def max_of(self, table: str, column: Column) -> bytes | None: ...

    def latest(
        self, table: str, pk: Sequence[Column], order_by: Column, limit: int
    ) -> Sequence[Sequence[bytes | None]]: ...


def finish_commands(src: EndReader, plan: TablePlan, resolved: Resolved) -> list[Command]:
    """End-of-table structures, rebuilt from the source: the counter and the latest lists."""
    out = []
    schema = resolved.schema
    if resolved.counter:
        pk_col = schema.column(resolved.primary_key[0])
        cmd = plan.counter_command(src.max_of(resolved.name, pk_col))
        if cmd is not None:
            out.append(cmd)
    pk_cols = [schema.column(c) for c in resolved.primary_key]
    for latest in resolved.table.latest:
        rows = src.latest(resolved.name, pk_cols, schema.column(latest.order_by), latest.limit)
        # the primary key comes first in a plan's rows, so pk_text reads these rows too
        pks = [pk for row in rows if (pk := plan.pk_text(row)) is not None]
        out += plan.latest_commands(latest.key, pks)
    return out
