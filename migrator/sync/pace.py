"""The first load's pace: rows done, their total (the tables' row estimates, InnoDB's
statistics, which may be off by some percent) and the time left at the pace so far — for
``/healthz``, the ``--json`` status lines and the log's status lines."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def load_pace(
    estimates: Mapping[str, int],
    rows: Mapping[str, int],
    base: Mapping[str, int],
    began: float | None,
    now: float,
) -> dict[str, Any]:
    """``{"rows", "total", "seconds_left"}`` of the load of the tables in ``estimates``
    (rows to load, 0: not known): ``rows`` written per table, ``base`` of them written before
    this load began (at ``began``). ``total`` is None when no table has an estimate, and
    never below the rows done; ``seconds_left`` None until a row is done."""
    done = sum(rows.get(t, 0) - base.get(t, 0) for t in estimates)
    total = sum(estimates.values()) or None
    if total is not None:
        total = max(total, done)  # an estimate below what was read: what was read
    left = None
    spent = now - began if began is not None else 0.0
    if total is not None and done and spent > 0:
        left = round((total - done) / (done / spent), 1)
    return {"rows": done, "total": total, "seconds_left": left}


def load_message(load: dict[str, Any]) -> str:
    """``loaded 12,000 of about 50,000 rows (24%), about 31 s left``."""
    done, total, left = load["rows"], load["total"], load["seconds_left"]
    if total is None:
        return f"loaded {done:,} rows (total not known)"
    share = min(100, done * 100 // total) if total else 100
    rest = f", about {left:,.0f} s left" if left is not None else ""
    return f"loaded {done:,} of about {total:,} rows ({share}%){rest}"
