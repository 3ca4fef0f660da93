"""sync of nested documents (``nest:``; docs/mapping.md#nested-children).

Every row change of a table of a nesting tree is filed into the tree's side structure
(plan/nesting_side.py: each row's image, each parent's SET of children), and each top
document it can touch is marked: the top row's own (its key before and after), or the top
of the parent its before- and after-image name. Once the group's changes are in, each marked
top is found through the images as they are *after* the group (a child's parent, its
parent's parent...), and its document rendered again whole from the images by
plan/nesting.py (the bytes migrate writes); a document whose top row is gone is deleted.

Redis is read before the group's commands are sent (the images and SETs the group needs,
each read once), and every read is overlaid with what the group has changed so far, so a
transaction sees the ones before it in the same group. The side structure's writes and the
documents go into the group's MULTI/EXEC with its position: a crash replays the group from
the state before it, with the same result.

The log does not carry what InnoDB's own foreign keys cascade (MariaDB; MySQL with
``innodb_native_foreign_keys=ON``): a parent's DELETE under ``ON DELETE CASCADE`` removes its
children (and theirs) from the side structure (over shards, with their owner fields:
plan/owners.py), and a key change under ``ON UPDATE CASCADE`` moves them, their foreign
key's values rewritten, as InnoDB does; a ``SET NULL`` takes them out of every document. A
server that logs them sends the children's changes itself. The same for a nested table's
other foreign keys (plan/nesting_side.py ``others``): a change of the other parent (mapped,
or read from the log for its rows' rules only: sync/follow.py) finds the kept rows that
hold its old values through their SET per value, and deletes them, sets their key NULL or to
the new values, as InnoDB does, each as a change of its own (its documents rendered again).

A row with a NULL in its foreign key, or one its table's ``where:`` leaves out, is in no
document; it is kept all the same where a row entering a document could bring it (or the rows
below it) in (``_held``: plan/nesting.py's ``keeping``, as migrate writes them), and the
documents are rendered with each table's filter.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from migrator.mapping.schema import ForeignKey
from migrator.plan.batch import Command, Row
from migrator.plan.expiry import decode_row, encode_row
from migrator.plan.nesting import Groups, Level, commands
from migrator.plan.nesting_side import Other, Side, members_key, others, rows_key, sides, walk
from migrator.plan.owners import Owners, owners_of
from migrator.sync.nesting_refuse import nesting_fk
from migrator.sync.nesting_refuse import refuse as refuse

Read = Callable[[list[Command]], list[Any]]  # pipelined reads -> replies


def cascade_plans(plans: dict[str, Any], tops: dict[str, Level]) -> dict[str, Any]:
    """The plans plan/cascade.py follows foreign keys for: without the nested tables that
    have no keys of their own (``as: none``), whose nesting this module follows."""
    nested = {lv.name for top in tops.values() for lv in walk(top)[1:]}
    return {n: p for n, p in plans.items() if n not in nested or p.table.kind != "none"}


def nest_parents(tops: dict[str, Level]) -> list[str]:
    """The other parents of the trees' nested tables (plan/nesting_side.py ``others``), whose
    row changes sync reads for their rules, mapped or not."""
    return sorted({fk.parent for top in tops.values() for lv in walk(top) for fk in others(lv)})


class NestSync:
    """The side structure and the documents of every nesting tree, for the groups of sync."""

    def __init__(
        self,
        tops: dict[str, Level],
        read: Read,
        logged: bool,
        columns: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        """``columns``: the columns of each table's rows as the log's reader gives them (a
        mapped table's ``select``, a parent read for its rules only: ``watched``'s)."""
        self.read, self.logged = read, logged
        #: other parent -> (level, its foreign key, the key's referenced columns' positions)
        self.watch: dict[str, list[tuple[Level, Other, tuple[int, ...]]]] = {}
        self.sides: dict[str, Side] = {}
        self.top_of: dict[str, Level] = {}
        self.parent: dict[str, Level] = {}
        self.rule: dict[str, ForeignKey] = {}  # nested table -> its foreign key to the parent
        #: a sharded source's owner hashes (plan/owners.py), of the rows a cascade removes
        self.owners: dict[str, Owners] = {}
        for top in tops.values():
            self.sides.update(sides(top))
        for side in self.sides.values():
            for other in side.by:
                cols = list((columns or {}).get(other.fk.parent, ()))
                if all(c in cols for c in other.fk.parent_columns):  # (else refused: refuse)
                    pos = tuple(cols.index(c) for c in other.fk.parent_columns)
                    self.watch.setdefault(other.fk.parent, []).append((side.level, other, pos))
        for top in tops.values():
            for level in walk(top):
                self.top_of[level.name] = top
                if (owners := owners_of(level.layout)) is not None:
                    self.owners[level.name] = owners
                for child in level.children:
                    self.parent[child.name] = level
                    self.rule[child.name] = nesting_fk(child, level)
        self._clear()

    def _clear(self) -> None:
        self.images: dict[bytes, dict[bytes, bytes | None]] = {}  # rows key -> pk -> image
        self.changed: dict[bytes, dict[bytes, bytes | None]] = {}  # what the group wrote
        self.members: dict[bytes, set[bytes]] = {}  # SET key -> members
        self.touched: set[bytes] = set()  # SETs the group changed
        self.moved: dict[bytes, dict[bytes, bool]] = {}  # shared SET -> member -> in or out
        self.dirty: dict[str, dict[bytes, None]] = {}  # top table -> top keys (encoded)
        self.anchors: list[tuple[str, bytes]] = []  # (table, key): rows whose top to mark
        self.old_keys: dict[bytes, None] = {}  # document keys of top rows before the group
        self.unowned: dict[bytes, dict[bytes, None]] = {}  # owner hash -> fields cascaded away

    @property
    def tables(self) -> set[str]:
        return set(self.sides)

    # -- reads, overlaid with the group's changes ---------------------------------------
    def _rows(self, level: Level, pks: Iterable[bytes]) -> list[bytes | None]:
        key = rows_key(level)
        held = self.images.setdefault(key, {})
        missing = [pk for pk in dict.fromkeys(pks) if pk not in held]
        if missing:
            (got,) = self.read([(b"HMGET", key, *missing)])
            held.update(zip(missing, got))
        return [held[pk] for pk in pks]

    def _sets(self, keys: Iterable[bytes]) -> list[set[bytes]]:
        keys = list(keys)
        missing = [k for k in dict.fromkeys(keys) if k not in self.members]
        if missing:
            for k, got in zip(missing, self.read([(b"SMEMBERS", k) for k in missing])):
                self.members[k] = set(got)
        return [self.members[k] for k in keys]

    def _put(self, level: Level, pk: bytes, image: bytes | None) -> None:
        key = rows_key(level)
        self.images.setdefault(key, {})[pk] = image
        self.changed.setdefault(key, {})[pk] = image

    def _file(self, level: Level, parent: bytes, pk: bytes, into: bool) -> None:
        self._member(members_key(level, parent), pk, into)

    def _member(self, key: bytes, pk: bytes, into: bool, shared: bool = False) -> None:
        """File ``pk`` into (or out of) the SET ``key``; ``shared``: a SET per foreign-key
        value, which rows of several shards hold, written as its members' changes (SADD /
        SREM: the syncs of two shards commute) rather than whole."""
        (members,) = self._sets([key])
        if into:
            members.add(pk)
        else:
            members.discard(pk)
        if shared:
            self.moved.setdefault(key, {})[pk] = into
        else:
            self.touched.add(key)

    def children(self, level: Level, parent: bytes) -> list[Row]:
        """The rows of ``level`` under the parent whose key is ``parent``, at this point."""
        (members,) = self._sets([members_key(level, parent)])
        pks = sorted(members)
        return [decode_row(img) for img in self._rows(level, pks) if img is not None]

    def prefetch(self, changes: Iterable[tuple[str, Row | None, Row | None]]) -> None:
        """Read at once the SETs of children the group's changes name (one round trip)."""
        keys = []
        for table, before, after in changes:
            side = self.sides.get(table)
            if side is None or not side.up:
                continue
            for row in (before, after):
                if row is not None and (parent := side.parent(row)) is not None:
                    keys.append(members_key(side.level, parent))
        if keys:
            self._sets(keys)

    # -- a row change --------------------------------------------------------------------
    def change(
        self, table: str, before: Row | None, after: Row | None, unfiled: bool = False
    ) -> None:
        """File one row change (``unfiled``: its after-image is a cross-shard child,
        sync/shard_nesting.py: only its before-image is taken out, with what InnoDB's
        cascades would take with a delete, their owner fields kept)."""
        if unfiled:
            self.unowned, kept = {}, self.unowned
            try:
                self.change(table, before, None)
            finally:
                self.unowned = kept
            return
        side = self.sides.get(table)
        if side is not None:
            self._change(side, before, after)
        if before is not None and not self.logged and table in self.watch:
            self._others(table, before, after)

    def _change(self, side: Side, before: Row | None, after: Row | None) -> None:
        table = side.level.name
        level, top = side.level, self.top_of[table]
        if before is not None and self._held(side, before):
            pk = side.key(before)
            self._put(level, pk, None)
            self._mark(level, top, side, before, pk, into=False)
            self._by(side, before, pk, into=False)
        if after is not None and (owners := self.owners.get(table)) is not None:
            self.unowned.get(owners.key, {}).pop(owners.field(after), None)  # (its delta's)
        if after is not None and self._held(side, after):
            pk = side.key(after)
            self._put(level, pk, encode_row(tuple(after)))
            self._mark(level, top, side, after, pk, into=True)
            self._by(side, after, pk, into=True)
        if before is not None and not self.logged:
            self._cascade(level, before, after)

    def _by(self, side: Side, row: Row, pk: bytes, into: bool) -> None:
        """File a kept row in (or out of) its SETs per value of its ``others`` keys."""
        for other in side.by:
            if (key := other.key(row)) is not None:
                self._member(key, pk, into, shared=True)

    def _others(self, table: str, before: Row, after: Row | None) -> None:
        """What InnoDB does, without a trace in the log, to the kept rows of a nested table
        whose other foreign key references ``table``'s changed or deleted row."""
        for level, other, pos in self.watch[table]:
            old = tuple(before[i] for i in pos)
            new = None if after is None else tuple(after[i] for i in pos)
            if None in old or old == new:
                continue
            fk = other.fk
            rule = (fk.on_delete if new is None else fk.on_update).upper()
            if rule not in ("CASCADE", "SET NULL"):
                continue  # RESTRICT / NO ACTION: MySQL let it happen only without children
            (members,) = self._sets([other.prefix + encode_row(old)])
            for img in self._rows(level, sorted(members)):
                if img is not None:
                    nulls = tuple(None for _ in pos)
                    self._apply(
                        level, decode_row(img), other.pos, nulls if rule == "SET NULL" else new
                    )

    def _apply(
        self, level: Level, row: Row, pos: tuple[int, ...], values: tuple[bytes | None, ...] | None
    ) -> None:
        """A rule applied to a kept row: its columns at ``pos`` set to ``values`` (a SET NULL:
        ``None``... as values; an ON DELETE CASCADE: ``values`` None, the row deleted)."""
        if values is None:
            if (owners := self.owners.get(level.name)) is not None:  # (as its delta would)
                self.unowned.setdefault(owners.key, {})[owners.field(row)] = None
            self.change(level.name, row, None)
            return
        moved = list(row)
        for k, i in enumerate(pos):
            moved[i] = values[k]
        self.change(level.name, row, tuple(moved))

    def _held(self, side: Side, row: Row) -> bool:
        """Whether the row is in the side structure, as migrate writes it: a nested row names
        a parent (no NULL in its foreign key), or its table keeps those (``roots``), and its
        filter keeps it, or its table keeps every row (``whole``). A held row's parent is held
        (a table whose rows may be in no document keeps every row below them)."""
        level = side.level
        if side.up and side.parent(row) is None and not level.roots:
            return False
        return level.whole or level.keeps is None or level.keeps(row)

    def _mark(self, level: Level, top: Level, side: Side, row: Row, pk: bytes, into: bool) -> None:
        if level is top:
            self.dirty.setdefault(top.name, {})[pk] = None
            if not into:
                key = top.layout.row_key(row)
                if key is not None:
                    self.old_keys[key] = None
            return
        parent = side.parent(row)
        if parent is not None:
            self._file(level, parent, pk, into)
            self.anchors.append((self.parent[level.name].name, parent))

    def _cascade(self, level: Level, before: Row, after: Row | None) -> None:
        """What InnoDB's own foreign keys do to the children of a deleted row or of a row
        whose key changed: not in the log, applied here from the rule."""
        side = self.sides[level.name]
        old = side.key(before)
        if after is not None and side.key(after) == old:
            return
        for child in level.children:
            fk = self.rule[child.name]
            rule = (fk.on_delete if after is None else fk.on_update).upper()
            if rule not in ("CASCADE", "SET NULL"):
                continue  # RESTRICT / NO ACTION: MySQL let it happen only without children
            values: tuple[bytes | None, ...] | None = None  # an ON DELETE CASCADE
            if rule == "SET NULL":
                values = tuple(None for _ in child.by)
            elif after is not None:
                values = tuple(after[i] for i in child.refs)
            for row in self.children(child, old):
                self._apply(child, row, child.by, values)

    # -- the group's commands ------------------------------------------------------------
    def commands(self) -> list[Command]:
        """The group's writes: the side structure, then each marked document whole (or its
        removal); the state is cleared for the next group."""
        try:
            return self._commands()
        finally:
            self._clear()

    def _commands(self) -> list[Command]:
        pending: dict[str, dict[bytes, None]] = {}
        for table, pk in self.anchors:
            pending.setdefault(table, {})[pk] = None
        while pending:  # each marked row's top, as the rows are now: a read per level
            table, pks = pending.popitem()
            side = self.sides[table]
            if not side.up:
                self.dirty.setdefault(table, {}).update(pks)
                continue
            up = self.parent[table].name
            for img in self._rows(side.level, list(pks)):
                parent = None if img is None else side.parent(decode_row(img))
                if parent is not None:  # gone: its own change marked what held it
                    pending.setdefault(up, {})[parent] = None
        out: list[Command] = []
        for key, changed in self.changed.items():
            gone = [pk for pk, img in changed.items() if img is None]
            kept = [x for pk, img in changed.items() if img is not None for x in (pk, img)]
            if gone:
                out.append((b"HDEL", key, *gone))
            if kept:
                out.append((b"HSET", key, *kept))
        out += [(b"HDEL", key, *fields) for key, fields in self.unowned.items()]
        for key, moved in sorted(self.moved.items()):
            if gone := sorted(pk for pk, into in moved.items() if not into):
                out.append((b"SREM", key, *gone))
            if come := sorted(pk for pk, into in moved.items() if into):
                out.append((b"SADD", key, *come))
        for key in sorted(self.touched):
            out.append((b"DEL", key))
            if self.members[key]:
                out.append((b"SADD", key, *sorted(self.members[key])))
        written: set[bytes] = set()
        for name, pks in self.dirty.items():
            top = self.top_of[name]
            rows: list[Row] = [decode_row(i) for i in self._rows(top, list(pks)) if i is not None]
            groups: Groups = {}
            self._descend(top, rows, groups)
            docs = commands(top, rows, groups)
            written |= {c[1] for c in docs}
            out += docs
        out[:0] = [(b"DEL", key) for key in self.old_keys if key not in written]
        return out

    def _descend(self, level: Level, rows: list[Row], groups: Groups) -> None:
        """Read every child level of ``rows`` (rows of ``level``) into ``groups``, one
        pipelined read per level and kind."""
        side = self.sides[level.name]
        for child in level.children:
            parents = {side.key(r): tuple(r[i] for i in child.refs) for r in rows}
            sets = self._sets(members_key(child, p) for p in parents)
            pks = sorted({pk for s in sets for pk in s})
            found = dict(zip(pks, self._rows(child, pks)))
            mine: dict[tuple[bytes | None, ...], list[Row]] = {}
            below: list[Row] = []
            for (_, refs), members in zip(parents.items(), sets):
                kids: list[Row] = [decode_row(i) for pk in sorted(members) if (i := found[pk])]
                if kids:
                    mine[refs] = kids
                    below += kids
            groups[id(child)] = mine
            if child.children and below:
                self._descend(child, below, groups)
