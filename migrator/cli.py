"""The command line: parse options, call commands, render reports, map errors to exit codes."""

from __future__ import annotations

import dataclasses
import json
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Annotated, Any, TypeVar

import typer
from rich import box
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
from rich.table import Table as RichTable
from rich.text import Text

from migrator import __version__, commands
from migrator.errors import EXIT_CONNECT, EXIT_USAGE, MappingErrors, MigratorError

app = typer.Typer(
    name="migrator",
    help="Move a MySQL schema and its data into Redis, indexes included, and prove it.\n\n"
    "Example: migrator migrate mappings/emp.yaml",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
err = Console(stderr=True)
out = Console()
F = TypeVar("F", bound=Callable[..., Any])
_debug = False

MappingArg = Annotated[
    str,
    typer.Argument(
        help="The YAML mapping file, e.g. mappings/emp.yaml.", metavar="MAPPING", show_default=False
    ),
]
SourceOpt = Annotated[
    str | None,
    typer.Option(
        "--source",
        metavar="URL",
        help="MySQL URL, e.g. mysql+pymysql://user:pw@host:3306/db; overrides the mapping.",
        envvar="MIGRATOR_SOURCE_URL",
        show_envvar=True,
    ),
]
TargetOpt = Annotated[
    str | None,
    typer.Option(
        "--target",
        metavar="URL",
        help="Redis URL, e.g. redis://127.0.0.1:6379/0; overrides the mapping.",
        envvar="MIGRATOR_TARGET_URL",
        show_envvar=True,
    ),
]
TablesOpt = Annotated[
    str | None,
    typer.Option(
        "--tables",
        metavar="TABLE,...",
        help="Only these tables, comma-separated, e.g. --tables emp,dept.",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the report as JSON on stdout.")]


def _tables(value: str | None) -> list[str] | None:
    return [t.strip() for t in value.split(",") if t.strip()] if value else None


def say(level: str, message: str, hint: str | None = None) -> None:
    """``error: <cause>`` (or ``warning:``) on stderr, then ``  hint: <fix>`` when known."""
    color = "red" if level == "error" else "yellow"
    err.print(f"[bold {color}]{level}:[/] ", end="", highlight=False)
    err.print(message, markup=False, highlight=False, soft_wrap=True)
    if hint:
        err.print("  [yellow]hint:[/] ", end="", highlight=False)
        err.print(hint, markup=False, highlight=False, soft_wrap=True)


def fail(e: MigratorError) -> None:
    """One red message naming the cause and the fix; the exit code of its kind."""
    if _debug:
        traceback.print_exc()
    for one in e.errors if isinstance(e, MappingErrors) else [e]:
        say("error", one.message, one.hint)
    raise typer.Exit(e.exit_code)


def run(fn: Callable[[], int], resume: str | None = None) -> None:
    """Call a command, turning user errors into messages and exit codes. ``resume``: how
    to continue after Ctrl-C, for a command that leaves work half done."""
    try:
        code = fn()
    except MigratorError as e:
        fail(e)
    except KeyboardInterrupt:
        say("error", "interrupted", resume)
        raise typer.Exit(130) from None
    else:
        raise typer.Exit(code)


@app.callback(invoke_without_command=True)
def main_options(
    version: Annotated[bool, typer.Option("--version", help="Print the version and exit.")] = False,
    debug: Annotated[
        bool, typer.Option("--debug", help="Show the traceback of errors (for bug reports).")
    ] = False,
) -> None:
    """Move a MySQL schema and its data into Redis. Example: migrator migrate mappings/emp.yaml"""
    global _debug
    _debug = debug
    if version:
        out.print(f"migrator {__version__}")
        raise typer.Exit(0)


class RichProgress:
    """One bar per table: rows, rows/s, ETA from the row estimate."""

    def __init__(self, console: Console) -> None:
        # fits 80 columns: name, bar, rows done/total, rows/s, ETA (elapsed when wider)
        columns = [
            TextColumn("{task.description}", style="bold", table_column=Column(max_width=16)),
            BarColumn(bar_width=None if console.width >= 100 else 12),
            TextColumn("{task.fields[done]}", justify="right"),
            TextColumn("{task.fields[rate]:>7} rows/s"),
            *([TimeElapsedColumn()] if console.width >= 100 else []),
            TextColumn("eta"),
            TimeRemainingColumn(),
        ]
        self.bars = Progress(*columns, console=console, transient=False)
        self.tasks: dict[str, TaskID] = {}

    def __enter__(self) -> RichProgress:
        self.bars.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bars.stop()

    def start(self, table: str, total: int | None) -> None:
        self.tasks[table] = self.bars.add_task(
            escape(table), total=total, rate="", done=_done(0, total)
        )

    def advance(self, table: str, rows: int) -> None:
        task_id = self.tasks[table]
        self.bars.advance(task_id, rows)
        task = self.bars.tasks[task_id]
        if task.total is not None and task.completed > task.total:
            self.bars.update(task_id, total=task.completed)
        speed = task.speed
        done = _done(task.completed, task.total)
        self.bars.update(task_id, rate=f"{speed:,.0f}" if speed else "", done=done)

    def finish(self, table: str) -> None:
        task_id = self.tasks[table]
        task = self.bars.tasks[task_id]
        elapsed = task.elapsed or 0
        rate = f"{task.completed / elapsed:,.0f}" if elapsed else ""
        done = _done(task.completed, task.completed)
        self.bars.update(task_id, total=task.completed, rate=rate, done=done)


def _done(completed: float, total: float | None) -> str:
    """``35,000/299,535`` rows, in full."""
    return f"{completed:,.0f}/{total:,.0f}" if total else f"{completed:,.0f}"


@app.command()
def migrate(
    mapping: MappingArg,
    source: SourceOpt = None,
    target: TargetOpt = None,
    tables: TablesOpt = None,
    batch_size: Annotated[
        int | None,
        typer.Option(
            "--batch-size",
            metavar="N",
            help="Rows per Redis pipeline flush (default: the "
            "mapping's options.batch_size, else 5000), e.g. --batch-size 10000.",
        ),
    ] = None,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume",
            help="Continue an interrupted run from its checkpoint in Redis "
            "instead of starting over.",
        ),
    ] = False,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers",
            metavar="N",
            min=1,
            help="Processes loading in parallel: each single-integer primary key's range is "
            "split across them and tables run side by side (default: 1 on machines of up to 2 "
            "CPUs or for loads under 200,000 rows, else min(4, CPUs)), e.g. --workers 2.",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Load the mapped tables into Redis. Example: migrator migrate mappings/emp.yaml --json"""

    def go() -> int:
        if err.is_terminal:
            with RichProgress(err) as progress:
                report = commands.migrate(
                    mapping, source=source, target=target, tables=_tables(tables),
                    batch_size=batch_size, resume=resume, progress=progress, workers=workers,
                )  # fmt: skip
        else:
            report = commands.migrate(
                mapping, source=source, target=target, tables=_tables(tables),
                batch_size=batch_size, resume=resume, workers=workers,
            )  # fmt: skip
        if as_json:
            out.print_json(json.dumps(report.as_dict()))
        else:
            render_migrate(report)
        return report.exit_code

    run(
        go,
        resume="Redis holds the batches written so far (checkpointed); "
        f"'migrator migrate {mapping} --resume' continues from there",
    )


def report_table(title: str, heads: Sequence[str], left: Sequence[str]) -> RichTable:
    """A report table readable at 80 columns: light borders, no header word cut, long
    names fold (never an ellipsis). Print it with ``show``, which keeps numbers whole."""
    table = RichTable(
        title=Text(title), title_justify="left", box=box.SIMPLE_HEAD, collapse_padding=True
    )
    for h in heads:
        table.add_column(
            h,
            justify="left" if h in left else "right",
            min_width=max(len(w) for w in h.split()),
            overflow="fold",
        )
    return table


def show(table: RichTable) -> None:
    """Print a ``report_table``; a right-aligned (number) column is never narrower than
    its widest cell, so only names and notes wrap."""
    for col in table.columns:
        if col.justify == "right":
            widths = [len(c) for c in col.cells if isinstance(c, (str, Text))]
            col.min_width = max([col.min_width or 0, *widths])
    out.print(table)


def render_migrate(report: commands.MigrateReport) -> None:
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
            + [Text(t.status)] * (t.status != "done")
            + [Text(f"resumed after {t.resumed_from:,} rows")]
            * bool(t.resumed_from and t.status == "done")
        )
        table.add_row(
            Text(t.table), f"{t.rows:,}", f"{t.keys:,}", f"{t.entries:,}", notes or "-",
            f"{t.seconds:.2f}", f"{t.rows_per_second:,.0f}",
        )  # fmt: skip
    table.add_section()
    rate = report.rows / report.seconds if report.seconds else 0
    table.add_row("total", f"{report.rows:,}", "", "", "", f"{report.seconds:.2f}", f"{rate:,.0f}")
    show(table)
    if report.rejected:
        err.print(f"[red]{report.rejected} row(s) were rejected[/] (see the table); exit code 1")


# --- init and validate (mapping authoring) ------------------------------------------------
@app.command()
def init(
    source: Annotated[
        str | None,
        typer.Option(
            "--source",
            metavar="URL",
            help="MySQL URL of the schema to draft from, e.g. "
            "mysql+pymysql://root@127.0.0.1:3306/shop.",
            envvar="MIGRATOR_SOURCE_URL",
        ),
    ] = None,
    tables: TablesOpt = None,
    output: Annotated[
        str | None,
        typer.Option(
            "-o",
            "--output",
            metavar="FILE",
            help="Write to FILE instead of stdout (refused if it exists), e.g. -o shop.yaml.",
        ),
    ] = None,
    force: Annotated[
        bool,
        typer.Option("--force", help="Overwrite an existing -o FILE, e.g. -o shop.yaml --force."),
    ] = False,
) -> None:
    """Draft a mapping from the live schema. Example: migrator init --source URL -o shop.yaml"""

    def go() -> int:
        from pathlib import Path

        from migrator import scaffold

        if not source:
            raise MigratorError(
                "init needs the source database",
                "pass --source mysql+pymysql://user@host:3306/db or export MIGRATOR_SOURCE_URL",
            )
        if output and Path(output).exists() and not force:
            raise MigratorError(
                f"{output} already exists; not overwriting it",
                "pass --force to overwrite, or choose another file with -o",
            )
        draft = scaffold.init(source, _tables(tables))
        text = draft.render()
        left_out = [t.name for t in draft.tables if t.body is None]
        if output:
            try:
                Path(output).write_text(text, encoding="utf-8")
            except OSError as e:
                raise MigratorError(f"cannot write {output}: {e.strerror}") from None
            note = f", left out: {', '.join(left_out)} (see the comments)" if left_out else ""
            err.print(
                f"wrote {output}: {len(draft.mapped)} tables{note}; "
                f"check it with: migrator validate {output}",
                highlight=False,
                markup=False,
                soft_wrap=True,
            )
        else:
            sys.stdout.write(text)
        return 0

    run(go)


@app.command()
def validate(mapping: MappingArg, source: SourceOpt = None) -> None:
    """Check a mapping (and, given a source, against the live schema).
    Example: migrator validate mappings/emp.yaml"""

    def go() -> int:
        from migrator.validate import validate as check

        report = check(mapping, source=source)
        for p in report.problems:
            say(p.level, str(dataclasses.replace(p, hint=None)), p.hint)
        if report.errors:
            err.print(report.summary(), style="red", markup=False, highlight=False, soft_wrap=True)
        else:
            out.print(report.summary(), markup=False, highlight=False, soft_wrap=True)
        return report.exit_code

    run(go)


# --- dry-run ---------------------------------------------------------------------------------
@app.command("dry-run")
def dry_run(
    mapping: MappingArg,
    source: SourceOpt = None,
    target: TargetOpt = None,
    tables: TablesOpt = None,
    sample: Annotated[
        int,
        typer.Option(
            "--sample",
            metavar="N",
            help="Show the commands for the first N rows per table, e.g. --sample 5.",
        ),
    ] = 3,
    resp: Annotated[
        str | None,
        typer.Option(
            "--resp",
            metavar="FILE",
            help="Write the whole load as Redis protocol to FILE, for redis-cli --pipe < FILE, "
            "e.g. --resp load.resp.",
        ),
    ] = None,
    batch_size: Annotated[
        int | None,
        typer.Option(
            "--batch-size",
            metavar="N",
            help="Rows per batch, as migrate would use (shapes the RESP file), e.g. 10000.",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Show what migrate would do, without touching Redis (the target is never contacted).
    Example: migrator dry-run mappings/emp.yaml --sample 5 --resp load.resp"""

    def go() -> int:
        from migrator.dryrun import dry_run as plan_only

        report = plan_only(
            mapping, source=source, target=target, tables=_tables(tables), sample=sample,
            resp_file=resp, batch_size=batch_size,
        )  # fmt: skip
        if as_json:
            out.print_json(json.dumps(report.as_dict()))
        else:
            render_dry_run(report)
        return report.exit_code

    run(go)


def render_dry_run(report: Any) -> None:
    from migrator.dryrun import human_bytes

    for t in report.tables:
        grid = report_table(
            f"{t.table}: {t.rows:,} rows",
            ("structure", "key pattern", "keys", "memory (est.)"),
            left=("structure", "key pattern"),
        )
        for name, patterns in t.patterns.items():
            keys, mem = t.keys.get(name, 0), t.memory.get(name, 0)
            grid.add_row(name, Text("\n".join(patterns)), f"{keys:,}", human_bytes(mem))
        show(grid)
        notes = [f"{n} {why}" for why, n in t.skipped.items()]
        notes += [f"{n} rejected: {why}" for why, n in t.rejected.items()]
        for note in notes:
            out.print(f"  note: {note}", markup=False, highlight=False)
        for line in t.sample:
            out.print(f"  {line}", markup=False, highlight=False, soft_wrap=True)
        out.print()
    out.print(
        f"total: {sum(t.rows for t in report.tables):,} rows -> {report.keys:,} keys, "
        f"about {human_bytes(report.memory)} of Redis memory (estimate; see README). "
        f"Target {report.target} was not contacted.",
        markup=False, highlight=False, soft_wrap=True,
    )  # fmt: skip
    if report.resp_file:
        out.print(
            f"wrote {report.resp_file}: {report.commands:,} commands, "
            f"{human_bytes(report.resp_bytes)}; load it with: "
            f"redis-cli -u <target URL> --pipe < {report.resp_file}",
            markup=False, highlight=False, soft_wrap=True,
        )  # fmt: skip


# --- verify ----------------------------------------------------------------------------------
@app.command()
def verify(
    mapping: MappingArg,
    source: SourceOpt = None,
    target: TargetOpt = None,
    tables: TablesOpt = None,
    counts_only: Annotated[
        bool,
        typer.Option(
            "--counts-only",
            help="Compare row counts, counters and latest lists only, not every value, "
            "e.g. migrator verify m.yaml --counts-only.",
        ),
    ] = False,
    sample: Annotated[
        int | None,
        typer.Option(
            "--sample",
            metavar="N",
            help="Check the values of N random rows per table, not all, e.g. --sample 1000.",
        ),
    ] = None,
    batch_size: Annotated[
        int | None,
        typer.Option(
            "--batch-size",
            metavar="N",
            help="Rows read per pipeline of checks (default: the mapping's "
            "options.batch_size), e.g. --batch-size 10000.",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Prove Redis matches MySQL; exit 1 on any difference.
    Example: migrator verify mappings/emp.yaml"""
    from migrator.verifier import verify as run_verify

    def go() -> int:
        kwargs: dict[str, Any] = dict(
            source=source, target=target, tables=_tables(tables), counts_only=counts_only,
            sample=sample, batch_size=batch_size,
        )  # fmt: skip
        if err.is_terminal and not as_json:
            with RichProgress(err) as progress:
                report = run_verify(mapping, progress=progress, **kwargs)
        else:
            report = run_verify(mapping, **kwargs)
        if as_json:
            out.print_json(json.dumps(report.as_dict()))
        else:
            render_verify(report)
        return report.exit_code

    run(go)


def render_verify(report: Any) -> None:
    """The verify table, then the first examples of each kind of difference."""
    table = report_table(
        f"verify {report.mapping} ({report.mode}): {report.source} vs {report.target}",
        ("table", "MySQL rows", "Redis rows", "missing", "different", "stale",
         "structure problems", "status"),
        left=("table", "status"),
    )  # fmt: skip
    for t in report.tables:
        status = Text("ok", "green") if t.ok else Text("DIFFERENT", "bold red")
        redis_rows = "-" if t.redis_rows is None else f"{t.redis_rows:,}"
        table.add_row(
            Text(t.table), f"{t.mysql_rows:,}", redis_rows, f"{t.missing:,}", f"{t.different:,}",
            f"{t.stale:,}", f"{t.structure:,}", status,
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
        for note in t.notes:
            out.print(Text(f"{t.table}: {note}", "dim"))
    if report.ok:
        out.print(f"[green]Redis matches MySQL[/] ({report.seconds:.2f} s)")
    else:
        err.print("[red]Redis differs from MySQL[/] (see above); exit code 1")


def main() -> None:
    """Console entry point."""
    try:
        app()
    except MigratorError as e:  # raised outside a command (should not happen)
        err.print(f"error: {e}")
        sys.exit(EXIT_USAGE if e.exit_code != EXIT_CONNECT else EXIT_CONNECT)
