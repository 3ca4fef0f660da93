"""What a sync run is bound to: the replica server id it reads the log with, and the
fingerprints of the mapping (whole and per table) stored with the position, which tell the
next run which tables are new or changed in the mapping."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import zlib

from migrator.errors import MigratorError
from migrator.mapping.model import Mapping, Retries, Table
from migrator.urls import mask

SERVER_ID_ENV = "MIGRATOR_SYNC_SERVER_ID"


def default_server_id(mapping_name: str, target: str = "") -> int:
    """A replica server id of the mapping and target's own (stable; syncs of one mapping into
    two targets read the log side by side, and a second sync into the same target is refused
    by its lock before it connects); ``--server-id`` or $MIGRATOR_SYNC_SERVER_ID override it."""
    raw = os.environ.get(SERVER_ID_ENV)
    if raw:
        if not raw.isdigit() or not 0 < int(raw) < 2**32:
            raise MigratorError(f"{SERVER_ID_ENV}={raw!r} is not a server id", "e.g. 4242")
        return int(raw)
    where = mask(target).encode()
    return 100_000 + zlib.crc32(mapping_name.encode() + b"\0" + where) % 1_000_000_000


def mapping_fingerprint(m: Mapping, legacy: bool = False) -> str:
    """What the loaded keys depend on in the mapping (tables, keys, structures, options), not
    how they are loaded (``batch_size``, ``retries``). ``legacy``: as migrator computed it
    before, with those two (a stored position then still matches)."""
    options = m.options
    if not legacy:
        options = dataclasses.replace(options, batch_size=0, retries=Retries(0, 0.0, 0.0))
    return hashlib.sha256(repr((m.tables, options)).encode()).hexdigest()[:16]


def table_fingerprints(m: Mapping) -> dict[str, str]:
    """Per table, what its keys depend on: its own mapping and the options (as
    ``mapping_fingerprint``). Stored with the position (``tables``) to tell, on the next run,
    which tables are new or changed in the mapping."""
    options = dataclasses.replace(m.options, batch_size=0, retries=Retries(0, 0.0, 0.0))
    return {t.name: _digest((t, options, *_beyond_the_repr(t))) for t in m.tables}


def _beyond_the_repr(t: Table) -> list[object]:
    """What the keys depend on that the table's repr leaves out (``search``): the SET
    indexes a search index stands in for, the columns documents hold as vectors."""
    out: list[object] = ["no index sets"] if t.without_index_sets else []
    return out + ([("document vectors", t.document_vectors)] if t.document_vectors else [])


def _digest(value: object) -> str:
    return hashlib.sha256(repr(value).encode()).hexdigest()[:16]


def mapping_changes(
    stored: dict[str, str], m: Mapping, shape: str
) -> tuple[list[tuple[str, str]], list[str]]:
    """Against the stored state: the tables to re-snapshot online (with why) and the tables
    no longer mapped (their keys are kept). A state without per-table fingerprints (an older
    migrator) whose whole-mapping fingerprint differs is refused (exit 2): ``--reload``."""
    if not stored.get("file"):
        return [], []
    now = table_fingerprints(m)
    raw = stored.get("tables")
    if not raw:
        if stored.get("mapping") in (None, shape, mapping_fingerprint(m, legacy=True)):
            return [], []
        raise MigratorError(
            "the mapping changed since sync loaded its snapshot (tables, keys or "
            "structures differ), and the stored state (from an older migrator) does not say "
            "which tables, so Redis lacks what the new mapping adds",
            f"reload: 'migrator sync {m.file or 'MAPPING'} --reload' removes the "
            "mapping's keys and loads a new snapshot",
        )
    before: dict[str, str] = json.loads(raw)
    changed = [
        (t, "new in the mapping" if t not in before else "its mapping changed")
        for t, fp in now.items()
        if before.get(t) != fp
    ]
    return changed, [t for t in before if t not in now]
