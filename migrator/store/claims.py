"""``migrate`` of a sharded source: each batch's rows claimed before they are written, so that
a row another shard already wrote is reported, never overwritten (docs/sharding.md#collisions).

For a batch of shard S's rows (plan/owners.py ``Owners``), before the batch is packed:

1. its unique values (``unique:`` hashes and strings) are read; one held by another row (a
   primary key that is not the row's own) whose owner is another shard T is a **unique
   collision**: the row is left out;
2. every other row's field in the owner hash is claimed with ``HSETNX`` (one pipeline, then
   an ``HMGET`` of the fields): a field another shard T holds is a **key collision**: the
   row is left out.

Either way Redis keeps T's row and entries as they were, and the row of S is counted as
rejected (migrate exits 1) under ``COLLISION``, the first ``MAX_LISTED`` named with the SQL
that finds the rows on both shards. Nothing is kept in memory beyond the batch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from migrator.plan.batch import MAX_LISTED, Reject, Row, Stats
from migrator.plan.layout import TableLayout
from migrator.plan.owners import Owners, finder, owner_field
from migrator.retry import Retrying
from migrator.store.sink import Client, transient

#: the reason rows are counted under
COLLISION = "a primary key or unique value another shard holds (collision)"


def _numeric(plan: TableLayout, column: str) -> bool:
    return plan.resolved.schema.column(column).kind.numeric


class Claims:
    """The claims of one table's batches, for the shard its plan was resolved for."""

    def __init__(self, plan: TableLayout, owners: Owners, client: Client) -> None:
        self.plan, self.owners, self.client = plan, owners, client
        r = plan.resolved
        self.table, self.pk = r.name, r.primary_key
        #: per unique: (columns, HASH key or None, the field's or the STRING key's function)
        self.uniques: list[tuple[tuple[str, ...], bytes | None, Callable[[Row], Any]]] = []
        for u in r.table.unique:
            if u.key is None:
                self.uniques.append((u.columns, plan.unique_hash_key(u.columns),
                                     plan.join_fn(u.columns)))  # fmt: skip
            else:
                self.uniques.append((u.columns, None, plan.key_fn(u.key)))

    def sql(self, row: Row, columns: Sequence[str]) -> str:
        return finder(self.table, [(c, row[self.plan.pos[c]], _numeric(self.plan, c))
                                   for c in columns])  # fmt: skip

    def holder_field(self, pk_text: bytes) -> bytes | None:
        """The owner field of the row whose primary key a unique entry names (None when its
        text cannot be split back into the key's values)."""
        if len(self.pk) == 1:
            return owner_field((pk_text,))
        parts = pk_text.split(self.plan.sep)
        if self.plan.esc is not None or len(parts) != len(self.pk):
            return None
        return owner_field(tuple(parts))

    def keep(self, rows: Sequence[Row], stats: Stats, retrying: Retrying) -> list[Row]:
        """The rows of ``rows`` that no other shard holds (see the module docstring)."""
        mine = self.owners.owner()
        left = list(rows)
        if self.uniques:
            left = self._uniques(left, mine, stats, retrying)
        if not left:
            return left
        fields = [self.owners.field(row) for row in left]
        key = self.owners.key

        def claim() -> list[Any]:
            pipe = self.client.pipeline(transaction=False)
            for f in fields:
                pipe.hsetnx(key, f, mine)
            pipe.hmget(key, fields)
            return list(pipe.execute()[-1])

        held = retrying.call(claim, transient, "Redis")
        out = []
        for row, owner in zip(left, held):
            if owner is None or owner == mine:
                out.append(row)
            else:
                self._collide(row, stats, f"its primary key is on shard {owner.decode()} "
                              "too", self.pk)  # fmt: skip
        return out

    def _uniques(self, rows: list[Row], mine: bytes, stats: Stats, retrying: Retrying) -> list[Row]:
        reads: list[tuple[int, int, bytes]] = []  # (row, unique, its pk text)
        pipe = self.client.pipeline(transaction=False)
        for i, row in enumerate(rows):
            pk = self.plan.pk_text(row)
            for j, (_, hash_key, of) in enumerate(self.uniques):
                value = of(row)
                if value is None or pk is None:
                    continue
                if hash_key is None:
                    pipe.get(value)
                else:
                    pipe.hget(hash_key, value)
                reads.append((i, j, pk))
        if not reads:
            return rows
        got = retrying.call(pipe.execute, transient, "Redis")
        suspects = [(i, j, h) for (i, j, pk), h in zip(reads, got) if h is not None and h != pk]
        fields = [self.holder_field(h) for _, _, h in suspects]
        asked = [f for f in fields if f is not None]
        owners: list[Any] = []
        if asked:
            owners = retrying.call(lambda: self.client.hmget(self.owners.key, asked), transient,
                                   "Redis")  # fmt: skip
        answer = dict(zip(asked, owners))
        out: list[Any] = list(rows)
        for (i, j, _), f in zip(suspects, fields):
            owner = answer.get(f) if f is not None else None
            row = out[i]
            if owner is None or owner == mine or row is None:
                continue  # an entry of this shard's own (an earlier run), or of nobody known
            columns = self.uniques[j][0]
            self._collide(row, stats, f"its unique {', '.join(columns)} value is held on shard "
                          f"{owner.decode()} by another row", columns)  # fmt: skip
            out[i] = None
        return [row for row in out if row is not None]

    def _collide(self, row: Row, stats: Stats, what: str, columns: Sequence[str]) -> None:
        stats.rejected[COLLISION] += 1
        stats.rows += 1
        if len(stats.rejects) < MAX_LISTED:
            pk = tuple((row[self.plan.pos[c]] or b"NULL").decode("utf-8", "replace")
                       for c in self.pk)  # fmt: skip
            shard = self.owners.owner().decode()
            reason = (f"collision: not written from shard {shard}, {what}; find the rows on "
                      f"each shard with: {self.sql(row, columns)}")  # fmt: skip
            stats.rejects.append(Reject(pk, ",".join(columns), reason))
