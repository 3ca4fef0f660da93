"""The command line: parse options, call commands, map errors to exit codes.

What it prints (messages, progress bars, report tables) is ``migrator.render``."""

from __future__ import annotations

import json
import os
import shlex
import signal
import sys
import threading
import traceback
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from typer.core import TyperOption

from migrator import __version__
from migrator.commands import dry_run as plan_only
from migrator.commands import init as draft_mapping
from migrator.commands import migrate as run_migrate
from migrator.commands import validate as check
from migrator.commands import verify as run_verify
from migrator.commands.failures import explain
from migrator.commands.reports import SyncStatus, write_rejects
from migrator.commands.session import DEFAULT_TARGET
from migrator.commands.sync import sync as sync_command
from migrator.errors import (
    EXIT_CONNECT,
    EXIT_USAGE,
    MappingErrors,
    MigratorError,
    NothingWritten,
)
from migrator.mapping.loader import load_mapping
from migrator.render import (
    emit,
    err,
    out,
    progress_bars,
    render_dry_run,
    render_init,
    render_migrate,
    render_validate,
    render_verify,
    say,
)
from migrator.urls import mask, mask_text


def _flag_type(self: TyperOption, ctx: Any) -> str | None:
    """No type column for a flag in --help: typer 0.29 writes ``<bool>`` after every flag
    (--json, --resume, --help...), which takes no value."""
    return None if self.is_flag else _option_type(self, ctx)


_option_type = TyperOption.display_type_rich
TyperOption.display_type_rich = _flag_type  # type: ignore[method-assign]

app = typer.Typer(
    name="migrator",
    help="Move a MySQL schema and its data into Redis, indexes included, and prove it.\n\n"
    "Example: migrator migrate shop.yaml",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
)
_debug = False


def _set_debug(value: bool) -> bool:
    global _debug
    _debug = _debug or value
    return value


DebugOpt = Annotated[
    bool,
    typer.Option(
        "--debug",
        help="Show the traceback of errors (for bug reports); before or after the command.",
        callback=_set_debug,
        is_eager=True,
    ),
]

