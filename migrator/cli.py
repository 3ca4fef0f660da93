"""The command line: parse options, call commands, render reports, map errors to exit codes."""

from __future__ import annotations

import json
import sys
import traceback
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table as RichTable

from migrator import __version__, commands
from migrator.errors import EXIT_CONNECT, EXIT_USAGE, MigratorError

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
    str, typer.Argument(help="The YAML mapping file, e.g. mappings/emp.yaml.", show_default=False)
]
SourceOpt = Annotated[
    str | None,
    typer.Option(
        "--source",
        help="MySQL URL, e.g. mysql+pymysql://user:pw@host:3306/db; overrides the mapping.",
        envvar="MIGRATOR_SOURCE_URL",
        show_envvar=True,
    ),
]
TargetOpt = Annotated[
    str | None,
    typer.Option(
        "--target",
        help="Redis URL, e.g. redis://127.0.0.1:6379/0; overrides the mapping.",
        envvar="MIGRATOR_TARGET_URL",
        show_envvar=True,
    ),
]
TablesOpt = Annotated[
    str | None,
    typer.Option("--tables", help="Only these tables, comma-separated, e.g. --tables emp,dept."),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the report as JSON on stdout.")]


def _tables(value: str | None) -> list[str] | None:
    return [t.strip() for t in value.split(",") if t.strip()] if value else None


def fail(e: MigratorError) -> None:
    """One red message naming the cause and the fix; the exit code of its kind."""
    if _debug:
        traceback.print_exc()
    err.print(f"[bold red]error:[/] {e.message}", markup=True, highlight=False, soft_wrap=True)
    if e.hint:
        err.print(f"  [yellow]hint:[/] {e.hint}", highlight=False, soft_wrap=True)
    raise typer.Exit(e.exit_code)


def run(fn: Callable[[], int]) -> None:
    """Call a command, turning user errors into messages and exit codes."""
    try:
        code = fn()
    except MigratorError as e:
        fail(e)
    except KeyboardInterrupt:
        err.print("[red]interrupted[/] (a later 'migrate --resume' continues from the checkpoint)")
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
        self.bars = Progress(
            TextColumn("[bold]{task.description:<20}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]:>10} rows/s"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=console,
            transient=False,
        )
        self.tasks: dict[str, TaskID] = {}

    def __enter__(self) -> RichProgress:
        self.bars.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bars.stop()

    def start(self, table: str, total: int | None) -> None:
        self.tasks[table] = self.bars.add_task(table, total=total, rate="")

    def advance(self, table: str, rows: int) -> None:
        task_id = self.tasks[table]
        self.bars.advance(task_id, rows)
        task = self.bars.tasks[task_id]
        if task.total is not None and task.completed > task.total:
            self.bars.update(task_id, total=task.completed)
        speed = task.speed
        self.bars.update(task_id, rate=f"{speed:,.0f}" if speed else "")

    def finish(self, table: str) -> None:
        task_id = self.tasks[table]
        task = self.bars.tasks[task_id]
        elapsed = task.elapsed or 0
        rate = f"{task.completed / elapsed:,.0f}" if elapsed else ""
        self.bars.update(task_id, total=task.completed, rate=rate)


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
    as_json: JsonOpt = False,
) -> None:
    """Load the mapped tables into Redis. Example: migrator migrate mappings/emp.yaml --json"""

    def go() -> int:
        if err.is_terminal:
            with RichProgress(err) as progress:
                report = commands.migrate(
                    mapping, source=source, target=target, tables=_tables(tables),
                    batch_size=batch_size, resume=resume, progress=progress,
                )  # fmt: skip
        else:
            report = commands.migrate(
                mapping, source=source, target=target, tables=_tables(tables),
                batch_size=batch_size, resume=resume,
            )  # fmt: skip
        if as_json:
            out.print_json(json.dumps(report.as_dict()))
        else:
            render_migrate(report)
        return report.exit_code

    run(go)


def render_migrate(report: commands.MigrateReport) -> None:
    table = RichTable(title=f"migrate {report.mapping}: {report.source} -> {report.target}")
    for col in ("table", "rows read", "keys written", "index entries", "skipped / rejected",
                "seconds", "rows/s"):  # fmt: skip
        table.add_column(col, justify="left" if col in ("table", "skipped / rejected") else "right")
    for t in report.tables:
        notes = [f"{n} {why}" for why, n in t.skipped.items()]
        notes += [f"[red]{n} rejected: {why}[/]" for why, n in t.rejected.items()]
        if t.status != "done":
            notes.append(t.status)
        table.add_row(
            t.table, f"{t.rows:,}", f"{t.keys:,}", f"{t.entries:,}", "\n".join(notes) or "-",
            f"{t.seconds:.2f}", f"{t.rows_per_second:,.0f}",
        )  # fmt: skip
    table.add_section()
    rate = report.rows / report.seconds if report.seconds else 0
    table.add_row("total", f"{report.rows:,}", "", "", "", f"{report.seconds:.2f}", f"{rate:,.0f}")
    out.print(table)
    if report.rejected:
        err.print(f"[red]{report.rejected} row(s) were rejected[/] (see the table); exit code 1")


# --- init and validate (mapping authoring) ------------------------------------------------
@app.command()
def init(
    source: Annotated[
        str | None,
        typer.Option(
            "--source",
            help="MySQL URL of the schema to draft from, e.g. "
            "mysql+pymysql://root@127.0.0.1:3306/shop.",
            envvar="MIGRATOR_SOURCE_URL",
        ),
    ] = None,
    tables: TablesOpt = None,
    output: Annotated[
        str | None, typer.Option("-o", "--output", help="Write to FILE instead of stdout.")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing FILE.")] = False,
) -> None:
    """Draft a mapping from the live schema. Example: migrator init --source URL -o shop.yaml"""
    raise NotImplementedError  # issue 3


@app.command()
def validate(mapping: MappingArg, source: SourceOpt = None) -> None:
    """Check a mapping (and, given a source, against the live schema).
    Example: migrator validate mappings/emp.yaml"""
    raise NotImplementedError  # issue 3


# --- dry-run ---------------------------------------------------------------------------------
@app.command("dry-run")
def dry_run(
    mapping: MappingArg,
    source: SourceOpt = None,
    tables: TablesOpt = None,
    sample: Annotated[
        int, typer.Option("--sample", help="Show the commands for the first N rows per table.")
    ] = 3,
    resp: Annotated[
        str | None,
        typer.Option(
            "--resp",
            help="Write the whole load as Redis protocol to FILE, for redis-cli --pipe < FILE.",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Show what migrate would do, without touching Redis.
    Example: migrator dry-run mappings/emp.yaml --sample 5"""
    raise NotImplementedError  # issue 5


# --- verify ----------------------------------------------------------------------------------
@app.command()
def verify(
    mapping: MappingArg,
    source: SourceOpt = None,
    target: TargetOpt = None,
    tables: TablesOpt = None,
    counts_only: Annotated[
        bool, typer.Option("--counts-only", help="Compare row counts only, not every value.")
    ] = False,
    sample: Annotated[
        int | None,
        typer.Option("--sample", help="Check the values of N random rows per table, not all."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Prove Redis matches MySQL; exit 1 on any difference.
    Example: migrator verify mappings/emp.yaml"""
    raise NotImplementedError  # issue 4


def main() -> None:
    """Console entry point."""
    try:
        app()
    except MigratorError as e:  # raised outside a command (should not happen)
        err.print(f"error: {e}")
        sys.exit(EXIT_USAGE if e.exit_code != EXIT_CONNECT else EXIT_CONNECT)
