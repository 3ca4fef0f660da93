"""A table's expiry (``expire:`` with a column, mapping/expiry.py) as a SQLAlchemy condition:
the rows whose moment is still ahead of "now" (the clock of the machine running migrator),
or whose column is NULL (they never expire; a zero date is no NULL: expired). Every read that
applies the row filter applies it too (source/where.py ``clause``), so migrate, verify and
dry-run skip an expired row.

The cutoff is computed when the condition is built; the planner checks each row again
against the clock as it plans it (plan/expiry.py), which is the rule that decides."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql

from migrator.mapping.resolve import Resolved


def alive(resolved: Resolved, now: float | None = None, slack: float = 0.0) -> Any:
    """The condition that keeps unexpired rows (and those at most ``slack`` seconds past
    their moment: verify's tolerance), or None (no expiry column)."""
    rule = resolved.table.expire
    if rule is None or rule.column is None:
        return None
    now_ms = int((time.time() if now is None else now) * 1000)
    # moment = value (in seconds) * 1000 + offset_ms > now_ms
    cutoff_ms = now_ms - round(rule.offset * 1000) - round(slack * 1000)
    col: Any = sa.column(rule.column)
    kind = resolved.schema.column(rule.column).kind
    if kind.temporal:
        at = datetime.fromtimestamp(cutoff_ms / 1000, tz=timezone.utc)
        text = at.strftime("%Y-%m-%d %H:%M:%S.%f")
        live = sa.cast(col, mysql.DATETIME(fsp=6)) > sa.cast(
            sa.literal(text), mysql.DATETIME(fsp=6)
        )
    else:
        per_unit = 1000 if rule.unit == "s" else 1
        live = col > sa.literal(Decimal(cutoff_ms) / per_unit)
    if not resolved.schema.column(rule.column).nullable:
        # never NULL; and on a NOT NULL DATE/DATETIME both engines answer IS NULL for a zero
        # date (ODBC's rule), which the planner counts as expired (plan/expiry.py)
        return live
    return sa.or_(col.is_(None), live)
