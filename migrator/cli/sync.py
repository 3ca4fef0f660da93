"""``migrator sync``'s options, and how it runs until stopped."""

import signal
import threading
from contextlib import ExitStack
from typing import TYPE_CHECKING, Annotated

import typer

from migrator.cli.app import (
    DebugOpt,
    app,
    importing,
    json_line,
    note_default_target,
    resume_command,
    run,
)
from migrator.cli.options import (
    MappingArg,
    SourceOpt,
    TargetOpt,
)
from migrator.errors import MigratorError, process_owned

if TYPE_CHECKING:
    from migrator.reports import SyncStatus

_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@app.command()
def sync(
    mapping: MappingArg,
    source: SourceOpt = None,
    target: TargetOpt = None,
    shard: Annotated[
        str | None,
        typer.Option(
            "--shard",
            metavar="NAME",
            help="The shard of a sharded source (the mapping's sources:) this sync follows; "
            "one sync per shard, each with its own position, e.g. migrator sync shop.yaml "
            "--shard east.",
        ),
    ] = None,
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
    consistent_load: Annotated[
        bool,
        typer.Option(
            "--consistent-load",
            help="How a first run (or --reload) reads the tables. Online (the default, "
            "--online-load): the log's position first, then each table in primary-key chunks "
            "while following the log; no long transaction, and Ctrl-C or a crash resumes at "
            "its chunk. Consistent: every table in one snapshot, as migrate reads it (one "
            "moment of the source throughout); for tables small enough to read in one go, "
            "and the exact choice on MySQL, whose snapshots carry no binary-log position; "
            "always used for a mapping with nested documents (nest:), "
            "e.g. migrator sync m.yaml --consistent-load.",
        ),
    ] = False,
    online_load: Annotated[
        bool,
        typer.Option(
            "--online-load",
            hidden=True,  # the default, named: its own column would squeeze the help text
            help="The default first load, named (see --consistent-load), e.g. migrator sync "
            "m.yaml --online-load.",
        ),
    ] = False,
    log_format: Annotated[
        str | None,
        typer.Option(
            "--log-format",
            metavar="text|json",
            help="Log lines on stderr (start, a status line every --log-interval, each "
            "reload, DDL, re-read table, retry, reconnect, failover, caught up): 'text' (the "
            "default off a terminal, no colour) or 'json' (one object per line); given on a "
            "terminal, they replace the live status line, e.g. --log-format json.",
            envvar="MIGRATOR_SYNC_LOG_FORMAT",
            show_envvar=True,
        ),
    ] = None,
    log_interval: Annotated[
        float,
        typer.Option(
            "--log-interval",
            metavar="SECONDS",
            min=0,
            help="Seconds between the log's status lines (position, lag, rates, what is "
            "behind, phase); 0 for none, e.g. --log-interval 300.",
            envvar="MIGRATOR_SYNC_LOG_INTERVAL",
            show_envvar=True,
        ),
    ] = 60.0,
    debug: DebugOpt = False,
) -> None:
    """Keep Redis in step with MySQL: load the tables on the first run (online, in chunks,
    while following), then follow the binary log (row format) until Ctrl-C or SIGTERM.
    Example: migrator sync shop.yaml --until-caught-up"""
    with importing():
        from migrator.commands.sync import sync as sync_command
        from migrator.render.bars import progress_bars
        from migrator.render.log import sync_logs
        from migrator.render.sync import render_sync, sync_status_printer
        from migrator.sync.figures import HealthRules, SyncFigures

    again = resume_command(
        mapping,
        {"--source": source, "--target": target, "--shard": shard, "--server-id": server_id,
         "--retries": retries, "--until-caught-up": until_caught_up, "--json": as_json,
         "--consistent-load": consistent_load},
        "sync", "",
    )  # fmt: skip

    def go() -> int:
        if online_load and consistent_load:
            raise MigratorError(
                "--online-load and --consistent-load exclude each other",
                "give one of them (online is the default)",
            )
        note_default_target(mapping, target)
        stop = threading.Event()
        previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in _STOP_SIGNALS}
        try:
            with (
                sync_logs(log_format) as logs,
                sync_status_printer(as_json, redraw=not logs) as show,
                ExitStack() as loading,
            ):
                bars = loading.enter_context(progress_bars(not as_json and not logs, printed=(
                    log_format != "json")))  # fmt: skip

                def on_status(status: "SyncStatus") -> None:
                    if status.phase != "loading":
                        loading.close()  # the load's bars end before the live status line
                    show(status)

                report = sync_command(
                    mapping, source=source, target=target, until_caught_up=until_caught_up,
                    server_id=server_id, stop=stop, on_status=on_status, progress=bars,
                    reload=reload, retries=retries, again=again, metrics=metrics,
                    figures=SyncFigures(HealthRules(health_stall, health_retries)),
                    resnapshot_tables=tuple(resnapshot or ()), chunk_rows=chunk_rows,
                    online_load=not consistent_load, log_interval=log_interval if logs else 0,
                    shard=shard,
                )  # fmt: skip
        finally:  # the command's own process keeps them: a stop now is one sync ignores
            for sig, handler in previous.items() if not process_owned() else ():
                signal.signal(sig, handler)
        if as_json:  # one object per line: the statuses, then the report
            json_line(report.as_dict())
        else:
            render_sync(report)
        return report.exit_code

    interrupted = f"an unfinished first load stores no position: '{again}' loads again"
    run(go, resume=interrupted, as_json=as_json)
