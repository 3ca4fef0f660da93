"""What the CLI prints: messages, progress bars and report tables, all rich.

The only module with rich in it (STYLE habit 7): commands return reports, ``cli`` passes
them here. Reports go to stdout (or JSON with ``--json``); messages, progress bars and
"exit code 1" notes go to stderr, so stdout stays a clean report for pipes.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol, TypeVar

from rich.cells import cell_len
from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.progress import (
    BarColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.segment import Segment, Segments
from rich.table import Column
from rich.table import Table as RichTable
from rich.text import Text

from migrator import progress as stages
from migrator.commands.dryrun import DryRunReport
from migrator.errors import docs
from migrator.lines import (
    ARGUMENTS,
    MIN_SPAN,
    WORDS,
    ProgressLines,
    fit,
    progress_interval,
    report_table,
    table_lines,
    wrap,
)
from migrator.mapping.scaffold import Draft
from migrator.mapping.validate import ValidateReport, plural
from migrator.reports import MigrateReport, SyncReport, SyncStatus
from migrator.verify.report import AMBIGUOUS, DONE, VerifyReport


def console(stderr: bool = False) -> Console:
    """Rich's console (no emoji: keys such as a:email:b stay as written), as wide as the
    terminal or COLUMNS; a pipe or CI log with no COLUMNS set gets 80 columns (not the width
    of a terminal its stdin may be), so a log reads like an 80-column terminal."""
    made = Console(stderr=stderr, emoji=False)
    if not made.is_terminal and not os.environ.get("COLUMNS", "").isdigit():
        made = Console(stderr=stderr, emoji=False, width=LOG_WIDTH)
    return made


LOG_WIDTH = 80
err = console(stderr=True)
out = console()


class Report(Protocol):
    def as_dict(self) -> dict[str, Any]: ...


R = TypeVar("R", bound=Report)


def say(level: str, message: str, hint: str | None = None) -> None:
    """``error: <cause>`` (or ``warning:``) on stderr, then ``  hint: <fix>`` when known;
    each wrapped to the width between words."""
    color = "red" if level == "error" else "yellow"
    line(Text.assemble((f"{level}:", f"bold {color}"), " ", message), to_stderr=True)
    if hint:
        line(Text.assemble("  ", ("hint:", "yellow"), " ", hint), to_stderr=True)


def plain(message: str, to_stderr: bool = False) -> None:
    """A line printed as it is (no markup, no highlighting), wrapped to the width between
    words: a word longer than the width stands whole on a line of its own."""
    line(Text(message), to_stderr)


def line(text: Text | str, to_stderr: bool = False, words: re.Pattern[str] = WORDS) -> None:
    """``text`` wrapped to the console's width between ``words`` (``lines.wrap``); a str
    is taken as it is, without markup."""
    where = err if to_stderr else out
    for one in wrap(text, where.width, words=words):
        where.print(one, highlight=False, soft_wrap=True)


def emit(report: R, as_json: bool, human: Callable[[R], None]) -> None:
    """The report as JSON on stdout, or rendered for people by ``human``."""
    if as_json:
        out.print_json(json.dumps(report.as_dict()))
    else:
        human(report)


class RichProgress:
    """One bar per table: rows, rows/s, ETA from the row estimate; then the last note
    (a retry, a reload after the target lost data), kept NOTE_SECONDS after rows move on."""

    NOTE_SECONDS = 3.0
    BAR = 12  # the bar's width below 100 columns; it narrows to MIN_BAR for a long name
    MIN_BAR = 4

    def __init__(self, console: Console) -> None:
        # fits 80 columns: name, bar, rows done/total, rows/s, ETA (elapsed when wider); for
        # a long name the bar narrows, then the bar and the words go (``compact``): names
        # stay whole
        self.console = console
        self.wide = console.width >= 100
        name = TextColumn("{task.description}", style="bold", table_column=Column(no_wrap=True))
        done = TextColumn("{task.fields[done]}", justify="right")
        note = TextColumn("{task.fields[note]}", style="yellow")
        self.compact = (name, done, TextColumn("{task.fields[rate]:>7}/s"), TimeRemainingColumn(),
                        note)  # fmt: skip
        self.bar = BarColumn(bar_width=None if self.wide else self.BAR)
        columns = [
            name,
            self.bar,
            done,
            TextColumn("{task.fields[rate]:>7} rows/s"),
            *([TimeElapsedColumn()] if self.wide else []),
            TextColumn("eta"),
            TimeRemainingColumn(),
            note,
        ]
        self.bars = Progress(*columns, console=console, transient=False)
        self.tasks: dict[str, TaskID] = {}
        self.noted: dict[str, float] = {}
        #: per table, when its first batch came and the rows then: rows/s is counted from
        #: there, as the summary's (not from the bar's start: with workers every table's bar
        #: starts at once, and a table whose rows come last showed a tiny rate)
        self.first: dict[str, tuple[float, int]] = {}
        self.clock = time.monotonic
        self.widest = (0, 0)  # the longest name and done/total text so far

    def _make_room(self, table: str, total: int | None) -> None:
        """Before a table's bar is drawn: narrow the bar, or switch to ``compact``, so that
        its whole name fits the width beside its rows, rows/s and ETA."""
        name = max(self.widest[0], cell_len(table))
        done = max(self.widest[1], len(_done(total or 0, total)))
        self.widest = (name, done)
        rest = done + len("1234567 rows/s") + len("eta") + len("0:00:00") + 7  # 7 blanks
        free = self.console.width - name - rest - (len("0:00:00 ") if self.wide else 0)
        if free < self.MIN_BAR:
            self.bars.columns = self.compact
        elif free < (20 if self.wide else self.BAR):
            self.bar.bar_width = free

    def __enter__(self) -> RichProgress:
        self.bars.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bars.stop()

    def rate(self, table: str, completed: int) -> str:
        """Rows/s since the table's first batch, once batches came for MIN_SPAN seconds."""
        since, first = self.first.get(table, (self.clock(), completed))
        span = self.clock() - since
        return (
            f"{(completed - first) / span:,.0f}" if completed > first and span >= MIN_SPAN else ""
        )

    def start(self, table: str, total: int | None) -> None:
        self.first.pop(table, None)
        if table in self.tasks:  # started again (a reload after the target lost data)
            self.bars.reset(self.tasks[table], total=total, rate="", done=_done(0, total))
            return
        self._make_room(table, total)
        self.tasks[table] = self.bars.add_task(
            escape(table), total=total, rate="", done=_done(0, total), note=""
        )

    def note(self, table: str, message: str) -> None:
        if table in self.tasks:
            self.noted[table] = time.monotonic()
            self.bars.update(self.tasks[table], note=message[:60])

    def advance(self, table: str, rows: int) -> None:
        task_id = self.tasks[table]
        self.bars.advance(task_id, rows)
        task = self.bars.tasks[task_id]
        self.first.setdefault(table, (self.clock(), int(task.completed)))
        if task.total is not None and task.completed > task.total:
            self.bars.update(task_id, total=task.completed)
        done = _done(task.completed, task.total)
        self.bars.update(task_id, rate=self.rate(table, int(task.completed)), done=done)
        if table in self.noted and time.monotonic() - self.noted[table] > self.NOTE_SECONDS:
            del self.noted[table]
            self.bars.update(task_id, note="")

    def finish(self, table: str) -> None:
        task_id = self.tasks[table]
        task = self.bars.tasks[task_id]
        rate = self.rate(table, int(task.completed))
        done = _done(task.completed, task.completed)
        self.bars.update(task_id, total=task.completed, rate=rate, done=done)


