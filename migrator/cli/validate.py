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
            help="Say in full why sync would refuse a table, and the fix (else one line each).",
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
        report = check(mapping, source=source)
        emit(report, as_json, lambda r: render_validate(r, sync_details=sync))
        return report.exit_code

    run(go, as_json=as_json)
