"""One shard's rows among the others' in one Redis (docs/sharding.md#sync), by the owner
hash of plan/owners.py (``migrator:<m>:shard:<table>``: encoded primary key -> shard name).

* **Claims**: before a group of transactions is planned, the rows its after-images write are
  claimed as ``migrate`` claims a batch (store/claims.py): a row whose unique value's entry
  names a row another shard owns, or whose primary key another shard owns (``HSETNX`` of its
  owner field, atomic: the first claim wins), is a **collision**: its after-image is left out
  of the group (the other shard's row and entries stay as they are), said once per row in the
  log (``collision``: the table, the key or value, both shards and the SQL that finds the
  rows) and counted (``migrator_sync_collisions_total{shard=...,table=...}``). An
  after-image already past its moment (``expire:``), which writes nothing, claims its primary
  key only: another shard's key leaves it out unsaid, as ``migrate``, which does not read it,
  says nothing of it (its change then removes the field it did claim). Then the
  owners of its before-images are read: a before-image is applied only while the row is this
  shard's in Redis (its owner field says so, or an earlier change of the group wrote it), so
  a row held out — another shard's, or never written — is never removed from the structures
  another shard's row fills. The delta then keeps the owner field (``HSET`` on insert and
  update, ``HDEL`` on delete) in the group's MULTI/EXEC; a claim of a group that then fails is
  this shard's, and the group's replay finds it so (it converges). An online chunk's rows are
  claimed the same way.
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
from migrator.plan.batch import Row, Stats
from migrator.plan.cascade_apply import as_fields
from migrator.plan.delta import Delta
from migrator.plan.expiry_delta import table_delta
from migrator.plan.owners import Owners, finder, owners_of, pk_of
from migrator.plan.planner import TablePlan
from migrator.plan.row_images import unreadable
from migrator.retry import Retrying
from migrator.source.binlog.reader import Change, Transaction
from migrator.store.claims import Claims
from migrator.store.cluster_sink import sink_for
from migrator.store.owned import owner_fields
from migrator.store.shard_documents import below, images, nesting_tops
from migrator.store.shard_keys import read_back
from migrator.sync.log import event
from migrator.sync.shard_nesting import CrossChildren

R = TypeVar("R", bound=Sequence[bytes | None])
#: primary keys read back per round trip when a shard's rows are removed
PAGE = 1000


class Collisions:
    """Rows left out because another shard holds their primary key or a unique value: counted
    per table (the metric), and said once per row in the log."""

    def __init__(self, shard: str) -> None:
        self.shard = shard
        self.counts: Counter[str] = Counter()
        self.said: set[tuple[str, bytes]] = set()

    def found(self, table: str, field: bytes, message: str, **fields: Any) -> None:
        self.counts[table] += 1
        if (table, field) not in self.said:
            self.said.add((table, field))
            event("collision", message, logging.WARNING, table=table, shard=self.shard, **fields)

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
        #: the claims of each table's rows, as migrate makes them (store/claims.py)
        self.claims = {name: Claims(plans[name], o, client) for name, o in self.owners.items()}
        self.retrying: Retrying | None = None  # Redis's (the follower's), once it has one
        #: the nested children whose parent another shard owns (sync/shard_nesting.py)
        self.crossing = CrossChildren(client, plans, self.shard, collisions)

    def _keep(self, table: str, rows: list[Row]) -> set[int]:
        """Claim ``rows``: the ``id`` of each kept; the others said (store/claims.py)."""
        if not rows:
            return set()
        stats = Stats()
        kept = {id(r) for r in self.claims[table].keep(rows, stats, self.retrying or Retrying())}
        reasons = {r.pk: r.reason for r in stats.rejects}  # (as store/claims.py names a row)
        plan = self.plans[table]
        for row in rows:
            if id(row) not in kept:
                pk = tuple((row[plan.pos[c]] or b"NULL").decode("utf-8", "replace")
                           for c in plan.resolved.primary_key)  # fmt: skip
                said = reasons.get(pk, "collision: a primary key or unique value another "
                                   "shard holds")  # fmt: skip
                self.collisions.found(table, self.owners[table].field(row), said)
        return kept

    def _expired(self, table: str, row: Row) -> bool:
        """Whether the row is already past its moment (``expire:``): the change writes it as
        absent, as ``migrate`` leaves it (it does not read it)."""
        expiry = self.plans[table].expiry
        if expiry is None:
            return False
        now = expiry.now_ms()
        moment = expiry.moment(row, now)
        return moment is not None and moment <= now

    def _held(self, table: str, row: Row, owner: bytes) -> None:
        """Say a before-image of a row another shard owns (its change is not applied)."""
        plan = self.plans[table]
        pk = plan.resolved.primary_key
        values = [(c, row[plan.pos[c]], plan.resolved.schema.column(c).kind.numeric) for c in pk]
        sql = finder(table, values)
        key = ", ".join(f"{c}={(v or b'').decode('utf-8', 'replace')}" for c, v, _ in values)
        other, mine = owner.decode("utf-8", "replace"), self.shard.decode()
        self.collisions.found(
            table, self.owners[table].field(row),
            f"collision: {table} ({key}) is on shard {mine} and on shard {other}, which Redis "
            f"holds it from; shard {mine}'s change of it is not applied (find the rows on each "
            f"shard with: {sql})", key=key, owner=other, sql=sql,
        )  # fmt: skip

    def group(self, group: Sequence[Transaction]) -> None:
        """Leave out of ``group`` (in place) what another shard's rows hold (see above)."""
        afters: dict[str, list[Row]] = {}
        past: dict[str, list[Row]] = {}  # already past their moment (plan/expiry_delta.py)
        for txn in group:
            for c in txn.changes:
                if c.after is not None and c.table in self.owners:
                    into = past if self._expired(c.table, c.after) else afters
                    into.setdefault(c.table, []).append(c.after)
        kept = set().union(*(self._keep(t, rows) for t, rows in afters.items()))
        retrying = self.retrying or Retrying()
        for t, rows in past.items():  # claimed to be removed; another shard's: left out unsaid
            kept |= {id(r) for r in self.claims[t].keys(rows, retrying)}
        fields: dict[str, dict[bytes, None]] = {}
        for txn in group:
            for c in txn.changes:
                if c.before is not None and c.table in self.owners:
                    fields.setdefault(c.table, {})[self.owners[c.table].field(c.before)] = None
        asked = {t: (self.owners[t].key, list(wanted)) for t, wanted in fields.items()}
        owner = owner_fields(self.client, asked, self.retrying)
        present: dict[tuple[str, bytes], bool] = {}  # a row of this shard's, as of this change
        for txn in group:
            out = []
            for c in txn.changes:
                o = self.owners.get(c.table)
                if o is None:
                    out.append(c)
                    continue
                before, after = c.before, c.after
                if before is not None:
                    at = (c.table, o.field(before))
                    held = owner.get(at, b"")
                    if not present.get(at, held == self.shard):
                        if held not in (b"", self.shard):
                            self._held(c.table, before, held)
                        before = None
                    present[at] = False
                if after is not None:
                    if id(after) in kept:
                        present[c.table, o.field(after)] = True
                    else:
                        after = None
                if before is not None or after is not None:
                    out.append(c if (before, after) == (c.before, c.after)
                               else Change(c.table, before, after))  # fmt: skip
            txn.changes = out
        self.crossing.group(group, self.retrying)

    def rows(self, table: str, rows: Sequence[R]) -> list[R]:
        """The rows of an online chunk this shard may write: claimed as ``migrate`` claims a
        batch, those another shard holds left out (and said)."""
        if table not in self.owners or not rows:
            return list(rows)
        out: list[R] = []
        for i in range(0, len(rows), PAGE):
            part = list(rows[i : i + PAGE])
            kept = self._keep(table, part)  # type: ignore[arg-type]
            out += [row for row in part if id(row) in kept]
        return out


