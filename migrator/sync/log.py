"""sync's log: what a service manager's journal keeps of a long ``sync``. One logger
(``migrator.sync``) for every event of the run — its start, a reload after Redis lost its
data, a DDL applied, a table read again, a retry, a reconnect, a failover, caught up, its
end — and a line every ``interval`` seconds with the figures (``Ticker``).

The core only calls ``event``; nothing is written until a handler is attached (the command
line's, render/log.py: stderr, ``text`` or ``json``). Library users get the records through
Python's ``logging`` like any other library's: each has ``event`` (its name) and ``fields``
(its data) besides the message."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from migrator.progress import Periodic
from migrator.reports import SyncReport
from migrator.sync.pace import load_message

LOGGER = logging.getLogger("migrator.sync")
LOGGER.addHandler(logging.NullHandler())  # silent unless a handler is attached
DEFAULT_INTERVAL = 60.0


def event(name: str, message: str, level: int = logging.INFO, **fields: Any) -> None:
    """One event of the run: ``name`` (``start``, ``ddl``, ``reload``...), a sentence for
    people, and its ``fields`` as data (the JSON format's ``fields``)."""
    LOGGER.log(level, message, extra={"event": name, "fields": fields})


def started(
    mapping: str, source: str, target: str, stored: dict[str, str], reload: bool, online: bool
) -> None:
    """The start line: the mapping, the source and target (passwords masked: ``urls.mask``)
    and where the run starts from."""
    if stored.get("file"):
        where = f"{stored['file']}:{stored.get('pos', '?')}"
        text = f"following from the stored position {where}"
    else:
        where = None
        how = "online, in primary-key chunks" if online else "in one consistent snapshot"
        why = "--reload: the mapping's keys removed, " if reload else "no stored position: "
        text = f"{why}the tables are loaded first ({how})"
    event("start", f"sync {mapping}: {source} -> {target}; {text}", mapping=mapping,
          source=source, target=target, position=where, gtid=stored.get("gtid") or None,
          reload=reload)  # fmt: skip


def failed_over(before: dict[str, str], after: dict[str, str]) -> None:
    """The source is another server than the stored position's: where the run goes on."""
    where = f"{after['file']}:{after['pos']}"
    event("failover", f"the source is {after['source']} (server {after['server']}), no longer "
          f"{before.get('source', '?')} (server {before.get('server', '?')}): following from "
          f"{where}, right after the stored GTID state {before.get('gtid', '')}",
          logging.WARNING, source=after["source"], server=after["server"],
          previous_source=before.get("source"), previous_server=before.get("server"),
          position=where, gtid=before.get("gtid"))  # fmt: skip


def ended(report: SyncReport) -> None:
    """The run's end without an error (an error is printed by the command line)."""
    event("stop", f"{report.stopped} at {report.position}: {report.transactions:,} "
          f"transaction(s), {report.rows_changed:,} row change(s) applied",
          stopped=report.stopped, position=str(report.position),
          transactions=report.transactions, row_changes=report.rows_changed)  # fmt: skip


def _rate(now: float, then: float, a: float, b: float) -> float:
    return (b - a) / max(now - then, 1e-9)


class Ticker(Periodic):
    """Every ``interval`` seconds, one ``status`` event from ``figures()`` (``SyncFigures.
    as_dict``): phase, position, lag, transactions and row changes per second since the last
    line, what is behind (transactions, bytes) and, while loading, the rows loaded."""

    name = "log-ticker"

    def __init__(self, figures: Callable[[], dict[str, Any]], interval: float) -> None:
        super().__init__(interval)
        self.figures = figures
        self.last = (time.monotonic(), 0, 0)  # when, transactions, row changes

    def tick(self) -> None:
        f = self.figures()
        now = time.monotonic()
        rows = sum(n for ops in f["row_changes"].values() for n in ops.values())
        then, txns0, rows0 = self.last
        self.last = (now, f["transactions"], rows)
        fields = status_fields(f, _rate(now, then, txns0, f["transactions"]),
                               _rate(now, then, rows0, rows))  # fmt: skip
        event("status", status_message(fields), **fields)


def status_fields(f: dict[str, Any], txns_per_s: float, rows_per_s: float) -> dict[str, Any]:
    """A status line's fields from the figures (``SyncFigures.as_dict``)."""
    pos = f["position"]
    out: dict[str, Any] = {
        "phase": f["phase"],
        "position": f"{pos['file']}:{pos['pos']}" if pos else None,
        "lag_seconds": f["lag_seconds"],
        "transactions_per_second": round(txns_per_s, 1),
        "row_changes_per_second": round(rows_per_s, 1),
        "behind_transactions": f["behind_transactions"],
        "behind_bytes": f["behind_bytes"],
        "transactions": f["transactions"],
        "healthy": f["healthy"],
    }
    load = f.get("load")
    if load:
        out["load"] = load
    return out


def status_message(s: dict[str, Any]) -> str:
    behind = []
    if s["behind_transactions"] is not None:
        behind.append(f"{s['behind_transactions']:,} transaction(s)")
    if s["behind_bytes"] is not None:
        behind.append(f"{s['behind_bytes']:,} bytes")
    text = (
        f"{s['phase']} at {s['position'] or 'no position yet'}, lag {s['lag_seconds']:.3f} s, "
        f"{s['transactions_per_second']:,.1f} transactions/s, "
        f"{s['row_changes_per_second']:,.1f} row changes/s, "
        f"behind: {', '.join(behind) or 'not known'}"
    )
    load = s.get("load")
    if load:
        text += f"; {load_message(load)}"
    return text
