"""Nested documents over a sharded source (docs/sharding.md#nested-documents): the children
whose parent row is on another shard (source/shard_nesting.py ``cross_shard``), in no
document, reported by ``migrate`` as rejected rows of the child's table (``child@shard``) and
by ``verify`` as differences of the child's table, each with both shards and the SQL that
finds such rows: exit 1, never left out silently. (A nested child whose primary key another
shard's child holds is claimed as any row: store/claims.py.)"""

from __future__ import annotations

from collections.abc import Sequence

from migrator.errors import docs
from migrator.plan.batch import Reject
from migrator.plan.nesting import Level
from migrator.plan.owners import CROSS_SHARD
from migrator.reports import TableReport
from migrator.source.mysql import Source
from migrator.source.shard_nesting import CrossChild, cross_shard
from migrator.source.shards import Union
from migrator.verify.report import CROSS_SHARD as CROSSING
from migrator.verify.report import TableCheck

#: children named per table and shard (the rest are counted)
LISTED = 20


def cross_rejects(
    sources: Sequence[tuple[str, Source]], tops: dict[str, Level], only: str | None
) -> list[TableReport]:
    """migrate's rejected rows: per child table and shard, its cross-shard children."""
    found: dict[str, TableReport] = {}
    for top in tops.values():
        for c in cross_shard(sources, top, only):
            t = found.setdefault(f"{c.table}@{c.shard}", TableReport(f"{c.table}@{c.shard}"))
            t.rejected[CROSS_SHARD] = t.rejected.get(CROSS_SHARD, 0) + 1
            if len(t.rejects) < LISTED:
                t.rejects.append(Reject((c.key,), ", ".join(c.columns), c.describe()))
    return list(found.values())


def note_cross_shard(src: Source, top: Level, checks: dict[str, TableCheck]) -> None:
    """verify's: each cross-shard child a difference of its table (else of the top's)."""
    if not isinstance(src, Union):
        return
    seen: dict[str, list[CrossChild]] = {}
    for c in cross_shard(src.sources, top):
        check = checks.get(c.table) or checks[top.name]
        check.add(CROSSING, f"{c.table} ({c.key})", f"{c.shard} -> {c.other}", c.sql,
                  f"parent {c.parent} ({c.values}) on shard {c.other}")  # fmt: skip
        seen.setdefault(check.table, []).append(c)
    for table, children in seen.items():
        checks[table].notes += [c.describe() for c in children[:3]]
        checks[table].notes.append(
            f"{len(children):,} nested child row(s) on another shard than their parent row: "
            "in no document (a document is built from its top row's shard); move each to its "
            f"parent's shard; not repaired by --fix ({docs('sharding.md#nested-documents')})"
        )