def _done(completed: float, total: float | None) -> str:
    """``35,000/299,535`` rows, in full."""
    return f"{completed:,.0f}/{total:,.0f}" if total else f"{completed:,.0f}"


@contextmanager
def progress_bars(wanted: bool = True) -> Iterator[stages.Progress]:
    """Bars on stderr when it is a terminal (and ``wanted``); when it is a pipe or a log, a
    progress line every $MIGRATOR_PROGRESS_SECONDS (``lines.ProgressLines``); notes always."""
    if err.is_terminal and wanted:
        with RichProgress(err) as bars:
            yield bars
        return
    every = 0.0 if err.is_terminal else progress_interval()
    with ProgressLines(lambda text: plain(text, to_stderr=True), every) as lines:
        yield lines


def show(table: RichTable) -> None:
    """Print a ``report_table`` so that no word or number is ever cut (``lines.fit``).

    Its title goes first, wrapped on its own. A table that fits the width with every word
    whole is drawn (in a pipe or log: 80 columns, as with COLUMNS=80); otherwise each row
    becomes plain lines, ``name: head value, head value``, wrapped between those pairs."""
    title, table.title = table.title, None
    if title is not None:
        line(title)
    if not fit(table, out.width):
        for row in table_lines(table, out.width):
            out.print(row, highlight=False, soft_wrap=True)
        return
    rendered = out.render_lines(table, out.options, pad=False)
    out.print(Segments([s for x in rendered for s in [*_rstrip(x), Segment.line()]]), end="")


