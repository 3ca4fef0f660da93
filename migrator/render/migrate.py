"""migrate's report: the table of rows, keys and rates per table, then what was rejected,
overwritten or shared, with the exit-code notes."""

from __future__ import annotations

from rich.text import Text

from migrator.lines import report_table
from migrator.mapping.validate import plural
from migrator.render.console import line, plain, say, show
from migrator.reports import MigrateReport

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
        how = "options.escape: backslash writes them escaped"
        if report.collided == report.rejected:  # a sharded source's (docs/sharding.md)
            how = "each collides with another shard's row, which Redis keeps"
        elif report.collided + report.crossed == report.rejected:
            how = "each collides with another shard's row or is a child on another shard "
            how += "than its parent, in no document"
        rejected = Text.from_markup(
            f"[red]{report.rejected} row(s) were rejected[/] ({listed}; --rejects FILE lists "
            f"them, {how}); exit code 1"
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
