"""``migrate`` of a sharded source: each batch's rows claimed before they are written, so that
a row another shard already wrote is reported, never overwritten (docs/sharding.md#collisions).

For a batch of shard S's rows (plan/owners.py ``Owners``), before the batch is packed:

1. its unique values are read (an ``HMGET`` per ``unique:`` hash, a ``GET`` per value of a
   ``unique:`` string); one held by another row (a primary key that is not the row's own)
   whose owner is another shard T is a **unique collision**: the row is left out;
2. every other row's field in the owner hash is claimed with ``HSETNX``, by one script call
   on the owner hash (``CLAIM``) that answers only the fields another shard holds: such a
   field is a **key collision** (shard T holds the key): the row is left out.

Either way Redis keeps T's row and entries as they were, and the row of S is counted as
rejected (migrate exits 1) under ``COLLISION`` (plan/owners.py), the first ``MAX_LISTED``
named with the SQL that finds the rows on both shards. Nothing is kept in memory beyond the batch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from migrator.plan.batch import MAX_LISTED, Reject, Row, Stats
from migrator.plan.layout import TableLayout
from migrator.plan.owners import COLLISION, Owners, finder, owner_field
from migrator.retry import Retrying
from migrator.store.sink import Client, transient

#: KEYS[1] the owner hash, ARGV[1] the shard, then the fields: HSETNX each; answers (the
#: field's place, its owner) for each another shard holds
CLAIM = """
local out = {}
for i = 2, #ARGV do
  if redis.call('HSETNX', KEYS[1], ARGV[i], ARGV[1]) == 0 then
    local owner = redis.call('HGET', KEYS[1], ARGV[i])
    if owner ~= ARGV[1] then
      out[#out + 1] = i - 2
      out[#out + 1] = owner
    end
  end
end
return out
"""


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
        parts = self.plan.read_joined(self.pk, pk_text)  # (escape: backslash undone)
        return None if parts is None else owner_field(tuple(parts))

    def keep(self, rows: Sequence[Row], stats: Stats, retrying: Retrying) -> list[Row]:
        """The rows of ``rows`` that no other shard holds (see the module docstring)."""
        mine = self.owners.owner()
        left = list(rows)
        if self.uniques:
            left = self._uniques(left, mine, stats, retrying)
        if not left:
            return left
        others = self._claim(left, retrying)
        for at, owner in others.items():
            what = f"its primary key is on shard {owner.decode()} too"
            self._collide(left[at], stats, what, self.pk)
        return [row for i, row in enumerate(left) if i not in others]

    def keys(self, rows: Sequence[Row], retrying: Retrying) -> list[Row]:
        """The rows of ``rows`` whose primary key this shard holds once claimed, the others
        left out unsaid: rows already past their moment, which write nothing but the owner
        field their change then removes (plan/expiry_delta.py), and which ``migrate`` does not
        read (so no collision of theirs is reported, nor their unique values looked up)."""
        others = self._claim(list(rows), retrying) if rows else {}
        return [row for i, row in enumerate(rows) if i not in others]

    def _claim(self, rows: list[Row], retrying: Retrying) -> dict[int, bytes]:
        """``HSETNX`` of each row's owner field (``CLAIM``): the place of each row whose field
        another shard holds, and that shard."""
        fields = [self.owners.field(row) for row in rows]
        key, mine = self.owners.key, self.owners.owner()
        taken = retrying.call(
            lambda: self.client.eval(CLAIM, 1, key, mine, *fields), transient, "Redis"
        )
        return {int(at): owner for at, owner in zip(taken[0::2], taken[1::2])}

    def _uniques(self, rows: list[Row], mine: bytes, stats: Stats, retrying: Retrying) -> list[Row]:
        wanted: list[tuple[int, int, bytes, bytes]] = []  # (row, unique, value, its pk text)
        for i, row in enumerate(rows):
            pk = self.plan.pk_text(row)
            for j, (_, _, of) in enumerate(self.uniques):
                value = of(row)
                if value is not None and pk is not None:
                    wanted.append((i, j, value, pk))
        if not wanted:
            return rows
        got = retrying.call(lambda: self._holders(wanted), transient, "Redis")
        suspects = [(i, j, h) for (i, j, _, pk), h in zip(wanted, got) if h is not None and h != pk]
        if not suspects:
            return rows
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

    def _holders(self, wanted: list[tuple[int, int, bytes, bytes]]) -> list[Any]:
        """The primary key each wanted unique entry names now (None: no entry), in order: an
        HMGET per unique hash, a GET per unique string (one pipeline)."""
        pipe = self.client.pipeline(transaction=False)
        plan: list[tuple[int, list[int]]] = []  # per command: (unique, places in ``wanted``)
        for j, (_, hash_key, _) in enumerate(self.uniques):
            places = [n for n, w in enumerate(wanted) if w[1] == j]
            if not places:
                continue
            if hash_key is None:
                for n in places:
                    pipe.get(wanted[n][2])
                    plan.append((j, [n]))
            else:
                pipe.hmget(hash_key, [wanted[n][2] for n in places])
                plan.append((j, places))
        out: list[Any] = [None] * len(wanted)
        for (_, places), reply in zip(plan, pipe.execute()):
            for n, held in zip(places, reply if isinstance(reply, list) else [reply]):
                out[n] = held
        return out

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