def _rstrip(segments: list[Segment]) -> list[Segment]:
    """A rendered line without the blanks after its last character."""
    out = list(segments)
    while out and not out[-1].control and not out[-1].text.strip():
        out.pop()
    if out and not out[-1].control:
        last = out[-1]
        out[-1] = Segment(last.text.rstrip(), last.style)
    return out


REJECTS_SHOWN = 10  # rejected rows named per table in the summary


def render_migrate(report: MigrateReport) -> None:
    table = report_table(
        f"migrate {report.mapping}: {report.source} -> {report.target}",
        ("table", "rows read", "keys written", "index entries", "skipped / rejected",
         "seconds", "rows/s"),
        left=("table", "skipped / rejected"),
    )  # fmt: skip
    for t in report.tables:
        notes = Text("\n").join(
            [Text(f"{n} {why}") for why, n in t.skipped.items()]
            + [Text(f"{n} rejected: {why}", "red") for why, n in t.rejected.items()]
            + [
                Text(
                    f"{plural(t.duplicate_rows, 'row')} overwritten: "
                    f"{plural(t.duplicate_keys, 'duplicate key')}",
                    "red",
                )
            ]
            * bool(t.duplicate_rows)
            + [
                Text(f"unique {', '.join(v.columns)}: {plural(v.values, 'value')} shared", "red")
                for v in t.shared
            ]
            + [Text(t.status)] * (t.status != "done")
            + [Text(f"resumed after {t.resumed_from:,} rows")]
            * bool(t.resumed_from and t.status == "done")
            + [Text(f"{t.retries} retries", "yellow")] * bool(t.retries)
        )
        table.add_row(
            Text(t.table), f"{t.rows:,}", f"{t.keys:,}", f"{t.entries:,}", notes or "-",
            f"{t.seconds:.2f}", f"{t.rows_per_second:,.0f}",
        )  # fmt: skip
    table.add_section()
    rate = report.rows / report.seconds if report.seconds else 0
    table.add_row(
        "total", f"{report.rows:,}", f"{report.keys:,}", "", "", f"{report.seconds:.2f}",
        f"{rate:,.0f}",
    )  # fmt: skip
    show(table)
    if report.removed is not None:
        line(f"--replace: removed {report.removed:,} keys the mapping owns first")
    if report.consistency:
        line(Text(f"source read: {report.consistency}", "dim"))
    for note in report.notes:
        line(Text(note, "yellow"), to_stderr=True)
    for what in report.recoveries:
        say("warning", what)
    for t in report.tables:
        for r in t.rejects[:REJECTS_SHOWN]:
            pk = ", ".join(r.pk)
            plain(f"  rejected {t.table} ({pk}): {r.column}: {r.reason}", to_stderr=True)
        more = sum(t.rejected.values()) - min(len(t.rejects), REJECTS_SHOWN)
        if t.rejects and more > 0:
            plain(f"  ... and {more:,} more rejected row(s) of {t.table}", to_stderr=True)
    if report.rejected:
        listed = f"listed in {report.rejects_file}" if report.rejects_file else "see above"
        rejected = Text.from_markup(
            f"[red]{report.rejected} row(s) were rejected[/] ({listed}; --rejects FILE lists "
            "them, options.escape: backslash writes them escaped); exit code 1"
        )
        line(rejected, to_stderr=True)
    if report.duplicate_rows:
        say(
            "error",
            f"{plural(report.duplicate_rows, 'row')} overwritten by a row with the same key "
            "(see the table): Redis holds one row per key; exit code 1",
            "the declared primary_key is not unique in MySQL: declare columns that are; "
            f"'migrator verify {report.mapping}' prints the SQL that lists the duplicates",
        )
    for t in report.tables:
        for v in t.shared:
            say(
                "error",
                f"{t.table}: {plural(v.values, 'value')} of unique {', '.join(v.columns)} held "
                f"by several rows ({plural(v.rows, 'row')} beyond one per value): Redis holds "
                "one entry per value, naming one of the rows; exit code 1",
                "MySQL does not enforce this unique (no UNIQUE index): list the rows with: "
                f"{v.sql}",
            )


