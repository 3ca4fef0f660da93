"""What ``migrate`` returns: a report per table and one for the run."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from migrator.errors import EXIT_DIFFERENCE, EXIT_OK
from migrator.source.snapshot import Snapshot


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
    retries: int = 0  # transient failures ridden out (retry.py)

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
            "retries": self.retries,
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
    def exit_code(self) -> int:
        return EXIT_DIFFERENCE if self.rejected or self.duplicate_rows else EXIT_OK

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
            "tables": [t.as_dict() for t in self.tables],
        }
