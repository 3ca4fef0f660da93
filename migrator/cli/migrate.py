"""``migrator migrate``'s options."""

from typing import Annotated

import typer

from migrator.cli.app import (
    DebugOpt,
    app,
    importing,
    note_default_target,
    resume_command,
    run,
)
from migrator.cli.options import (
    ChunkRowsOpt,
    DaskOpt,
    JsonOpt,
    MappingArg,
    RetriesOpt,
    ShardOpt,
    SourceOpt,
    TablesOpt,
    TargetOpt,
    table_list,
)


@app.command()
def migrate(
    mapping: MappingArg,
    source: SourceOpt = None,
    shard: ShardOpt = None,
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
    with importing():
        from migrator.commands import migrate as run_migrate
        from migrator.render.bars import progress_bars
        from migrator.render.console import emit
        from migrator.render.migrate import render_migrate
        from migrator.reports import check_writable, write_rejects

    again = resume_command(mapping, {
        "--source": source, "--target": target, "--tables": tables, "--batch-size": batch_size,
        "--workers": workers, "--chunk-rows": chunk_rows, "--dask": dask, "--retries": retries,
        "--replace": replace, "--json": as_json, "--shard": shard,
    })  # fmt: skip

    def go() -> int:
        if rejects:
            check_writable(rejects, "the reject list")
        note_default_target(mapping, target)
        with progress_bars() as progress:
            report = run_migrate(
                mapping, source=source, target=target, tables=table_list(tables),
                batch_size=batch_size, resume=resume, progress=progress, workers=workers,
                replace=replace, retries=retries, resume_command=again,
                into_existing=into_existing, memory_check=not no_memory_check,
                chunk_rows=chunk_rows, dask=dask, shard=shard,
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
