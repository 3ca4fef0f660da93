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
    shard: Annotated[
        list[str] | None,
        typer.Option(
            "--shard",
            metavar="NAME=URL",
            help="A shard of a sharded source, repeated for each (instead of --source): the "
            "draft lists them under sources: and is drafted from the first, once every shard "
            "is found to hold the same tables, e.g. --shard east=mysql+pymysql://app@east/shop "
            "--shard west=mysql+pymysql://app@west/shop.",
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
        shards = shard_options(shard or [])
        if shards and source:
            raise MigratorError(
                "init takes --source (one server) or --shard NAME=URL (each shard), not both",
                "drop --source (or unset MIGRATOR_SOURCE_URL) to draft a sharded mapping",
            )
        if not source and not shards:
            raise MigratorError(
                "init needs the source database",
                "pass --source mysql+pymysql://user@host:3306/db or export MIGRATOR_SOURCE_URL",
            )
        if output and Path(output).exists() and not force:
            raise MigratorError(
                f"{output} already exists; not overwriting it",
                "pass --force to overwrite, or choose another file with -o",
            )
        draft = draft_mapping(source or "", table_list(tables), shards)
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


def shard_options(given: list[str]) -> list[tuple[str, str]]:
    """``--shard NAME=URL`` options as (name, URL); a bad one exits 2 with the fix."""
    from migrator.mapping.build import SHARD_NAME
    from migrator.urls import mask

    out: list[tuple[str, str]] = []
    for text in given:
        name, _, url = text.partition("=")
        if not url or not SHARD_NAME.fullmatch(name):
            raise MigratorError(
                f"--shard {mask(text)!r} is not NAME=URL with a name of 1-32 letters, "
                "digits, '_' or '-'",
                "e.g. --shard east=mysql+pymysql://app@east:3306/shop",
            )
        if any(n == name for n, _ in out):
            raise MigratorError(
                f"two shards are named {name!r}", "give each shard a name of its own"
            )
        out.append((name, url))
    if len(out) == 1:
        raise MigratorError(
            "--shard names one shard: a sharded source has two or more",
            "name every shard (--shard east=URL --shard west=URL), or pass --source URL",
        )
    return out
