"""Text that reads in an 80-column terminal and in a log: words wrapped, never cut.

Used by ``render`` (the only other package with rich in it). Every line is at most the width
unless it holds a single value longer than that (a URL, a JSON document), which stands on a
line of its own, whole. Report tables get column widths of their own choosing: rich's own
shrinking of a table too wide cuts words (``product_ta``/``g``, ``statu``); here every
column is at least its longest word, and a table that cannot be drawn so becomes plain lines.
Where no progress bar can be drawn (stderr is a pipe or a CI log), :class:`ProgressLines`
prints a line at a steady interval instead.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable, Sequence

from rich import box
from rich.cells import cell_len
from rich.table import Table
from rich.text import Text

from migrator.errors import MigratorError
from migrator.progress import NullProgress, Periodic

# words, except that a command to copy (``migrator migrate m.yaml --resume``) is one: a
# command broken over two lines runs its first half when pasted into a shell
WORDS = re.compile(
    r"'migrator [^']*'|\bmigrator (?:init|validate|dry-run|migrate|verify|sync) "
    r"(?:(?! \(|; ).)*[^\s.,;][.,;:)]*|\S+"
)
ARGUMENTS = re.compile(r'"(?:[^"\\]|\\.)*"\S*|\S+')  # a command line: quoted arguments whole


def wrap(
    text: Text | str, width: int, indent: str = "  ", words: re.Pattern[str] = WORDS
) -> list[Text]:
    """``text`` in lines of at most ``width`` cells, broken between ``words`` only (a word or
    command longer than a line stands alone, whole); continuation lines start with the first
    line's own indentation plus ``indent``. Styles are kept. Newlines start new lines."""
    text = Text(text) if isinstance(text, str) else text
    lines: list[Text] = []
    for part in text.split("\n", allow_blank=True) if "\n" in text.plain else [text]:
        lines += _wrap_line(part, width, indent, words)
    return lines


def _wrap_line(text: Text, width: int, indent: str, words: re.Pattern[str]) -> list[Text]:
    plain = text.plain
    if cell_len(plain) <= width:
        return [text]
    lead = " " * (len(plain) - len(plain.lstrip(" ")))
    more = lead + indent
    lines: list[Text] = []
    start, end, prefix = 0, 0, ""  # the line in hand: plain[start:end], after prefix
    for m in words.finditer(plain):
        if end and m.start() > start and cell_len(prefix + plain[start : m.end()]) > width:
            lines.append(Text(prefix) + text[start:end] if prefix else text[start:end])
            start, prefix = m.start(), more
        end = m.end()
    lines.append(Text(prefix) + text[start:end] if prefix else text[start:end])
    return lines


def report_table(title: str, heads: Sequence[str], left: Sequence[str]) -> Table:
    """A report table readable at 80 columns: light borders, one blank between columns, no
    header word cut. Print it with ``render.console.show``, which gives it widths (``fit``) or plain
    lines (``table_lines``) that keep every word and number whole."""
    table = Table(
        title=Text(title), title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1, 0, 0)
    )
    for h in heads:
        table.add_column(
            h,
            justify="left" if h in left else "right",
            min_width=max(len(w) for w in h.split()),
            overflow="fold",
        )
    return table


def fit(table: Table, width: int) -> bool:
    """Fix each column's width so that the table is at most ``width`` wide with no word
    broken: every column at least its longest word (a right-justified column: its longest
    cell, numbers whole), the room left given to the columns that need least of it first,
    up to their widest line (so short headers stay on one line). False, leaving the table
    as it was, when even the narrowest layout is wider than ``width``."""
    mins, wides = [], []
    for col in table.columns:
        cells = [_plain(c) for c in (col.header, *col.cells)]
        words = [w for c in cells for w in c.split()]
        if col.justify == "right":
            words += [_plain(c) for c in col.cells]
        mins.append(max([col.min_width or 1, *map(cell_len, words)]))
        wides.append(max([mins[-1], *(cell_len(x) for c in cells for x in c.split("\n"))]))
    padding = sum(table._get_padding_width(i) for i in range(len(table.columns)))
    room = width - padding - table._extra_width - sum(mins)
    if room < 0:
        return False
    widths = list(mins)
    for i in sorted(range(len(widths)), key=lambda i: wides[i] - mins[i]):
        give = min(room, wides[i] - widths[i])
        widths[i] += give
        room -= give
    for col, w in zip(table.columns, widths):
        col.width = w
    return True


