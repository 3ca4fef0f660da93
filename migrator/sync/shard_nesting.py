"""One shard's sync of nested documents among the others' (docs/sharding.md#nested-documents):
a document is its top row's shard's, so a child whose parent row another shard owns (a
*cross-shard child*) is not filed into it. Before a group is planned, the after-image of each
child of a top table is looked up by its parent's owner field (plan/owners.py; the parent's
own claim comes first, sync/shard_rows.py): one another shard owns is left out of the group,
said once per row and run in the log (a ``collision`` event: the child, its parent, both
shards and the SQL that lists such rows) and counted in
``migrator_sync_collisions_total{table=<child>}``. Its before-images are applied as they come
(taking out a row never filed changes nothing). A grandchild's parent is not looked up: its
shard is recorded nowhere (a limit)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from migrator.plan.batch import Row
from migrator.plan.expiry import encode_row
from migrator.plan.nesting import trees
from migrator.plan.owners import Owners, owners_of
from migrator.plan.planner import TablePlan
from migrator.retry import Retrying
from migrator.source.binlog.reader import Change, Transaction
from migrator.source.shard_nesting import orphans_sql
from migrator.store.owned import owner_fields


class Parent:
    """How a child table's row names its parent's owner field."""

    def __init__(self, owners: Owners, parent: str, at: tuple[int, ...], text: str) -> None:
        self.owners, self.parent, self.at, self.sql = owners, parent, at, text

    def field(self, row: Row) -> bytes:
        return encode_row(tuple(row[i] for i in self.at))


def parents(plans: dict[str, TablePlan]) -> dict[str, Parent]:
    """Each child table of a top that keeps an owner hash: how its rows name their parent."""
    out: dict[str, Parent] = {}
    for top in trees(plans).values():
        owners = owners_of(top.layout)
        if owners is None:
            continue
        pk = top.layout.resolved.primary_key
        for child in top.children:
            named = {top.layout.select[r]: b for b, r in zip(child.by, child.refs)}
            if set(pk) <= set(named):  # (sync refuses a nesting by other columns)
                by = [child.layout.select[b] for b in child.by]
                refs = [top.layout.select[r] for r in child.refs]
                text = orphans_sql(child.name, top.name, by, refs)
                out[child.name] = Parent(owners, top.name, tuple(named[c] for c in pk), text)
    return out


class CrossChildren:
    """The children left out of a shard's group because another shard owns their parent."""

    def __init__(self, client: Any, plans: dict[str, TablePlan], shard: bytes, said: Any) -> None:
        self.client, self.plans, self.shard, self.said = client, plans, shard, said
        self.parents = parents(plans)

    def group(self, group: Sequence[Transaction], retrying: Retrying | None) -> None:
        """Leave out of ``group`` (in place) the after-images of cross-shard children."""
        if not self.parents:
            return
        wanted: dict[str, dict[bytes, None]] = {}
        for txn in group:
            for c in txn.changes:
                if c.after is not None and c.table in self.parents:
                    wanted.setdefault(c.table, {})[self.parents[c.table].field(c.after)] = None
        asked = {t: (self.parents[t].owners.key, list(fs)) for t, fs in wanted.items()}
        owner = owner_fields(self.client, asked, retrying)
        if not any(o not in (b"", self.shard) for o in owner.values()):
            return
        for txn in group:
            out = []
            for c in txn.changes:
                p = self.parents.get(c.table)
                at = None if p is None or c.after is None else (c.table, p.field(c.after))
                held = b"" if at is None else owner.get(at, b"")
                if held in (b"", self.shard):
                    out.append(c)
                    continue
                assert p is not None and c.after is not None
                self._say(c.table, p, c.after, held)
                if c.before is not None:
                    out.append(Change(c.table, c.before, None))
            txn.changes = out

    def _say(self, table: str, p: Parent, row: Row, owner: bytes) -> None:
        plan = self.plans[table]
        key = ", ".join(f"{c}={(row[plan.pos[c]] or b'NULL').decode('utf-8', 'replace')}"
                        for c in plan.resolved.primary_key)  # fmt: skip
        other, mine = owner.decode("utf-8", "replace"), self.shard.decode()
        field = encode_row(tuple(row[plan.pos[c]] for c in plan.resolved.primary_key))
        self.said.found(
            table, field,
            f"collision: {table} ({key}) is on shard {mine}, its parent {p.parent} on shard "
            f"{other}, which Redis holds its document from: a document is built from its top "
            f"row's shard, so this child is not put in any (find such rows on shard {mine} "
            f"with: {p.sql})", key=key, owner=other, sql=p.sql,
        )  # fmt: skip
