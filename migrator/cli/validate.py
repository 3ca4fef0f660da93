"""``migrator validate``'s options."""

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
)


@app.command()
def validate(
    mapping: MappingArg,
    source: SourceOpt = None,
    as_json: JsonOpt = False,
    sync: Annotated[
        bool,
        typer.Option(
            "--sync",
            help="Check the mapping for sync: each table sync would refuse is an error (exit "
            "2), said in full with the reason and the fix (else a one-line note, exit 0).",
        ),
    ] = False,
    debug: DebugOpt = False,
) -> None:
    """Check a mapping (and, given a source, against the live schema).
    Example: migrator validate shop.yaml"""
    with importing():
        from migrator.commands import validate as check
        from migrator.render.console import emit
        from migrator.render.mapping import render_validate

    def go() -> int:
        report = check(mapping, source=source, for_sync=sync)
        emit(report, as_json, lambda r: render_validate(r, sync_details=sync))
        return report.exit_code

    run(go, as_json=as_json)
