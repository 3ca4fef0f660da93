"""The consoles (stdout and stderr, 80 columns in a pipe or log) and the ways to print on
them: ``error:``/``warning:`` messages with hints, lines wrapped between words, report tables
whose words are never cut, a report as JSON or for people; byte counts for people."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from rich.console import Console
from rich.segment import Segment, Segments
from rich.table import Table as RichTable
from rich.text import Text

from migrator.lines import WORDS, fit, table_lines, wrap


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


def human_bytes(n: float) -> str:
    """1536 -> '1.5 KiB'."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")
