"""``migrator verify``'s options."""

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
    SourceOpt,
    TablesOpt,
    TargetOpt,
    table_list,
)


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
    with importing():
        from migrator.commands import verify as run_verify
        from migrator.render.bars import progress_bars
        from migrator.render.console import emit
        from migrator.render.verify import render_verify

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
                mapping, source=source, target=target, tables=table_list(tables),
                counts_only=counts_only, sample=sample, batch_size=batch_size, fix=fix,
                progress=progress, dask=dask, chunk_rows=chunk_rows, retries=retries,
                again=again,
            )  # fmt: skip
        emit(report, as_json, render_verify)
        return report.exit_code

    run(go, as_json=as_json)
