"""What ``migrate`` and ``sync`` return: reports per table and for the run; sync's live status
and the error that stops it on DDL."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from migrator.errors import EXIT_DIFFERENCE, EXIT_OK, MigratorError
from migrator.plan.batch import Reject
from migrator.plan.owners import COLLISION, CROSS_SHARD
from migrator.source.shared import SharedValues
from migrator.source.snapshot import Snapshot

if TYPE_CHECKING:
    from migrator.source.binlog.reader import BinlogPosition


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
    # a declared primary_key MySQL does not keep unique: keys several rows share, and the
    # rows beyond one per such key (Redis holds one row per key)
    duplicate_keys: int = 0
    duplicate_rows: int = 0
    # a unique: MySQL does not keep unique: per such unique, values several rows share
    shared: list[SharedValues] = field(default_factory=list)
    retries: int = 0  # transient failures ridden out (retry.py)
    rejects: list[Reject] = field(default_factory=list)  # the first rejected rows, named
    readers: dict[str, int] = field(default_factory=dict)  # rows per driver that read them

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
            "duplicate_keys": self.duplicate_keys,
            "duplicate_rows": self.duplicate_rows,
            "shared_unique_values": [s.as_dict() for s in self.shared],
            "retries": self.retries,
            "rejects": [r.as_dict() for r in self.rejects],
            "readers": self.readers,
        }


@dataclass
class MigrateReport:
    mapping: str
    source: str
    target: str
    tables: list[TableReport]
    seconds: float = 0.0
    snapshot: Snapshot | None = None  # one worker: the moment every table was read at
    consistency: str = ""  # what moment of the source the load shows, in one sentence
    removed: int | None = None  # --replace: keys removed before the load
    rerun: bool = False  # Redis held an earlier run of this mapping
    notes: list[str] = field(default_factory=list)
    recoveries: list[str] = field(default_factory=list)  # target losses reloaded (guard.py)
    rejects_file: str | None = None  # where the rejected rows were listed (--rejects FILE)

    @property
    def rows(self) -> int:
        return sum(t.rows for t in self.tables)

    @property
    def keys(self) -> int:
        return sum(t.keys for t in self.tables)

    @property
    def rejected(self) -> int:
        return sum(sum(t.rejected.values()) for t in self.tables)

    @property
    def duplicate_rows(self) -> int:
        return sum(t.duplicate_rows for t in self.tables)

    @property
    def collided(self) -> int:
        """Rows of a sharded source left out: another shard holds their key or unique value
        (docs/sharding.md#collisions)."""
        return sum(t.rejected.get(COLLISION, 0) for t in self.tables)

    @property
    def crossed(self) -> int:
        """Nested children of a sharded source whose parent is on another shard: in no
        document (docs/sharding.md#nested-documents)."""
        return sum(t.rejected.get(CROSS_SHARD, 0) for t in self.tables)

    @property
    def shared_rows(self) -> int:
        """Rows beyond one per value of a ``unique:`` that several rows share."""
        return sum(s.rows for t in self.tables for s in t.shared)

    @property
    def exit_code(self) -> int:
        wrong = self.rejected or self.duplicate_rows or self.shared_rows
        return EXIT_DIFFERENCE if wrong else EXIT_OK

    def as_dict(self) -> dict[str, Any]:
        return {
            "mapping": self.mapping,
            "source": self.source,
            "target": self.target,
            "seconds": round(self.seconds, 3),
            "rows": self.rows,
            "keys": self.keys,
            "rejected": self.rejected,
            "snapshot": self.snapshot.as_dict() if self.snapshot is not None else None,
            "consistency": self.consistency,
            "removed": self.removed,
            "rerun": self.rerun,
            "notes": self.notes,
            "duplicate_rows": self.duplicate_rows,
            "retries": sum(t.retries for t in self.tables),
            "recoveries": self.recoveries,
            "rejects_file": self.rejects_file,
            "tables": [t.as_dict() for t in self.tables],
        }


class SchemaChanged(MigratorError):
    """DDL on a mapped table: the mapping may no longer fit; sync stops (exit 1)."""

    exit_code = EXIT_DIFFERENCE


@dataclass
class SyncStatus:
    """What sync is doing, once per interval (the live line, or one ``--json`` object)."""

    phase: str  # "loading" | "following" | "caught up" | "stopped"
    position: str
    transactions: int = 0
    rows_changed: int = 0
    events_per_second: float = 0.0
    lag_seconds: float = 0.0
    note: str | None = None  # a retry or a recovery in progress (what, and what next)
    figures: dict[str, Any] = field(default_factory=dict)  # SyncFigures.as_dict()
    online_snapshot: dict[str, Any] | None = None  # its progress (table, chunk, chunks)

    def as_dict(self) -> dict[str, Any]:
        return {
            **self.figures,
            "phase": self.phase,
            "position": self.position,
            "transactions": self.transactions,
            "rows_changed": self.rows_changed,
            "events_per_second": round(self.events_per_second, 1),
            "lag_seconds": round(self.lag_seconds, 3),
            "note": self.note,
            "online_snapshot": self.online_snapshot,
        }


@dataclass
class SyncReport:
    mapping: str
    source: str
    target: str
    snapshot: Snapshot | None  # set when this run began the first load (its position)
    loaded: list[TableReport] = field(default_factory=list)  # the first load's tables done
    removed: int = 0  # keys of an earlier load removed before the first run's load
    started_at: BinlogPosition | None = None
    position: BinlogPosition | None = None
    transactions: int = 0
    rows_changed: int = 0
    seconds: float = 0.0
    stopped: str = "stopped"  # "caught up" | "stopped"
    recoveries: list[str] = field(default_factory=list)  # target losses, source reconnects
    resnapshots: list[TableReport] = field(default_factory=list)  # online snapshots done
    online_load: bool = False  # this run's first load (or the part it did) was read online
    notes: list[str] = field(default_factory=list)  # snapshots queued or resumed

    exit_code = EXIT_OK

    def as_dict(self) -> dict[str, Any]:
        return {
            "mapping": self.mapping,
            "source": self.source,
            "target": self.target,
            "snapshot": self.snapshot.as_dict() if self.snapshot is not None else None,
            "loaded": [t.as_dict() for t in self.loaded],
            "removed": self.removed,
            "started_at": self.started_at.as_dict() if self.started_at else None,
            "position": self.position.as_dict() if self.position else None,
            "transactions": self.transactions,
            "rows_changed": self.rows_changed,
            "seconds": round(self.seconds, 3),
            "stopped": self.stopped,
            "recoveries": self.recoveries,
            "resnapshots": [t.as_dict() for t in self.resnapshots],
            "notes": self.notes,
            "online_load": self.online_load,
        }


def write_rejects(report: MigrateReport, path: str) -> None:
    """The rejected rows as JSON lines: ``{"table", "primary_key", "column", "reason"}``
    (at most ``MAX_LISTED`` per table; the report's counts are exact)."""
    import json
    from pathlib import Path

    lines = [
        json.dumps({"table": t.table, **r.as_dict()}, ensure_ascii=False)
        for t in report.tables
        for r in t.rejects
    ]
    try:
        Path(path).write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    except OSError as e:
        raise MigratorError(
            f"cannot write the reject list {path}: {e.strerror}; the load itself is done",
            "the rows are in Redis; to list the rejected ones: migrator verify MAPPING",
        ) from None
    report.rejects_file = path


def check_writable(path: str, what: str) -> None:
    """Stop (exit 2) before anything is written when ``path`` cannot be written: a file a
    command writes at its end (``migrate --rejects``) must not fail after the load."""
    existed = os.path.lexists(path)
    try:
        with open(path, "a", encoding="utf-8"):
            pass
    except OSError as e:
        raise MigratorError(
            f"cannot write {what} {path}: {e.strerror}; nothing was done",
            "choose a file in a directory that exists and is writable",
        ) from None
    if not existed:
        os.remove(path)