def render_init(draft: Draft, text: str, output: str | None) -> None:
    """The drafted YAML ``text`` on stdout, or a one-line note of the file it went to; and
    the rows the default ``escape: reject`` would not write, if any."""
    if draft.rejects:
        shown = ", ".join(f"{t} ({n:,})" for t, n in draft.rejects.items())
        plain(
            f"rows with '{draft.separator}' inside a value of a composite key would be "
            f"rejected under the default escape: reject: {shown}; the draft sets "
            "escape: backslash on those tables alone, to write them escaped (the other "
            "tables' keys stay as they are)",
            to_stderr=True,
        )
    if not output:
        sys.stdout.write(text)
        return
    left_out = [t.name for t in draft.tables if t.body is None]
    note = f", left out: {', '.join(left_out)} (see the comments)" if left_out else ""
    plain(
        f"wrote {output}: {plural(len(draft.mapped), 'table')}{note}; "
        f"check it with: migrator validate {output}",
        to_stderr=True,
    )


def render_validate(report: ValidateReport) -> None:
    """Each problem as ``error:``/``warning:`` with its hint, then the summary."""
    for p in report.problems:
        say(p.level, str(dataclasses.replace(p, hint=None)), p.hint)
    if report.errors:
        line(Text(report.summary(), "red"), to_stderr=True)
    else:
        plain(report.summary())


