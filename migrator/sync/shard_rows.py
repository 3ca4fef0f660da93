"""One shard's rows among the others' in one Redis (docs/sharding.md#sync), by the owner
hash of plan/owners.py (``migrator:<m>:shard:<table>``: encoded primary key -> shard name).

* **Claims**: before a group of transactions is planned, every primary key its after-images
  write is claimed for this shard (an ``HSETNX``-like script: the field is set when no shard
  holds it, and the owner is answered), and the owners of its before-images are read. A row
  whose primary key another shard owns is a **collision**: its image is left out of the group
  (the other shard's row stays as it is), reported once per key in the log (``collision``:
  the table, the key, both shards and the SQL that finds the rows) and counted
  (``migrator_sync_collisions_total{shard=...,table=...}``). Rows an online chunk writes are
  claimed the same way. The claim is atomic: of two shards writing one primary key, the first
  claim wins, whichever process gets there first; the delta then keeps the field (``HSET`` on
  insert and update, ``HDEL`` on delete) in the group's MULTI/EXEC. A claim made by a group
  that then fails is this shard's, and the group's replay finds it so (it converges).
* **Removal of this shard's rows** (``remove_own``): a shard's first load and ``--reload``
  remove only the rows the owner hash names for it, each by its image read back from Redis
  (its row hash, or its primary key for an ``as: none`` table whose row is its key), planned
  as a delete (plan/delta.py), so every index, unique, sorted and set entry goes with it;
  other shards' keys are untouched.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from migrator.errors import MigratorError, docs
from migrator.plan.batch import Row
from migrator.plan.cascade import as_fields
from migrator.plan.delta import Delta
from migrator.plan.expiry_delta import table_delta
from migrator.plan.owners import Owners, owners_of, pk_of
from migrator.plan.planner import TablePlan
from migrator.plan.row_images import unreadable
from migrator.retry import Retrying
from migrator.source.binlog.reader import Change, Transaction
from migrator.store.cluster_sink import sink_for
from migrator.store.shard_keys import read_back
from migrator.store.sink import retry
from migrator.sync.log import event

#: KEYS[1] the owner hash; ARGV[1] this shard, ARGV[2] how many of the fields that follow are
#: claimed (the rest only read): each field's owner after the claim ("" for none)
CLAIM = (
    b"local out = {} local n = tonumber(ARGV[2]) "
    b"for i = 3, #ARGV do local o = redis.call('HGET', KEYS[1], ARGV[i]) "
    b"if not o and i - 2 <= n then redis.call('HSET', KEYS[1], ARGV[i], ARGV[1]) o = ARGV[1] end "
    b"out[#out + 1] = o or '' end return out"
)
R = TypeVar("R", bound=Sequence[bytes | None])
#: primary keys read back per round trip when a shard's rows are removed
PAGE = 1000


class Collisions:
    """Rows left out because another shard owns their primary key: counted per table (the
    metric), and said once per key in the log."""

    def __init__(self, shard: str) -> None:
        self.shard = shard
        self.counts: Counter[str] = Counter()
        self.said: set[tuple[str, bytes]] = set()

    def found(self, plan: TablePlan, field: bytes, other: str) -> None:
        table = plan.table.name
        self.counts[table] += 1
        if (table, field) in self.said:
            return
        self.said.add((table, field))
        pk = dict(zip(plan.resolved.primary_key, pk_of(field)))
        key = ", ".join(f"{c}={(v or b'').decode('utf-8', 'replace')}" for c, v in pk.items())
        sql = f"SELECT * FROM `{table}` WHERE " + " AND ".join(
            f"`{c}` = '{(v or b'').decode('utf-8', 'replace').replace(chr(39), chr(39) * 2)}'"
            for c, v in pk.items()
        )
        event(
            "collision",
            f"collision: {table} ({key}) is on shard {self.shard} and on shard {other}, which "
            f"Redis holds it from; shard {self.shard}'s row is not written (run on both: {sql})",
            logging.WARNING, table=table, key=key, shard=self.shard, owner=other, sql=sql,
        )  # fmt: skip

    def per_table(self) -> dict[str, int]:
        return dict(self.counts)


class ShardRows:
    """The claims and collisions of one shard's sync (see the module docstring)."""

    def __init__(
        self, client: Any, plans: dict[str, TablePlan], shard: str, collisions: Collisions
    ) -> None:
        self.client, self.plans, self.collisions = client, plans, collisions
        self.shard = shard.encode()
        self.owners: dict[str, Owners] = {
            name: o for name, plan in plans.items() if (o := owners_of(plan)) is not None
        }

    def _owners(self, table: str, claim: list[bytes], look: list[bytes]) -> dict[bytes, bytes]:
        if not claim and not look:
            return {}
        key = self.owners[table].key
        got = self.client.eval(CLAIM, 1, key, self.shard, len(claim), *claim, *look)
        return {f: bytes(o) if o else b"" for f, o in zip([*claim, *look], got)}

    def _foreign(self, table: str, owner: bytes, field: bytes) -> bool:
        if owner in (b"", self.shard):
            return False
        self.collisions.found(self.plans[table], field, owner.decode("utf-8", "replace"))
        return True

    def group(self, group: Sequence[Transaction]) -> None:
        """Leave out of ``group`` (in place) the images of rows another shard owns."""
        claim: dict[str, dict[bytes, None]] = {}
        look: dict[str, dict[bytes, None]] = {}
        for txn in group:
            for c in txn.changes:
                o = self.owners.get(c.table)
                if o is None:
                    continue
                if c.after is not None:
                    claim.setdefault(c.table, {})[o.field(c.after)] = None
                if c.before is not None:
                    look.setdefault(c.table, {})[o.field(c.before)] = None
        if not claim and not look:
            return
        owner: dict[str, dict[bytes, bytes]] = {}
        for table in {*claim, *look}:
            wanted = list(claim.get(table, {}))
            read = [f for f in look.get(table, {}) if f not in claim.get(table, {})]
            owner[table] = retry(lambda: self._owners(table, wanted, read))  # noqa: B023
        for txn in group:
            kept = []
            for c in txn.changes:
                o = self.owners.get(c.table)
                if o is None:
                    kept.append(c)
                    continue
                held = owner[c.table]
                before, after = c.before, c.after
                if before is not None and self._foreign(c.table, held[o.field(before)],
                                                        o.field(before)):  # fmt: skip
                    before = None
                if after is not None and self._foreign(c.table, held[o.field(after)],
                                                       o.field(after)):  # fmt: skip
                    after = None
                if before is not None or after is not None:
                    kept.append(c if (before, after) == (c.before, c.after)
                                else Change(c.table, before, after))  # fmt: skip
            txn.changes = kept

    def rows(self, table: str, rows: Sequence[R]) -> list[R]:
        """The rows of an online chunk this shard may write: each claimed, those another
        shard owns left out (and reported)."""
        o = self.owners.get(table)
        if o is None or not rows:
            return list(rows)
        fields = [o.field(row) for row in rows]
        held: dict[bytes, bytes] = {}
        for i in range(0, len(fields), PAGE):
            part = fields[i : i + PAGE]
            held |= retry(lambda: self._owners(table, part, []))  # noqa: B023
        return [row for row, f in zip(rows, fields) if not self._foreign(table, held[f], f)]


