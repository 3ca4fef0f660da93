"""What a checkpoint is bound to (issue 10 item 4): the resolved mapping, part by part, so a
refused ``--resume`` can say which part changed. The source's identity is added by migrate.

A fingerprint is JSON-ready: ``{"options": {...}, "tables": {table: {part: digest}}}``, where
each digest is a short hash of the part's resolved value (key template, structures, column
types...). ``batch_size`` and ``retries`` are left out: they change how, not what, is loaded.
"""

from __future__ import annotations

import hashlib
from typing import Any

from migrator.mapping.model import Mapping
from migrator.mapping.resolve import Resolved


def digest(value: object) -> str:
    return hashlib.sha256(repr(value).encode()).hexdigest()[:16]


def table_parts(r: Resolved) -> dict[str, str]:
    t = r.table
    typed = (*r.primary_key, *r.columns)
    parts: dict[str, object] = {
        "primary key": r.primary_key,
        "key": r.key.text,
        "as": t.kind,
        "columns": r.columns,
        "column types": tuple((c, str(r.schema.column(c).kind)) for c in typed),
        "counter": r.counter.text if r.counter else None,
        "unique": t.unique,
        "indexes": t.indexes,
        "references": t.references,
        "sorted": t.sorted,
        "latest": t.latest,
        "sets": t.sets,
        "separator": r.separator,
    }
    if t.where is not None:  # only then: a fingerprint without a filter stays as it was
        parts["where"] = t.where.text
    if t.expire is not None:
        parts["expire"] = t.expire.text
    if t.vector_sets:  # only then, as where:
        parts["vector sets"] = t.vector_sets
    if t.fields:
        parts["fields"] = t.fields
    if t.formats:
        parts["formats"] = t.formats
    if t.without_index_sets:  # only then, as where: the SET indexes are not written
        parts["index sets"] = False
    if t.document_vectors:  # only then: documents hold those columns as arrays of numbers
        parts["document vectors"] = t.document_vectors
    return {name: digest(value) for name, value in parts.items()}


def fingerprint(mapping: Mapping, resolved: list[Resolved]) -> dict[str, Any]:
    o = mapping.options
    return {
        "options": {"separator": digest(o.separator), "nulls": digest(o.nulls)},
        "tables": {r.name: table_parts(r) for r in resolved},
    }


def changes(was: dict[str, Any], now: dict[str, Any], tables: list[str]) -> list[str]:
    """What differs between two fingerprints, for the ``tables`` the checkpoint has rows of:
    ``tables.emp: sorted``-style lines (empty when they agree)."""
    out = [
        f"options.{name}"
        for name in sorted({*was.get("options", {}), *now.get("options", {})})
        if was.get("options", {}).get(name) != now.get("options", {}).get(name)
    ]
    for table in tables:
        before = was.get("tables", {}).get(table)
        after = now.get("tables", {}).get(table)
        if before is None or after is None:
            continue  # a table the other run did not load: nothing of it to resume
        parts = [p for p in sorted({*before, *after}) if before.get(p) != after.get(p)]
        if parts:
            out.append(f"tables.{table}: {', '.join(parts)}")
    return out