def table_lines(table: Table, width: int) -> list[Text]:
    """Each row as plain lines: its first cell, then ``head value`` for every other cell that
    says something (``-`` and empty cells are left out; lines within a cell joined by ';'),
    wrapped to ``width`` between those pairs (inside a pair only when it is longer than a
    line), continuation lines indented."""
    columns = [list(col.cells) for col in table.columns]
    heads = [_plain(col.header) for col in table.columns]
    lines = []
    for row in zip(*columns):
        label, *rest = (_cell(c) for c in row)
        pairs = [
            Text.assemble(f"{head} ", cell)
            for head, cell in zip(heads[1:], rest)
            if cell.plain.strip() not in ("", "-")
        ]
        line = Text.assemble(label, ":")
        for i, pair in enumerate(pairs):
            if i < len(pairs) - 1:
                pair.append(",")
            if cell_len(line.plain) + 1 + cell_len(pair.plain) > width and line.plain.strip():
                lines.append(line)
                line = Text(" ")
            line.append(" ")
            line.append_text(pair)
            *done, line = wrap(line, width, indent="  " if line.plain[0] != " " else "")
            lines += done
        lines.append(line)
    return lines


def _plain(cell: object) -> str:
    return cell.plain if isinstance(cell, Text) else str(cell)


def _cell(cell: object) -> Text:
    text = cell.copy() if isinstance(cell, Text) else Text(str(cell))
    return Text("; ").join(text.split("\n")) if "\n" in text.plain else text


# -- progress lines ------------------------------------------------------------------------------

INTERVAL_ENV = "MIGRATOR_PROGRESS_SECONDS"
MIN_SPAN = 0.5  # seconds of batches before a table's rows/s is shown
DEFAULT_INTERVAL = 15.0


def progress_interval() -> float:
    """Seconds between progress lines: ``$MIGRATOR_PROGRESS_SECONDS``, else 15; 0 turns
    them off."""
    value = os.environ.get(INTERVAL_ENV, "").strip()
    if not value:
        return DEFAULT_INTERVAL
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not seconds >= 0:
        raise MigratorError(
            f"{INTERVAL_ENV}={value!r} is not a number of seconds",
            f"export {INTERVAL_ENV}=30 (a line every 30 s), or 0 for none",
        )
    return seconds


class ProgressLines(NullProgress, Periodic):
    """Progress for a log: every ``interval`` seconds, for each table whose rows are moving,
    one line ``progress 12.0s: payment 8,000/16,044 rows (49%), 12,345 rows/s, eta 0:00:01``
    (rows/s counted from the table's first batch on); when none is, one line of the tables
    done and to go. Notes are lines of their own. ``write`` prints one line; it is called
    from a thread of its own."""

    name = "progress-lines"

    def __init__(self, write: Callable[[str], None], interval: float) -> None:
        Periodic.__init__(self, interval)
        self.write = write
        self.lock = threading.Lock()
        self.totals: dict[str, int | None] = {}
        self.done: dict[str, int] = {}
        self.first: dict[str, tuple[float, int]] = {}  # when the first batch came, its rows
        self.finished: set[str] = set()
        self.last_note = ""  # what a tick says while no table has started (a removal)

    def __enter__(self) -> ProgressLines:
        Periodic.__enter__(self)
        return self

    def tick(self) -> None:
        for line in self.lines():
            self.write(line)

    def start(self, table: str, total: int | None) -> None:
        with self.lock:  # again for a table: a second pass (verify --fix) or a reload
            self.totals[table] = total
            self.done[table] = 0
            self.first.pop(table, None)
            self.finished.discard(table)

    def advance(self, table: str, rows: int) -> None:
        with self.lock:
            self.done[table] = self.done.get(table, 0) + rows
            self.first.setdefault(table, (time.monotonic(), self.done[table]))

    def finish(self, table: str) -> None:
        with self.lock:
            self.finished.add(table)

    def note(self, table: str, message: str) -> None:
        self.last_note = message
        self.write(f"note: {table}: {message}")

    def lines(self) -> list[str]:
        """What a tick prints."""
        now = time.monotonic()
        head = f"progress {_duration(now - self.began)}:"
        with self.lock:
            moving = [t for t in self.first if t not in self.finished]
            if moving:
                return [f"{head} {t} {self._table(t, now)}" for t in moving]
            if not self.done:
                doing = f" ({self.last_note})" if self.last_note else ""
                return [f"{head} no table started yet{doing}"]
            n, rows = len(self.finished), sum(self.done.values())
            to_go = len(self.done) - n
            return [
                f"{head} {n:,} table{'s' * (n != 1)} done, {rows:,} rows"
                + f", {to_go:,} to go" * bool(to_go)
            ]

    def _table(self, table: str, now: float) -> str:
        done, total = self.done[table], self.totals[table]
        since, first = self.first[table]
        span = now - since  # rows/s once batches have come for a while (not a first burst)
        rate = (done - first) / span if done > first and span >= MIN_SPAN else 0.0
        speed = f", {rate:,.0f} rows/s" if rate else ""
        if total and done <= total:
            eta = f", eta {_clock((total - done) / rate)}" if rate else ""
            return f"{done:,}/{total:,} rows ({100 * done // total}%){speed}{eta}"
        return f"{done:,} rows{speed}"


def _duration(seconds: float) -> str:
    """Elapsed time: ``12.3s`` under a minute, else ``0:01:05``."""
    return f"{seconds:.1f}s" if seconds < 60 else _clock(seconds)


def _clock(seconds: float) -> str:
    s = int(seconds + 0.5)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"