def remove_own(
    client: Any,
    plans: dict[str, TablePlan],
    shard: str,
    retrying: Retrying | None = None,
    removing: Callable[[int], None] = lambda n: None,
) -> int:
    """Remove every row the owner hashes name for ``shard`` (and its owner field), as a
    delete of its image read back from Redis; the number of rows removed. A table whose rows
    cannot be read back (``as: columns``, ``formats:``...) holding rows of the shard: exit 2."""
    done = 0
    for name, plan in plans.items():
        o = owners_of(plan)
        if o is None:
            continue
        delta = table_delta(plan)
        for page in _pages(client, o.key, shard.encode()):
            why = unreadable(plan)
            if why:
                raise MigratorError(
                    f"shard {shard}'s rows of table '{name}' cannot be removed alone: {why}",
                    "load every shard again ('migrator migrate MAPPING --replace'), or map the "
                    f"table as a hash of every column ({docs('sharding.md#sync')})",
                )
            total = Delta()
            for row in _read_back(client, plan, page):
                delta.change(row, None, total)
            commands = [*total.commands, (b"HDEL", o.key, *page)]
            sink_for(client, retrying).write(commands)
            done += len(page)
            removing(done)
    return done


def _pages(client: Any, key: bytes, shard: bytes) -> Iterator[list[bytes]]:
    """The owner hash's fields whose value is ``shard``, a page at a time."""
    page: list[bytes] = []
    for field, value in client.hscan_iter(key, count=PAGE):
        if value == shard:
            page.append(field)
            if len(page) >= PAGE:
                yield page
                page = []
    if page:
        yield page


def _read_back(client: Any, plan: TablePlan, fields: list[bytes]) -> list[Row]:
    """The rows of the encoded primary keys ``fields`` as Redis holds them, read back as
    ``migrate --replace --shard`` reads them (store/shard_keys.py)."""
    pks = [pk_of(f) for f in fields]
    keys = [plan.row_key(read_back(plan, [pk], [{}])[0]) for pk in pks]
    if plan.table.kind != "hash":  # as: none: the row is its primary key
        return read_back(plan, pks, [{} for _ in keys])
    pipe = client.pipeline(transaction=False)
    for k in keys:
        pipe.hgetall(k or b"")
    return read_back(plan, pks, [as_fields(h) for h in pipe.execute()])