def remove_own(
    client: Any,
    plans: dict[str, TablePlan],
    shard: str,
    retrying: Retrying | None = None,
    removing: Callable[[int], None] = lambda n: None,
) -> int:
    """Remove every row the owner hashes name for ``shard`` (and its owner field), as a
    delete of its image read back from Redis (a nested table's: its owner fields alone, its
    rows going with their top's documents); the number of rows removed. A table whose rows
    cannot be read back (``as: columns``, ``formats:``...) holding rows of the shard: exit 2."""
    done = 0
    tops = nesting_tops(plans)  # nested documents: read back from the rows kept beside them
    for name, plan in plans.items():
        o = owners_of(plan)
        if o is None:
            continue
        delta = table_delta(plan)
        top = tops.get(name)
        for page in _pages(client, o.key, shard.encode()):
            if plan.table.nest is not None:  # its rows: with the top's documents (below)
                sink_for(client, retrying).write([(b"HDEL", o.key, *page)])
                continue
            why = "" if top is not None else unreadable(plan)
            if why:
                raise MigratorError(
                    f"shard {shard}'s rows of table '{name}' cannot be removed alone: {why}",
                    "load every shard again ('migrator migrate MAPPING --replace'), or map the "
                    f"table as a hash of every column ({docs('sharding.md#sync')})",
                )
            total = Delta()
            rows = (
                _read_back(client, plan, page)
                if top is None
                else images(client, top, page, retrying)
            )
            for row in rows:
                delta.change(row, None, total)
            commands = [*total.commands, (b"HDEL", o.key, *page)]
            if top is not None:  # (store/shard_documents.py)
                commands += below(client, top, page, retrying)
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
