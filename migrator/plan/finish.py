"""End-of-table structures, rebuilt from the source: the counter (``SET Tab:id MAX(pk)``) and
the capped latest lists. Pure: the two source queries come through ``EndReader``, which
``migrator.source.mysql.Source`` implements.

The counter's one rule (docs/mapping.md#counter), from what it is for: the next ``INCR`` must
never hand out a primary key a row has, so the counter is an integer **at least** ``MAX(pk)``
(0 for an empty table). ``migrate`` writes the least such value, ``MAX(pk)``; ``sync`` raises
it to every primary key it writes and never lowers it (a delete leaves it, so an id handed out
once is not handed out again); ``verify`` accepts any integer at least ``MAX(pk)``
(``counter_holds``) and ``--fix`` sets ``MAX(pk)`` where it does not hold.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from migrator.mapping.resolve import Resolved
from migrator.mapping.schema import Column
from migrator.plan.batch import Command
from migrator.plan.planner import TablePlan


class EndReader(Protocol):
    def max_of(self, table: str, column: Column) -> bytes | None: ...

    def latest(
        self, table: str, pk: Sequence[Column], order_by: Column, limit: int, where: Any = None
    ) -> Sequence[Sequence[bytes | None]]: ...


def counter_holds(value: bytes | None, max_pk: bytes) -> bool:
    """Whether a counter's value keeps the rule: an integer at least ``max_pk``, what migrate
    writes (``MAX(pk)``, ``0`` for an empty table)."""
    if value is None:
        return False
    text = value.strip()
    if not text.lstrip(b"-").isdigit() or text != value:
        return False
    return int(text) >= int(max_pk)


def finish_commands(
    src: EndReader, plan: TablePlan, resolved: Resolved, where: Any = None
) -> list[Command]:
    """End-of-table structures, rebuilt from the source: the counter (of every row: the next
    ``INCR`` must not hand out a key any row has) and the latest lists (of the rows ``where``,
    the table's row filter as SQL, keeps)."""
    out = []
    schema = resolved.schema
    if resolved.counter:
        pk_col = schema.column(resolved.primary_key[0])
        cmd = plan.counter_command(src.max_of(resolved.name, pk_col))
        if cmd is not None:
            out.append(cmd)
    pk_cols = [schema.column(c) for c in resolved.primary_key]
    for latest in resolved.table.latest:
        order_by = schema.column(latest.order_by)
        rows = src.latest(resolved.name, pk_cols, order_by, latest.limit, where)
        # the primary key comes first in a plan's rows, so pk_text reads these rows too
        pks = [pk for row in rows if (pk := plan.pk_text(row)) is not None]
        out += plan.latest_commands(latest.key, pks)
    return out
