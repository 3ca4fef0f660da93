"""dry-run's report: per table the structures, key patterns, key counts, memory estimate
and sample commands, then the totals and the RESP file written."""

from __future__ import annotations

from rich.text import Text

from migrator.commands.dryrun import DryRunReport
from migrator.errors import docs
from migrator.lines import ARGUMENTS, report_table
from migrator.mapping.validate import plural
from migrator.render.console import human_bytes, line, out, plain, show
from migrator.verify.report import AMBIGUOUS


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
        if t.stream_refused:
            notes.append(t.stream_refused)
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
        if t.stream:
            first = ("the first load appends one snapshot entry per row, counted in the memory "
                     "above" if t.stream_snapshot else "the first load writes none")  # fmt: skip
            plain(f"  stream (sync appends one entry per row change, ~{t.stream_entry_bytes} "
                  f"bytes of fields each; {first}):")  # fmt: skip
            line(f"  {t.stream}", words=ARGUMENTS)
            if t.stream_snapshot:
                line(f"  {t.stream_snapshot}", words=ARGUMENTS)
        out.print()
    plain(
        f"total: {sum(t.rows for t in report.tables):,} rows -> {report.keys:,} keys, "
        f"about {human_bytes(report.memory)} of Redis memory (an estimate, see "
        f"{docs('commands.md#migrator-dry-run')}). "
        f"Target {report.target} was not contacted."
    )
    for text in report.shards:  # a sharded source: each shard's rows and snapshot
        plain(text)
    if not report.shards and report.snapshot is not None:
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
