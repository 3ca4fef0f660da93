"""The mapping's own commands: init's drafted YAML (or the note of the file it went to) and
validate's problems with their hints."""

from __future__ import annotations

import dataclasses
import sys

from rich.text import Text

from migrator.mapping.scaffold import Draft
from migrator.mapping.validate import ValidateReport, plural
from migrator.render.console import line, plain, say


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
