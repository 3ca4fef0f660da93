"""Progress for people: one rich bar per table on a terminal, a progress line every few
seconds in a pipe or log (``lines.ProgressLines``)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Column

from migrator import progress as stages
from migrator.lines import MIN_SPAN, ProgressLines, progress_interval
from migrator.render.console import err, plain


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
def progress_bars(wanted: bool = True, printed: bool = True) -> Iterator[stages.Progress]:
    """Bars on stderr when it is a terminal (and ``wanted``); when it is a pipe or a log, a
    progress line every $MIGRATOR_PROGRESS_SECONDS (``lines.ProgressLines``); notes always,
    unless ``printed`` is False (sync's JSON log: nothing but its objects on stderr)."""
    if err.is_terminal and wanted:
        with RichProgress(err) as bars:
            yield bars
        return
    if not printed:
        yield stages.NULL_PROGRESS
        return
    every = 0.0 if err.is_terminal else progress_interval()
    with ProgressLines(lambda text: plain(text, to_stderr=True), every) as lines:
        yield lines