MappingArg = Annotated[
    str,
    typer.Argument(
        help="The YAML mapping file, e.g. shop.yaml (migrator init drafts one).",
        metavar="MAPPING",
        show_default=False,
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


def _complete_tables(ctx: typer.Context, incomplete: str) -> list[str]:
    """Shell completion of --tables: the mapping's tables not named yet (comma-separated).
    The mapping is the command's argument (while completing, click may leave it unparsed)."""
    words = [ctx.params.get("mapping"), *ctx.args]
    path = next((w for w in words if isinstance(w, str) and Path(w).is_file()), None)
    if path is None:
        return []
    try:
        names = [t.name for t in load_mapping(path).tables]
    except MigratorError:
        return []
    done, _, part = incomplete.rpartition(",")
    named = set(done.split(",")) if done else set()
    return [f"{done}," * bool(done) + n for n in names if n.startswith(part) and n not in named]


TablesOpt = Annotated[
    str | None,
    typer.Option(
        "--tables",
        metavar="TABLE,...",
        help="Only these tables, comma-separated, e.g. --tables emp,dept.",
        autocompletion=_complete_tables,
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the report as JSON on stdout.")]
DaskOpt = Annotated[
    str | None,
    typer.Option(
        "--dask",
        metavar="ADDRESS",
        help="Run the chunks as tasks of a Dask cluster, at its scheduler's address (needs "
        "pip install 'migrator[dask]' here and on the workers; each chunk in a snapshot of its "
        "own; see the docs' scale-out.md), e.g. --dask tcp://10.0.0.5:8786.",
    ),
]
ChunkRowsOpt = Annotated[
    int | None,
    typer.Option(
        "--chunk-rows",
        metavar="N",
        min=1,
        help="With --workers N (N > 1) or --dask: rows per chunk, cut along the primary key's "
        "index when the command starts (default 50000); migrate --resume keeps the chunks it "
        "recorded, e.g. --chunk-rows 200000.",
    ),
]
RetriesOpt = Annotated[
    int | None,
    typer.Option(
        "--retries",
        metavar="N",
        min=0,
        help="Retries in a row of a transient failure (lost connection, deadlock, "
        "LOADING...) before giving up with exit 3 (default: the mapping's "
        "options.retries.attempts, else 8), e.g. --retries 20.",
    ),
]


def _tables(value: str | None) -> list[str] | None:
    return [t.strip() for t in value.split(",") if t.strip()] if value else None


def fail(e: MigratorError, as_json: bool = False) -> NoReturn:
    """One red message naming the cause and the fix (never a password); the exit code of
    its kind. ``as_json``: also ``{"error", "hint", "exit_code"}`` on stdout."""
    if _debug:
        traceback.print_exc()
    errors = e.errors if isinstance(e, MappingErrors) else [e]
    for one in errors:
        say("error", mask_text(one.message), mask_text(one.hint) if one.hint else None)
    if as_json:
        failure = failure_dict(e)
        if len(errors) > 1:
            failure["errors"] = [failure_dict(one) for one in errors]
        json_line(failure)
    raise typer.Exit(e.exit_code)


def json_line(value: dict[str, Any]) -> None:
    """One JSON object on one line of stdout (``--json``: every line is an object)."""
    sys.stdout.write(json.dumps(value) + "\n")
    sys.stdout.flush()


def failure_dict(e: MigratorError) -> dict[str, Any]:
    return {
        "error": mask_text(e.message),
        "hint": mask_text(e.hint) if e.hint else None,
        "exit_code": e.exit_code,
    }


def note_default_target(mapping: str, target: str | None) -> None:
    """Say on stderr when the target is the built-in default: no --target, no
    $MIGRATOR_TARGET_URL, no 'target:' in the mapping."""
    if target or os.environ.get("MIGRATOR_TARGET_URL"):
        return
    try:
        named = load_mapping(mapping).target
    except MigratorError:  # the command itself reports it
        return
    if not named:
        say(
            "note",
            f"no target given: using the default {DEFAULT_TARGET}",
            "set 'target:' in the mapping, pass --target URL, or export MIGRATOR_TARGET_URL",
        )


def run(fn: Callable[[], int], resume: str | None = None, as_json: bool = False) -> None:
    """Call a command, turning every failure into a message and an exit code (with
    ``as_json`` also a JSON object on stdout). ``resume``: how to continue after Ctrl-C or
    SIGTERM (both stop it the same way, workers included), for a command that leaves work
    half done."""
    previous = signal.getsignal(signal.SIGTERM)
    if resume is not None:
        signal.signal(signal.SIGTERM, _terminated)
    try:
        code = fn()
    except MigratorError as e:
        fail(e, as_json)
    except KeyboardInterrupt as e:
        # interrupted before the first write: nothing to continue; an online first load: its
        # own hint (what is stored, the command that resumes it)
        hint = None if isinstance(e, NothingWritten) else getattr(e, "hint", None) or resume
        say("error", "interrupted", hint)
        if as_json:
            json_line({"error": "interrupted", "hint": hint, "exit_code": 130})
        raise typer.Exit(130) from None
    except Exception as e:  # anything a command did not foresee: still one line and a hint
        fail(explain(e, resumable=resume is not None), as_json)
    else:
        raise typer.Exit(code)
    finally:
        if resume is not None:
            signal.signal(signal.SIGTERM, previous)


def _terminated(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM: stop like Ctrl-C (workers too), then say how to resume


def resume_command(
    mapping: str, options: dict[str, object], command: str = "migrate", last: str = "--resume"
) -> str:
    """The command that continues this run: every option that was given (those set through
    their environment variable are left to it), ``last``, passwords masked with a note
    to supply them again. ``options``: flag -> value (None or False: not given)."""
    from_env = {"--source": "MIGRATOR_SOURCE_URL", "--target": "MIGRATOR_TARGET_URL",
                "--workers": "MIGRATOR_WORKERS",
                "--server-id": "MIGRATOR_SYNC_SERVER_ID"}  # fmt: skip
    words = ["migrator", command, shlex.quote(mapping)]
    masked = False
    for flag, value in options.items():
        if value is None or value is False:
            continue
        if flag in from_env and os.environ.get(from_env[flag]) == str(value):
            continue
        if value is True:
            words.append(flag)
            continue
        text = str(value)
        shown = mask(text) if flag in ("--source", "--target") else text
        masked = masked or shown != text
        words += [flag, shlex.quote(shown)]
    command = " ".join([*words, last] if last else words)
    return command + (" (passwords are shown as ***: type them again)" if masked else "")


@app.callback(invoke_without_command=True)
def main_options(
    version: Annotated[bool, typer.Option("--version", help="Print the version and exit.")] = False,
    debug: DebugOpt = False,
) -> None:
    """Move a MySQL schema and its data into Redis. Example: migrator migrate shop.yaml"""
    if version:
        out.print(f"migrator {__version__}")
        raise typer.Exit(0)


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
            help="Processes loading in parallel: each table is cut into chunks by its primary "
            "key (see --chunk-rows) and the chunks run side by side (default: 1 on machines of "
            "up to 2 CPUs or for loads under 200,000 rows, else min(4, CPUs)). With 1, all "
            "tables are read in one consistent snapshot; with N, each chunk in a snapshot of "
            "its own (consistent per chunk, not across chunks or tables), e.g. --workers 2.",
            envvar="MIGRATOR_WORKERS",
            show_envvar=True,
        ),
    ] = None,
    chunk_rows: ChunkRowsOpt = None,
    dask: DaskOpt = None,
    replace: Annotated[
        bool,
        typer.Option(
            "--replace",
            help="First remove every key the mapping owns (found by SCAN of its key space, "
            "removed with UNLINK in batches; never FLUSHDB; options.ignore keys stay), then "
            "load; --resume finishes an interrupted removal first, e.g. migrator migrate "
            "m.yaml --replace.",
        ),
    ] = False,
    retries: RetriesOpt = None,
    into_existing: Annotated[
        bool,
        typer.Option(
            "--into-existing",
            help="Write even though the target already holds keys in the mapping's key space "
            "that no earlier run of this mapping wrote (they may be overwritten), e.g. "
            "migrator migrate m.yaml --into-existing.",
        ),
    ] = False,
    no_memory_check: Annotated[
        bool,
        typer.Option(
            "--no-memory-check",
            help="Load even when the target's maxmemory looks too small for the estimated "
            "load (Redis may then refuse writes part way), e.g. --no-memory-check.",
        ),
    ] = False,
    rejects: Annotated[
        str | None,
        typer.Option(
            "--rejects",
            metavar="FILE",
            help="Write the rows not loaded (a separator inside a value of a composite key) "
            "to FILE as JSON lines: table, primary key, column, e.g. --rejects rejects.jsonl.",
        ),
    ] = None,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Load the mapped tables into Redis. Example: migrator migrate shop.yaml --json

    With one worker every table is read inside one consistent snapshot of MySQL (START
    TRANSACTION WITH CONSISTENT SNAPSHOT); the summary states its moment and, when the
    binary log is on, its binlog file/position and GTID. With --workers N each chunk is
    read in a snapshot of its own, taken when that chunk starts: every chunk is consistent
    in itself, but chunks and tables are not one moment. A run over an earlier one
    overwrites what changed and removes nothing: use verify --fix, or --replace."""
    again = resume_command(mapping, {
        "--source": source, "--target": target, "--tables": tables, "--batch-size": batch_size,
        "--workers": workers, "--chunk-rows": chunk_rows, "--dask": dask, "--retries": retries,
        "--replace": replace, "--json": as_json,
    })  # fmt: skip

    def go() -> int:
        note_default_target(mapping, target)
        with progress_bars() as progress:
            report = run_migrate(
                mapping, source=source, target=target, tables=_tables(tables),
                batch_size=batch_size, resume=resume, progress=progress, workers=workers,
                replace=replace, retries=retries, resume_command=again,
                into_existing=into_existing, memory_check=not no_memory_check,
                chunk_rows=chunk_rows, dask=dask,
            )  # fmt: skip
        if rejects:
            write_rejects(report, rejects)
        emit(report, as_json, render_migrate)
        return report.exit_code

    run(
        go,
        resume=f"Redis holds the batches written so far (checkpointed); to continue: {again}",
        as_json=as_json,
    )


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
    debug: DebugOpt = False,
) -> None:
    """Draft a mapping from the live schema. Example: migrator init --source URL -o shop.yaml"""

    def go() -> int:
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
        draft = draft_mapping(source, _tables(tables))
        text = draft.render()
        if output:
            try:
                Path(output).write_text(text, encoding="utf-8")
            except OSError as e:
                raise MigratorError(f"cannot write {output}: {e.strerror}") from None
        render_init(draft, text, output)
        return 0

    run(go)


@app.command()
def validate(
    mapping: MappingArg,
    source: SourceOpt = None,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Check a mapping (and, given a source, against the live schema).
    Example: migrator validate shop.yaml"""

    def go() -> int:
        report = check(mapping, source=source)
        emit(report, as_json, render_validate)
        return report.exit_code

    run(go, as_json=as_json)


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
            help="Write the whole load as Redis protocol to FILE, for redis-cli --pipe < FILE "
            "(a single server; for a Redis Cluster use migrate), e.g. --resp load.resp.",
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
    debug: DebugOpt = False,
) -> None:
    """Show what migrate would do, without touching Redis (the target is never contacted).
    Example: migrator dry-run shop.yaml --sample 5 --resp load.resp"""

    def go() -> int:
        report = plan_only(
            mapping, source=source, target=target, tables=_tables(tables), sample=sample,
            resp_file=resp, batch_size=batch_size,
        )  # fmt: skip
        emit(report, as_json, render_dry_run)
        return report.exit_code

    run(go, as_json=as_json)


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
    fix: Annotated[
        bool,
        typer.Option(
            "--fix",
            help="Repair every difference found, writing from MySQL (rows and fields "
            "rewritten, extra fields, stale keys, foreign members removed, missing ones added, "
            "counters and latest lists rebuilt), print what changed, then check again; exit 0 "
            "only when Redis then matches, e.g. migrator verify m.yaml --fix.",
        ),
    ] = False,
    dask: DaskOpt = None,
    chunk_rows: ChunkRowsOpt = None,
    retries: RetriesOpt = None,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Prove Redis matches MySQL, as of one consistent snapshot; exit 1 on any difference.
    Example: migrator verify shop.yaml --fix"""
    again = resume_command(mapping, {
        "--source": source, "--target": target, "--tables": tables,
        "--counts-only": counts_only, "--sample": sample, "--batch-size": batch_size,
        "--fix": fix, "--dask": dask, "--chunk-rows": chunk_rows, "--retries": retries,
        "--json": as_json,
    }, command="verify", last="")  # fmt: skip

    def go() -> int:
        note_default_target(mapping, target)
        with progress_bars(wanted=not as_json) as progress:
            report = run_verify(
                mapping, source=source, target=target, tables=_tables(tables),
                counts_only=counts_only, sample=sample, batch_size=batch_size, fix=fix,
                progress=progress, dask=dask, chunk_rows=chunk_rows, retries=retries,
                again=again,
            )  # fmt: skip
        emit(report, as_json, render_verify)
        return report.exit_code

    run(go, as_json=as_json)


@app.command()
def sync(
    mapping: MappingArg,
    source: SourceOpt = None,
    target: TargetOpt = None,
    until_caught_up: Annotated[
        bool,
        typer.Option(
            "--until-caught-up",
            help="Exit 0 as soon as nothing is pending (lag 0), for cut-over scripts, "
            "e.g. migrator sync m.yaml --until-caught-up.",
        ),
    ] = False,
    server_id: Annotated[
        int | None,
        typer.Option(
            "--server-id",
            metavar="N",
            min=1,
            help="The replica server id this reader uses; each reader of a source needs its "
            "own (default: one derived from the mapping's name), e.g. --server-id 4242.",
            envvar="MIGRATOR_SYNC_SERVER_ID",
            show_envvar=True,
        ),
    ] = None,
    reload: Annotated[
        bool,
        typer.Option(
            "--reload",
            help="Forget the stored position: remove the mapping's keys and load a new "
            "snapshot (after DDL, a mapping change or a purged binary log), e.g. "
            "migrator sync m.yaml --reload.",
        ),
    ] = False,
    retries: Annotated[
        int | None,
        typer.Option(
            "--retries",
            metavar="N",
            min=0,
            help="Retries in a row of a lost MySQL or Redis connection, or of a Redis that "
            "lost its data, before giving up with exit 3 (default: the mapping's "
            "options.retries.attempts, else 8), e.g. --retries 20.",
        ),
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option("--json", help="Print one JSON status object per second, then the report."),
    ] = False,
    metrics: Annotated[
        str | None,
        typer.Option(
            "--metrics",
            metavar="HOST:PORT",
            help="Serve Prometheus metrics at /metrics and a health check at /healthz (200, or "
            "503 and why) on this address, e.g. --metrics 127.0.0.1:9108.",
            envvar="MIGRATOR_SYNC_METRICS",
            show_envvar=True,
        ),
    ] = None,
    health_stall: Annotated[
        float,
        typer.Option(
            "--health-stall",
            metavar="SECONDS",
            min=0.1,
            help="/healthz answers 503 once sync is behind without advancing, or has heard "
            "nothing from the source, for this long, e.g. --health-stall 60.",
        ),
    ] = 30.0,
    health_retries: Annotated[
        int,
        typer.Option(
            "--health-retries",
            metavar="N",
            min=1,
            help="/healthz answers 503 while N or more failures in a row are being retried, "
            "e.g. --health-retries 5.",
        ),
    ] = 3,
    resnapshot: Annotated[
        list[str] | None,
        typer.Option(
            "--resnapshot",
            metavar="TABLE",
            help="Remove this table's keys and read it again online, chunk by chunk, while "
            "every other table keeps following (repeatable), e.g. --resnapshot emp.",
        ),
    ] = None,
    chunk_rows: Annotated[
        int,
        typer.Option(
            "--chunk-rows",
            metavar="N",
            min=1,
            help="Rows per chunk of an online snapshot (one short SELECT each; a chunk "
            "read while the log moves is held in memory until written), e.g. "
            "--chunk-rows 10000.",
        ),
    ] = 50_000,
    online_load: Annotated[
        bool,
        typer.Option(
            "--online-load/--consistent-load",
            help="How a first run (or --reload) reads the tables. Online (the default): the "
            "log's position first, then each table in primary-key chunks while following the "
            "log; no long transaction, and Ctrl-C or a crash resumes at its chunk. Consistent: "
            "every table in one snapshot, as migrate reads it (one moment of the source "
            "throughout); for tables small enough to read in one go, and the exact choice on "
            "MySQL, whose snapshots carry no binary-log position, e.g. migrator sync m.yaml "
            "--consistent-load.",
        ),
    ] = True,
    debug: DebugOpt = False,
) -> None:
    """Keep Redis in step with MySQL: load the tables on the first run (online, in chunks,
    while following), then follow the binary log (row format) until Ctrl-C or SIGTERM.
    Example: migrator sync shop.yaml --until-caught-up"""
    from migrator.commands.figures import HealthRules, SyncFigures
    from migrator.render import render_sync, sync_status_printer

    again = resume_command(
        mapping,
        {"--source": source, "--target": target, "--server-id": server_id, "--retries": retries,
         "--until-caught-up": until_caught_up, "--json": as_json,
         "--consistent-load": not online_load},
        "sync", "",
    )  # fmt: skip

    def go() -> int:
        note_default_target(mapping, target)
        stop = threading.Event()
        previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in _STOP_SIGNALS}
        try:
            with sync_status_printer(as_json) as show, ExitStack() as loading:
                bars = loading.enter_context(progress_bars(not as_json))

                def on_status(status: SyncStatus) -> None:
                    if status.phase != "loading":
                        loading.close()  # the load's bars end before the live status line
                    show(status)

                report = sync_command(
                    mapping, source=source, target=target, until_caught_up=until_caught_up,
                    server_id=server_id, stop=stop, on_status=on_status, progress=bars,
                    reload=reload, retries=retries, again=again, metrics=metrics,
                    figures=SyncFigures(HealthRules(health_stall, health_retries)),
                    resnapshot_tables=tuple(resnapshot or ()), chunk_rows=chunk_rows,
                    online_load=online_load,
                )  # fmt: skip
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if as_json:  # one object per line: the statuses, then the report
            json_line(report.as_dict())
        else:
            render_sync(report)
        return report.exit_code

    interrupted = f"an unfinished first load stores no position: '{again}' loads again"
    run(go, resume=interrupted, as_json=as_json)


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def main() -> None:
    """Console entry point. Command-line mistakes (an unknown option, ``--batch-size abc``)
    are one error line and a hint too, and a JSON object with ``--json``."""
    try:
        code = app(standalone_mode=False)
    except typer.TyperException as e:  # the parser's own errors (click's UsageError...)
        if type(e).__name__ == "NoArgsIsHelpError":
            e.show()  # type: ignore[attr-defined]
            sys.exit(EXIT_USAGE)
        words = [a for a in sys.argv[1:] if not a.startswith("-")]
        names = {c.name or getattr(c.callback, "__name__", "") for c in app.registered_commands}
        command = words[0] if words and words[0] in names else "COMMAND"
        mistake = MigratorError(e.format_message(), f"see 'migrator {command} --help'")
        mistake.exit_code = getattr(e, "exit_code", EXIT_USAGE) or EXIT_USAGE
        try:
            fail(mistake, as_json="--json" in sys.argv[1:])
        except typer.Exit as done:
            sys.exit(done.exit_code)
    except typer.Abort:
        sys.exit(130)
    except MigratorError as e:  # raised outside a command (should not happen)
        err.print(f"error: {e}")
        sys.exit(EXIT_USAGE if e.exit_code != EXIT_CONNECT else EXIT_CONNECT)
    sys.exit(code if isinstance(code, int) else 0)
