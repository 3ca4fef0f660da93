"""``migrator dry-run``'s options."""

from typing import Annotated

import typer

from migrator.cli.app import (
    DebugOpt,
    app,
    importing,
    run,
)
from migrator.cli.options import (
    JsonOpt,
    MappingArg,
    SourceOpt,
    TablesOpt,
    TargetOpt,
    table_list,
)


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
    with importing():
        from migrator.commands import dry_run as plan_only
        from migrator.render.console import emit
        from migrator.render.dryrun import render_dry_run

    def go() -> int:
        report = plan_only(
            mapping, source=source, target=target, tables=table_list(tables), sample=sample,
            resp_file=resp, batch_size=batch_size,
        )  # fmt: skip
        emit(report, as_json, render_dry_run)
        return report.exit_code

    run(go, as_json=as_json)