def human_bytes(n: float) -> str:
    """1536 -> '1.5 KiB'."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def render_dry_run(report: DryRunReport) -> None:
    for t in report.tables:
        grid = report_table(
            f"{t.table}: {t.rows:,} rows"
            + (f" ({t.filtered_out:,} left out by where: {t.where})" if t.where else ""),
            ("structure", "key pattern", "keys", "memory (est.)"),
            left=("structure", "key pattern"),
        )
        for name, patterns in t.patterns.items():
            keys, mem = t.keys.get(name, 0), t.memory.get(name, 0)
            grid.add_row(name, Text("\n".join(patterns)), f"{keys:,}", human_bytes(mem))
        show(grid)
        notes = [f"{n} {why}" for why, n in t.skipped.items()]
        notes += [f"{n} rejected: {why}" for why, n in t.rejected.items()]
        if t.expire:
            notes.append(f"expire: {t.expire}; {plural(t.expired, 'row')} already past it")
        if t.duplicate_rows:
            notes.append(
                f"{plural(t.duplicate_rows, 'row')} would be overwritten by a row with the same "
                f"key ({plural(t.duplicate_keys, 'duplicate key')}: the declared primary_key is "
                "not unique in MySQL)"
            )
        for note in notes:
            plain(f"  note: {note}")
        for command in t.sample:  # wrapped between arguments
            line(f"  {command}", words=ARGUMENTS)
        if t.search:
            line(f"  {t.search}", words=ARGUMENTS)
        out.print()
    plain(
        f"total: {sum(t.rows for t in report.tables):,} rows -> {report.keys:,} keys, "
        f"about {human_bytes(report.memory)} of Redis memory (an estimate, see "
        f"{docs('commands.md#migrator-dry-run')}). "
        f"Target {report.target} was not contacted."
    )
    if report.snapshot is not None:
        plain(f"read from {report.snapshot.describe()}")
    if report.resp_file:
        plain(
            f"wrote {report.resp_file}: {report.commands:,} commands, "
            f"{human_bytes(report.resp_bytes)}; load it with: "
            f"redis-cli -u <target URL> --pipe < {report.resp_file}"
        )
    if report.rejected:
        if any(AMBIGUOUS in t.rejected for t in report.tables):
            plain(
                "options.escape: backslash writes them, each separator in a value escaped",
                to_stderr=True,
            )
        rejected = Text.from_markup(
            f"[red]{report.rejected:,} row(s) would be rejected[/] by migrate (see the notes "
            "above); exit code 1"
        )
        line(rejected, to_stderr=True)


def render_repairs(report: VerifyReport) -> None:
    """What ``verify --fix`` changed: per table and kind, the count and the first keys."""
    changed = sum(t.total for t in report.repaired)
    if not changed:
        out.print("[green]--fix: nothing to repair[/]")
        return
    table = report_table(
        f"verify --fix: {changed:,} repairs written from MySQL",
        ("table", "what", "count", "first keys"),
        left=("table", "what", "first keys"),
    )
    for t in report.repaired:
        for kind, n in t.counts.items():
            keys = [c.key + (f" {c.field}" if c.field else "") for c in t.examples[kind]]
            what = f"{kind}: {DONE.get(kind, 'repaired')}"
            table.add_row(Text(t.table), Text(what), f"{n:,}", Text("\n".join(keys)))
    show(table)
    if report.found is not None:
        line(Text("then checked again, in a new snapshot:", "dim"))


def render_verify(report: VerifyReport) -> None:
    """The verify table, then the first examples of each kind of difference."""
    table = report_table(
        f"verify {report.mapping} ({report.mode}): {report.source} vs {report.target}",
        ("table", "MySQL rows", "Redis rows", "missing", "different", "stale", "rejected",
         "structure problems", "status"),
        left=("table", "status"),
    )  # fmt: skip
    if report.repaired:
        render_repairs(report)
    for t in report.tables:
        status = Text("ok", "green") if t.ok else Text("DIFFERENT", "bold red")
        redis_rows = "-" if t.redis_rows is None else f"{t.redis_rows:,}"
        table.add_row(
            Text(t.table), f"{t.mysql_rows:,}", redis_rows, f"{t.missing:,}", f"{t.different:,}",
            f"{t.stale:,}", f"{t.rejected:,}", f"{t.structure:,}", status,
        )  # fmt: skip
    show(table)
    for t in report.tables:
        for kind, examples in t.examples.items():
            shown = report_table(
                f"{t.table}: {t.counts[kind]:,} × {kind}",
                ("key", "field", "MySQL", "Redis"),
                left=("key", "field", "MySQL", "Redis"),
            )
            for d in examples:
                cells = (d.key, d.field, d.mysql, d.redis)
                shown.add_row(*(Text(x) if x is not None else Text("-", "dim") for x in cells))
            show(shown)
    everywhere = (
        set.intersection(*(set(t.notes) for t in report.tables)) if report.tables else set()
    )
    for t in report.tables:
        for note in t.notes:
            if note not in everywhere or len(report.tables) == 1:
                line(Text(f"{t.table}: {note}", "dim"))
    if len(report.tables) > 1:
        for note in sorted(everywhere):
            line(Text(f"every table: {note}", "dim"))
    if report.snapshot is not None:
        line(Text(f"compared with {report.snapshot.describe()}", "dim"))
    for hint in report.rejected_hints():
        line(Text(hint, "red"), to_stderr=True)
    if not report.ok:
        err.print("[red]Redis differs from MySQL[/] (see above); exit code 1")
    elif report.mode == "counts-only":
        out.print(f"[green]counts match[/] ({report.seconds:.2f} s)")
    elif report.mode == "full":
        out.print(f"[green]Redis matches MySQL[/] ({report.seconds:.2f} s)")
    else:
        rows = report.mode.removeprefix("sample ")
        out.print(
            f"[green]no difference[/] in {rows} random rows per table ({report.seconds:.2f} s)"
        )


# --- sync -------------------------------------------------------------------------------------
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
def sync_status_printer(as_json: bool) -> Iterator[Callable[[SyncStatus], None]]:
    """sync's live status: one JSON object per line on stdout with ``--json``; a line
    redrawn in place on stderr when it is a terminal; else nothing."""
    if as_json:

        def print_json(s: SyncStatus) -> None:
            sys.stdout.write(json.dumps({"status": s.as_dict()}) + "\n")
            sys.stdout.flush()

        yield print_json
        return
    if not err.is_terminal:
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
