"""The options several commands share (``--source``, ``--target``, ``--tables``, ``--json``,
``--dask``, ``--chunk-rows``, ``--retries``) and the mapping argument."""

from pathlib import Path
from typing import Annotated

import typer

from migrator.errors import (
    MigratorError,
)

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
        help="MySQL URL, e.g. mysql+pymysql://u:pw@db/shop; overrides the mapping.",
        envvar="MIGRATOR_SOURCE_URL",
        show_envvar=True,
    ),
]
ShardOpt = Annotated[
    str | None,
    typer.Option(
        "--shard",
        metavar="NAME",
        help="With a sharded mapping (sources:), read only the shard of that name "
        "(default: every shard), e.g. --shard east.",
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


def complete_tables(ctx: typer.Context, incomplete: str) -> list[str]:
    """Shell completion of --tables: the mapping's tables not named yet (comma-separated).
    The mapping is the command's argument (while completing, click may leave it unparsed)."""
    words = [ctx.params.get("mapping"), *ctx.args]
    path = next((w for w in words if isinstance(w, str) and Path(w).is_file()), None)
    if path is None:
        return []
    from migrator.mapping.loader import load_mapping

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
        autocompletion=complete_tables,
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


def table_list(value: str | None) -> list[str] | None:
    return [t.strip() for t in value.split(",") if t.strip()] if value else None
