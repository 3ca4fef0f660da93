"""What every command starts with: the mapping loaded, the source and target URLs chosen
(flag, then environment, then the mapping), the source connected and its tables resolved."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from contextlib import contextmanager

from migrator.errors import MappingError, MappingErrors, MigratorError
from migrator.mapping.build import MAX_BATCH_SIZE
from migrator.mapping.loader import load_mapping
from migrator.mapping.model import Mapping, Retries, Shard
from migrator.mapping.resolve import Resolved, resolve
from migrator.mapping.schema import Schema
from migrator.mapping.shape import suggest
from migrator.mapping.validate import check_schema
from migrator.plan.collisions import check_collisions
from migrator.source.mysql import Source

DEFAULT_TARGET = "redis://127.0.0.1:6379/0"


def source_url(mapping: Mapping, override: str | None = None) -> str:
    """--source, else $MIGRATOR_SOURCE_URL, else the mapping's ``source``; a sharded mapping
    (``sources:``) has no one source: ``shards`` gives its servers."""
    if mapping.sources and not override:
        names = ", ".join(s.name for s in mapping.sources)
        raise MappingError(
            f"the mapping names a sharded source ({names}): this command reads one server",
            file=mapping.file,
            hint="name the shard to read with --shard NAME",
        )
    url = override or os.environ.get("MIGRATOR_SOURCE_URL") or mapping.source
    if not url:
        raise MappingError(
            "no source database given",
            file=mapping.file,
            hint="set 'source:' in the mapping, pass --source URL, or export MIGRATOR_SOURCE_URL",
        )
    return url


def shards(mapping: Mapping, override: str | None = None, only: str | None = None) -> list[Shard]:
    """The servers a command reads: a sharded mapping's ``sources`` (``only``: the one
    ``--shard`` names), else one shard named "" at ``source_url``. ``--source`` and
    $MIGRATOR_SOURCE_URL do not apply to a sharded mapping (each shard has its own URL)."""
    if not mapping.sources:
        if only is not None:
            raise MigratorError(
                f"--shard {only} names a shard, but the mapping has one source",
                "drop --shard, or list the shards under 'sources:' in the mapping",
            )
        return [Shard("", source_url(mapping, override))]
    if override:
        raise MigratorError(
            "--source names one server, but the mapping lists the shards of a sharded source "
            "under 'sources:'",
            "drop --source (each shard's URL is in the mapping, ${VAR} expanded); "
            "--shard NAME reads one of them",
        )
    if only is None:
        return list(mapping.sources)
    for shard in mapping.sources:
        if shard.name == only:
            return [shard]
    names = [s.name for s in mapping.sources]
    raise MigratorError(
        f"--shard {only}: the mapping has no shard of that name",
        suggest(only, names) or f"its shards: {', '.join(names)}",
    )


def target_url(mapping: Mapping, override: str | None = None) -> str:
    """--target, else $MIGRATOR_TARGET_URL, else the mapping's ``target``, else local db 0."""
    return override or os.environ.get("MIGRATOR_TARGET_URL") or mapping.target or DEFAULT_TARGET


def retry_policy(mapping: Mapping, retries: int | None = None) -> Retries:
    """The mapping's ``options.retries``, with ``--retries N`` (``retries``) for its attempts."""
    if retries is None:
        return mapping.options.retries
    if retries < 0:
        raise MigratorError("--retries must be 0 or more", "e.g. --retries 8")
    return dataclasses.replace(mapping.options.retries, attempts=retries)


def check_batch_size(value: int | None) -> None:
    """--batch-size: a positive number of rows, at most MAX_BATCH_SIZE (a batch is held in
    memory and sent as one pipeline)."""
    if value is None:
        return
    if value < 1:
        raise MigratorError("--batch-size must be a positive number of rows", "e.g. 5000")
    if value > MAX_BATCH_SIZE:
        raise MigratorError(
            f"--batch-size {value:,} is more than the {MAX_BATCH_SIZE:,} rows a batch may hold",
            "batches of 1,000-20,000 rows load fastest; e.g. --batch-size 10000",
        )


def load(mapping: Mapping | str | os.PathLike[str]) -> Mapping:
    return mapping if isinstance(mapping, Mapping) else load_mapping(mapping)


def select_tables(mapping: Mapping, tables: list[str] | None) -> list[str] | None:
    """Check --tables against the mapping; None means all."""
    if not tables:
        return None
    names = [t.name for t in mapping.tables]
    for t in tables:
        if t not in names:
            raise MappingError(
                f"--tables names '{t}', which the mapping does not map",
                file=mapping.file,
                hint=suggest(t, names) or f"mapped tables: {', '.join(names)}",
            )
    return tables


@contextmanager
def opened(
    mapping: Mapping, source: str | None = None, tables: list[str] | None = None, shard: str = ""
) -> Iterator[tuple[Source, list[Resolved]]]:
    """The source, connected, and the mapping's tables resolved against its live schema
    (``shard``: the name of the shard of ``sources:`` at ``source``, ``Resolved.shard``)."""
    only = select_tables(mapping, tables)
    src = Source(source_url(mapping, source))
    try:
        schema = src.schema()
        refuse_invalid(mapping, schema, only)
        yield src, resolve(mapping, schema, only, shard=shard)
    finally:
        src.close()


def refuse_invalid(mapping: Mapping, schema: Schema, only: list[str] | None) -> None:
    """Stop on any error ``migrator validate`` reports for these tables (e.g. a row key
    without the primary key), so no command runs a mapping that validate rejects."""

    def wanted(path: str) -> bool:
        return only is None or any(path == f"tables.{t}" or path.startswith(f"tables.{t}.")
                                   for t in only)  # fmt: skip

    errors = [
        MappingError(p.message, path=p.path, file=p.file, line=p.line, hint=p.hint)
        for p in [*check_schema(mapping, schema), *check_collisions(mapping, schema)]
        if p.level == "error" and wanted(p.path)
    ]
    if errors:
        raise MappingErrors(errors) if len(errors) > 1 else errors[0]
