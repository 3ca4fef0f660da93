"""Collisions between shards, found from the shards themselves (verify over a sharded source,
docs/sharding.md#collisions): a row of a shard whose primary key an earlier shard (in the
order of ``sources:``) also holds, or whose unique value (``unique:``) an earlier shard holds
in another row. ``migrate`` writes the earlier shard's row and leaves the later one out
(store/claims.py), so the union Redis should hold is each shard's rows less those: ``apart``
takes them out of a batch, and keeps, per table, how many and the first ``LISTED`` of them
with the SQL that finds the rows on both shards.

Memory is bounded by the batch: each batch of a later shard asks every earlier shard for the
rows with its primary keys and its unique values (one query per shard, unique and batch);
values are compared byte for byte, as Redis compares keys and fields.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from migrator.plan.owners import finder
from migrator.source.selects import RawRow, Selector

#: collisions named per table (the rest are counted)
LISTED = 20


@dataclass(frozen=True)
class Overlap:
    table: str
    shard: str  # the later shard, whose row is left out
    other: str  # the earlier shard that holds the key or value
    columns: tuple[str, ...]
    primary: bool  # the primary key (else a unique value held by another row)
    sql: str  # finds the rows on each shard

    def describe(self) -> str:
        what = "primary key" if self.primary else f"unique {', '.join(self.columns)} value"
        return (
            f"a {what} on shards {self.other} and {self.shard}: Redis holds {self.other}'s "
            f"row; find the rows on each shard with: {self.sql}"
        )


@dataclass
class Overlaps:
    """The collisions found so far, per table."""

    counts: Counter[str] = field(default_factory=Counter)
    listed: dict[str, list[Overlap]] = field(default_factory=dict)

    def clear(self) -> None:
        self.counts.clear()
        self.listed.clear()

    def apart(
        self,
        earlier: Sequence[tuple[str, Any]],
        shard: str,
        table: str,
        selector: Selector,
        pk: Sequence[str],
        uniques: Sequence[tuple[str, ...]],
        rows: list[RawRow],
        where: Any = None,
    ) -> list[RawRow]:
        """``rows`` of ``shard`` less those an ``earlier`` shard's rows collide with."""
        pos = {n: i for i, n in enumerate(selector.names)}
        if any(c not in pos for c in (*pk, *(c for u in uniques for c in u))):
            return rows  # (a key or unique the rows were not read with: not compared)
        pk_at = [pos[c] for c in pk]
        dropped: dict[int, Overlap] = {}
        for columns in [tuple(pk), *uniques]:
            at = [pos[c] for c in columns]
            wanted: dict[tuple[Any, ...], list[int]] = {}
            for i, row in enumerate(rows):
                value = tuple(row[j] for j in at)
                if None not in value and i not in dropped:
                    wanted.setdefault(value, []).append(i)
            for other, src in earlier:
                if not wanted:
                    break
                found = src.rows_where(table, selector, list(columns), list(wanted), where)
                for theirs in found:
                    for i in wanted.get(tuple(theirs[j] for j in at), []):
                        mine = rows[i]
                        primary = columns == tuple(pk)
                        if not primary and [theirs[j] for j in pk_at] == [mine[j] for j in pk_at]:
                            continue  # the same row's key (a primary-key collision, above)
                        numeric = [selector.columns[j].kind.numeric for j in at]
                        sql = finder(table, list(zip(columns, (mine[j] for j in at), numeric)))
                        dropped.setdefault(i, Overlap(table, shard, other, columns, primary, sql))
                wanted = {v: [i for i in ix if i not in dropped] for v, ix in wanted.items()}
                wanted = {v: ix for v, ix in wanted.items() if ix}
        if not dropped:
            return rows
        self.counts[table] += len(dropped)
        listed = self.listed.setdefault(table, [])
        listed += list(dropped.values())[: max(0, LISTED - len(listed))]
        return [row for i, row in enumerate(rows) if i not in dropped]
