"""verify's report: the table of differences per table, the first examples of each kind,
the notes, and what ``--fix`` repaired."""

from __future__ import annotations

from rich.text import Text

from migrator.lines import report_table
from migrator.render.console import err, line, out, show
from migrator.verify.report import DONE, VerifyReport


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
