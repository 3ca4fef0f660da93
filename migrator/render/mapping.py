"""The mapping's own commands: init's drafted YAML (or the note of the file it went to) and
validate's problems with their hints."""

from __future__ import annotations

import dataclasses
import sys

from rich.text import Text

from migrator.mapping.scaffold import Draft
from migrator.mapping.validate import Problem, ValidateReport, plural
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


def render_validate(report: ValidateReport, sync_details: bool = False) -> None:
    """Errors first, then warnings, each with its hint; what concerns ``sync`` only is one
    line per table (in full with ``sync_details``); then the summary."""
    errors = [p for p in report.problems if p.level == "error"]
    later = [p for p in report.problems if p.level != "error"]
    brief = [p for p in later if p.brief and not sync_details]
    for p in errors + [p for p in later if p not in brief]:
        say(p.level, str(dataclasses.replace(p, hint=None, brief=None)), p.hint)
    tables: dict[str, list[Problem]] = {}  # one line per table: its briefs joined
    for p in brief:
        tables.setdefault(p.path, []).append(p)
    for same in tables.values():
        briefs = [p.brief or "" for p in same]
        head, _, _ = briefs[0].partition(": ")
        text = briefs[0] + "".join(
            "; " + (b.partition(": ")[2] if b.startswith(head + ": ") else b) for b in briefs[1:]
        )
        at = dataclasses.replace(same[0], message=text, hint=None, brief=None)
        say("note", str(at))
    if brief:
        plain(
            f"{'this note concerns' if len(tables) == 1 else f'these {len(tables)} notes concern'}"
            " sync alone (migrate and verify are not affected): migrator validate --sync "
            f"{report.file} says why and how to fix it",
            to_stderr=True,
        )
    if report.errors:
        line(Text(report.summary(), "red"), to_stderr=True)
    else:
        plain(report.summary())
