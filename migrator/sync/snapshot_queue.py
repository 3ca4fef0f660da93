"""The queue of online snapshots (sync/online_snapshot.py), as the state hash stores it: one
``Pending`` per table, in order, with where its load stands and why it was asked for."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass

from migrator.mapping.resolve import Resolved

#: the state hash's field that holds the snapshots' progress
FIELD = "snapshot"
#: why a table of the first run's online load is queued (``Pending.reason``)
FIRST_RUN = "first run"


@dataclass
class Pending:
    """One table's snapshot, as stored: where it stands and why it was asked for."""

    table: str
    reason: str
    after: list[str] | None = None  # the last key loaded, each part hex (None: none yet)
    chunk: int = 0  # chunks loaded
    chunks: int = 0  # chunks expected (from the table's row estimate; 0: not started)
    rows: int = 0  # rows written from the chunks
    cleared: bool = False  # the table's old keys are removed


def first_run_queue(resolved: list[Resolved], chunk_rows: int) -> list[Pending]:
    """The first run's online load: every table, in the mapping's order, its keys already
    removed by the first run."""
    return [
        Pending(r.name, FIRST_RUN, cleared=True,
                chunks=max(1, math.ceil((r.schema.row_estimate or 0) / chunk_rows)))
        for r in resolved
    ]  # fmt: skip


def load_queue(stored: dict[str, str]) -> list[Pending]:
    raw = stored.get(FIELD) or ""
    if not raw:
        return []
    return [Pending(**p) for p in json.loads(raw)]


def dump_queue(queue: list[Pending]) -> str:
    return json.dumps([asdict(p) for p in queue], separators=(",", ":")) if queue else ""
