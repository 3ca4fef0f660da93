"""``migrator init``'s options."""

from pathlib import Path
from typing import Annotated

import typer

from migrator.cli.app import (
    DebugOpt,
    app,
    importing,
    run,
)
from migrator.cli.options import (
    TablesOpt,
    table_list,
)
from migrator.errors import (
    MigratorError,
)


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
    with importing():
        from migrator.commands import init as draft_mapping
        from migrator.render.mapping import render_init

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
        draft = draft_mapping(source, table_list(tables))
        text = draft.render()
        if output:
            try:
                Path(output).write_text(text, encoding="utf-8")
            except OSError as e:
                raise MigratorError(
                    f"cannot write {output}: {e.strerror}; nothing was written",
                    "choose a file in a directory that exists and is writable, or leave out"
                    " -o to print the draft",
                ) from None
        render_init(draft, text, output)
        return 0

    run(go)
