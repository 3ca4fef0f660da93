"""The commands as library functions returning reports; they never print (render.py does)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from migrator.errors import (
    EXIT_DIFFERENCE,
    EXIT_OK,
    ConnectError,
    MappingError,
    MappingErrors,
    MigratorError,
    TargetError,
)
from migrator.mapping.loader import load_mapping, suggest
from migrator.mapping.model import Mapping
from migrator.mapping.resolve import Resolved, resolve
from migrator.mapping.schema import Schema
from migrator.plan.planner import TablePlan
from migrator.progress import NULL_PROGRESS, Progress
from migrator.source.mysql import Source
from migrator.target.checkpoint import Checkpoint
from migrator.target.cluster import connect_any

DEFAULT_TARGET = "redis://127.0.0.1:6379/0"


def source_url(mapping: Mapping, override: str | None = None) -> str:
    """--source, else $MIGRATOR_SOURCE_URL, else the mapping's ``source``."""
    url = override or os.environ.get("MIGRATOR_SOURCE_URL") or mapping.source
    if not url:
        raise MappingError(
            "no source database given",
            file=mapping.file,
            hint="set 'source:' in the mapping, pass --source URL, or export MIGRATOR_SOURCE_URL",
        )
    return url


def target_url(mapping: Mapping, override: str | None = None) -> str:
    """--target, else $MIGRATOR_TARGET_URL, else the mapping's ``target``, else local db 0."""
    return override or os.environ.get("MIGRATOR_TARGET_URL") or mapping.target or DEFAULT_TARGET


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
    mapping: Mapping, source: str | None = None, tables: list[str] | None = None
) -> Iterator[tuple[Source, list[Resolved]]]:
    """The source, connected, and the mapping's tables resolved against its live schema."""
    only = select_tables(mapping, tables)
    src = Source(source_url(mapping, source))
    try:
        schema = src.schema()
        refuse_invalid(mapping, schema, only)
        yield src, resolve(mapping, schema, only)
    finally:
        src.close()


def refuse_invalid(mapping: Mapping, schema: Schema, only: list[str] | None) -> None:
    """Stop on any error ``migrator validate`` reports for these tables (e.g. a row key
    without the primary key), so no command runs a mapping that validate rejects."""
    from migrator.mapping.validate import check_schema

    def wanted(path: str) -> bool:
        return only is None or any(path == f"tables.{t}" or path.startswith(f"tables.{t}.")
                                   for t in only)  # fmt: skip

    errors = [
        MappingError(p.message, path=p.path, file=p.file, line=p.line, hint=p.hint)
        for p in check_schema(mapping, schema)
        if p.level == "error" and wanted(p.path)
    ]
    if errors:
        raise MappingErrors(errors) if len(errors) > 1 else errors[0]


@dataclass
class TableReport:
    table: str
    rows: int = 0
    keys: int = 0
    entries: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    rejected: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    resumed_from: int = 0
    status: str = "done"

    @property
    def rows_per_second(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "rows": self.rows,
            "keys": self.keys,
            "index_entries": self.entries,
            "skipped": self.skipped,
            "rejected": self.rejected,
            "seconds": round(self.seconds, 3),
            "rows_per_second": round(self.rows_per_second, 1),
            "resumed_from": self.resumed_from,
            "status": self.status,
        }


@dataclass
class MigrateReport:
    mapping: str
    source: str
    target: str
    tables: list[TableReport]
    seconds: float = 0.0

    @property
    def rows(self) -> int:
        return sum(t.rows for t in self.tables)

    @property
    def rejected(self) -> int:
        return sum(sum(t.rejected.values()) for t in self.tables)

    @property
    def exit_code(self) -> int:
        return EXIT_DIFFERENCE if self.rejected else EXIT_OK

    def as_dict(self) -> dict[str, Any]:
        return {
            "mapping": self.mapping,
            "source": self.source,
            "target": self.target,
            "seconds": round(self.seconds, 3),
            "rows": self.rows,
            "rejected": self.rejected,
            "tables": [t.as_dict() for t in self.tables],
        }


def migrate(
    mapping: Mapping | str | os.PathLike[str],
    *,
    source: str | None = None,
    target: str | None = None,
    tables: list[str] | None = None,
    batch_size: int | None = None,
    resume: bool = False,
    progress: Progress = NULL_PROGRESS,
    workers: int | None = None,
) -> MigrateReport:
    """Load every mapped table into Redis. Returns a report; raises MigratorError.

    ``workers`` (else $MIGRATOR_WORKERS) splits each single-integer primary key's range
    across processes and loads tables side by side (migrator/parallel.py); default: 1 on
    machines of up to 2 CPUs or for loads under 200,000 rows, else min(4, CPUs)."""
    from migrator.commands.parallel import default_workers, load_tables

    m = load(mapping)
    if batch_size is not None and batch_size < 1:
        raise MigratorError("--batch-size must be a positive number of rows")
    if workers is None and os.environ.get("MIGRATOR_WORKERS"):
        raw = os.environ["MIGRATOR_WORKERS"]
        if not raw.isdigit():
            raise MigratorError(f"MIGRATOR_WORKERS={raw!r} is not a number", "e.g. 2")
        workers = int(raw)
    if workers is not None and workers < 1:
        raise MigratorError("--workers must be at least 1", "e.g. --workers 2")
    size = batch_size or m.options.batch_size
    started = time.perf_counter()
    with opened(m, source, tables) as (src, resolved):
        client = connect_any(target_url(m, target))
        checkpoint = Checkpoint(client, m.name)
        state = checkpoint.load() if resume else {}
        if not resume:
            checkpoint.clear()
        common = {
            "source": source_url(m, source),
            "target": target_url(m, target),
            "mapping": m.name,
            "batch_size": size,
        }
        n_workers = workers or default_workers(sum(r.schema.row_estimate for r in resolved))
        try:
            reports = load_tables(
                src, client, checkpoint, resolved, state, progress, n_workers, common
            )
        except (TargetError, ConnectError) as e:
            raise partial(e, m) from None
        client.close()
        from migrator.source.mysql import mask as mask_source
        from migrator.target.sink import mask as mask_target

        return MigrateReport(
            mapping=m.file or m.name,
            source=mask_source(src.url),
            target=mask_target(target_url(m, target)),
            tables=reports,
            seconds=time.perf_counter() - started,
        )


def partial(e: TargetError | ConnectError, m: Mapping) -> MigratorError:
    """The same error, saying that Redis now holds part of the load and how to go on."""
    then = (
        "Redis holds the batches written before it (checkpointed); once fixed, "
        f"'migrator migrate {m.file or 'MAPPING'} --resume' continues from there"
    )
    return type(e)(e.message, f"{e.hint}; {then}" if e.hint else then)


def finish_commands(src: Source, plan: TablePlan, resolved: Resolved) -> list[tuple[bytes, ...]]:
    """End-of-table structures, rebuilt from the source: the counter and the latest lists."""
    out = []
    schema = resolved.schema
    if resolved.counter:
        pk_col = schema.column(resolved.primary_key[0])
        cmd = plan.counter_command(src.max_of(resolved.name, pk_col))
        if cmd is not None:
            out.append(cmd)
    pk_cols = [schema.column(c) for c in resolved.primary_key]
    sep = resolved.separator.encode()
    for latest in resolved.table.latest:
        rows = src.latest(resolved.name, pk_cols, schema.column(latest.order_by), latest.limit)
        pks = [sep.join(v for v in row if v is not None) for row in rows]
        out += plan.latest_commands(latest.key, pks)
    return out
