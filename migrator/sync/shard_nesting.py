"""One shard's sync of nested documents among the others' (docs/sharding.md#nested-documents):
a document is its top row's shard's, so a child whose parent row another shard owns (a
*cross-shard child*) is not filed into it. Before a group is planned, the after-image of each
nested row, at any depth, is looked up by its parent's owner field (plan/owners.py: every
table of a sharded mapping keeps one, a nested table's too; the parent's own claim comes
first, sync/shard_rows.py): one another shard owns is left out of the group, said once per
row and run in the log (a ``collision`` event: the child, its parent, both shards and the
SQL that lists such rows) and counted in ``migrator_sync_collisions_total{table=<child>}``:
the change is applied to the child's table (its owner field stays this shard's, as migrate
claims it) but not filed (sync/nesting.py ``change``'s ``unfiled``); its before-images are
applied as they come (taking out a row never filed changes nothing). A child whose own
primary key another shard owns is left out by its claim (sync/shard_rows.py), as any row."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from migrator.errors import MigratorError
from migrator.plan.batch import Row
from migrator.plan.expiry import encode_row
from migrator.plan.nesting import Level, trees
from migrator.plan.nesting_side import rows_key, walk
from migrator.plan.owners import Owners, owners_key, owners_of
from migrator.plan.planner import TablePlan
from migrator.retry import Retrying
from migrator.source.binlog.reader import Transaction
from migrator.source.mysql import Source
from migrator.source.shard_nesting import describe, orphans
from migrator.store.owned import owner_fields


class Parent:
    """A nested table whose parent keeps an owner hash, and how its rows name the parent's
    owner field."""

    def __init__(self, owners: Owners, parent: Level, child: Level, at: tuple[int, ...]) -> None:
        self.owners, self.parent, self.child, self.at = owners, parent, child, at

    def field(self, row: Row) -> bytes:
        return encode_row(tuple(row[i] for i in self.at))


def parents(plans: dict[str, TablePlan]) -> dict[str, Parent]:
    """Each nested table whose parent keeps an owner hash: how its rows name their parent."""
    out: dict[str, Parent] = {}
    for top in trees(plans).values():
        for level in walk(top):
            owners = owners_of(plans.get(level.name))
            if owners is None:
                continue
            pk = level.layout.resolved.primary_key
            for child in level.children:
                named = {level.layout.select[r]: b for b, r in zip(child.by, child.refs)}
                if set(pk) <= set(named):  # (sync refuses a nesting by other columns)
                    out[child.name] = Parent(owners, level, child, tuple(named[c] for c in pk))
    return out


class CrossChildren:
    """The children left out of a shard's group because another shard owns their parent."""

    def __init__(self, client: Any, plans: dict[str, TablePlan], shard: bytes, said: Any) -> None:
        self.client, self.shard, self.said = client, shard, said
        self.parents = parents(plans)
        #: the ``id`` of each change of the group whose after-image is not filed
        self.unfiled: set[int] = set()

    def loaded(self, src: Source, retrying: Retrying | None) -> None:
        """Say the cross-shard children a first load of the shard (``src``) left out of its
        documents: its children whose parent it does not hold and another shard owns."""
        for table, p in self.parents.items():
            rows = orphans(src, p.parent, p.child)
            fields = list(dict.fromkeys(p.field(r) for r in rows))
            owner = owner_fields(self.client, {table: (p.owners.key, fields)}, retrying)
            for row in rows:
                held = owner.get((table, p.field(row)), b"")
                if held not in (b"", self.shard):
                    self._say(p, row, held)

    def group(self, group: Sequence[Transaction], retrying: Retrying | None) -> None:
        """Mark in ``group`` the changes whose after-image is a cross-shard child
        (``unfiled``): applied to the child's table (its owner field stays this shard's, as
        ``migrate`` claims it), not filed among the rows kept beside the documents."""
        self.unfiled.clear()
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
            for c in txn.changes:
                p = self.parents.get(c.table)
                at = None if p is None or c.after is None else (c.table, p.field(c.after))
                held = b"" if at is None else owner.get(at, b"")
                if held not in (b"", self.shard):
                    assert p is not None and c.after is not None
                    self._say(p, c.after, held)
                    self.unfiled.add(id(c))

    def _say(self, p: Parent, row: Row, owner: bytes) -> None:
        key, values, sql = describe(row, p.child, p.parent)
        other, mine, table = owner.decode("utf-8", "replace"), self.shard.decode(), p.child.name
        lay = p.child.layout
        self.said.found(
            table, encode_row(tuple(row[lay.pos[c]] for c in lay.resolved.primary_key)),
            f"collision: {table} ({key}) is on shard {mine}, its parent {p.parent.name} ({values}) "
            f"on shard {other}, which Redis holds it from: a document is built from its top "
            f"row's shard, so this child is not put in any (find such rows on shard {mine} "
            f"with: {sql})", key=key, owner=other, sql=sql,
        )  # fmt: skip


def refuse_unowned(client: Any, plans: dict[str, TablePlan]) -> None:
    """Refuse (exit 2) to follow a shard whose Redis holds rows kept beside the documents of a
    nested table but no owner hash for it: loaded by a migrator from before nested tables kept
    owner hashes, under which a delete or move of a nested row would not be applied."""
    for top in trees(plans).values():
        for level in walk(top):
            if level.nest is None:
                continue
            lay = level.layout
            owners = owners_key(lay.resolved.mapping_name, lay.table.name)
            if client.exists(owners) or not client.exists(rows_key(level)):
                continue
            raise MigratorError(
                f"Redis holds the rows kept beside the documents of the nested table "
                f"{lay.table.name} but no owner hash for them ({owners.decode()}): they were "
                "loaded by a migrator from before nested tables kept one, and sync would not "
                "apply a delete or move of one of them",
                "run 'migrator verify MAPPING --fix' once (it writes the owner fields of every "
                "shard), or start each shard's sync with --reload",
            )
