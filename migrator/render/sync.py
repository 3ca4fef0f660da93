"""sync's output: the live status line (redrawn on a terminal, JSON lines with ``--json``)
and the closing summary."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.live import Live
from rich.text import Text

from migrator.render.console import err, plain
from migrator.reports import SyncReport, SyncStatus


def _status_line(s: SyncStatus) -> Text:
    where = s.position.split(" (GTID")[0]  # the GTID is in --json; the line fits 80 columns
    if s.note:  # a retry or a recovery: what, and what next
        return Text.assemble((s.phase, "bold"), " ", (s.note, "yellow"))
    snap = s.online_snapshot
    if snap:  # an online snapshot under way: its table and chunk instead of the position
        where = f"snapshot {snap['table']} {snap['chunk']}/{snap['chunks']}"
    return Text.assemble(
        (s.phase, "bold green" if s.phase == "caught up" else "bold"),
        f" {s.events_per_second:,.0f} rows/s  {s.rows_changed:,} rows  "
        f"{s.transactions:,} txns  lag {s.lag_seconds:,.1f}s  {where}",
    )


@contextmanager
def sync_status_printer(
    as_json: bool, redraw: bool = True
) -> Iterator[Callable[[SyncStatus], None]]:
    """sync's live status: one JSON object per line on stdout with ``--json``; a line
    redrawn in place on stderr when it is a terminal (and ``redraw``: not when the log is
    written there); else nothing."""
    if as_json:

        def print_json(s: SyncStatus) -> None:
            sys.stdout.write(json.dumps({"status": s.as_dict()}) + "\n")
            sys.stdout.flush()

        yield print_json
        return
    if not err.is_terminal or not redraw:
        yield lambda s: None
        return
    live: Live | None = None

    def show_live(s: SyncStatus) -> None:
        nonlocal live
        if s.phase == "loading":
            return
        if live is None:
            live = Live(_status_line(s), console=err, auto_refresh=False, transient=False)
            live.start()
        live.update(_status_line(s), refresh=True)

    try:
        yield show_live
    finally:
        if live is not None:
            live.stop()


def render_sync(report: SyncReport) -> None:
    rows = sum(t.rows for t in report.loaded)
    removed = ""
    if report.removed:
        removed = f" ({report.removed:,} keys of an earlier load removed first)"
    snap = report.snapshot
    if report.online_load and (snap is not None or report.loaded):
        begun = f" from binlog {snap.binlog_file}:{snap.binlog_position}" if snap else ""
        plain(
            f"sync {report.mapping}: first load done online{begun}, every table read in "
            "primary-key chunks while following the log"
        )
        which = "" if snap else " finished by this run (it resumed the load)"
        tables = f"{len(report.loaded)} table(s){which}"
        plain(f"  {rows:,} rows in {tables} -> {report.target}{removed}")
    elif snap is not None:
        plain(
            f"sync {report.mapping}: loaded a consistent snapshot of {report.source} "
            f"as of {snap.moment} UTC, binlog {snap.binlog_file}:{snap.binlog_position}"
        )
        plain(f"  {rows:,} rows in {len(report.loaded)} table(s) -> {report.target}{removed}")
    for note in report.notes:
        plain(f"sync {report.mapping}: {note}")
    for t in report.resnapshots:
        plain(
            f"sync {report.mapping}: snapshot of {t.table} ({t.status}) done online: "
            f"{t.rows:,} rows in {t.seconds:.1f} s"
        )
    plain(
        f"sync {report.mapping}: applied {report.transactions:,} transaction(s), "
        f"{report.rows_changed:,} row change(s) in {report.seconds:.1f} s; "
        f"{report.stopped} at binlog {report.position}"
    )
