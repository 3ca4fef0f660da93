"""Questions about the data a mapping's draft would meet, asked of MySQL in one query each.

``rejected_rows``: how many rows of a table ``escape: reject`` would not write, counted by
the server (no row is read here): a row is rejected when a composite the plan guards (two or
more columns whose values hold the separator a varying number of times, none of them NULL)
has a value holding a separator character (migrator/plan/escape.py), in its text as the
tool writes it (GEOMETRY as WKT)."""

from __future__ import annotations

import sqlalchemy as sa

from migrator.plan.planner import TablePlan
from migrator.source.mysql import Source
from migrator.source.selects import column_expr


def rejected_rows(src: Source, plan: TablePlan) -> int:
    """Rows of the plan's table that its ambiguous composites reject (0 without any)."""
    if not plan.guards:
        return 0
    chars = [c.decode() for c in plan.sep_chars]
    t = sa.table(plan.table.name, *(sa.column(c) for c in plan.select))
    any_group = []
    for positions, looked_at in plan.guards:
        written = [t.c[plan.select[i]].is_not(None) for i in positions]
        shown = [column_expr(plan.resolved.schema.column(name), t) for _, name in looked_at]
        holds = [sa.func.locate(ch, value) > 0 for value in shown for ch in chars]
        any_group.append(sa.and_(*written, sa.or_(*holds)))
    stmt = sa.select(sa.func.count()).select_from(t).where(sa.or_(*any_group))
    return int(src.fetch_all(stmt)[0][0] or 0)
