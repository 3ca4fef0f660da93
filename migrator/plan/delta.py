"""Pure delta planning for ``sync``: a row change (before, after) -> the Redis commands that
move every structure of the table from the old row's state to the new one's.

Rows have the snapshot's shape (``TablePlan.select`` order, values already the Redis text of
docs/values.md), so keys and values are byte-identical to what ``migrate`` writes: every key
below comes from the ``TablePlan``'s own compiled key functions.

Each structure contributes *entries* for a row, ``(type, key, sub) -> value``:

* ``H`` the row's hash fields (``as: hash``; the primary-key fields when every column is NULL),
* ``s`` a STRING (``as: columns`` values, string-style uniques, ``as: json-string``
  documents),
* ``j`` a RedisJSON document (``as: json``), written whole (``JSON.SET key $ doc``),
* ``h`` a hash field of a unique HASH (``Tab:uniques:c`` {value -> pk}),
* ``S`` a SET member (index, reference and tag/join sets),
* ``z`` a sorted-set member with its score,
* ``v`` a vector-set element (plan/vector_sets.py: its vector, attributes and VADD options).

A change is the difference of the two entry maps: what the old row had and the new one has
not is removed (HDEL, DEL, SREM, ZREM; a row hash that loses its key is DELeted whole), what
is new or changed is written (HSET, SET, SADD, ZADD). Changes accumulate in a ``Delta`` as
the last operation on each entry, so a group of transactions becomes its net effect, with
the writes to one key coalesced into one command. So an UPDATE writes only changed fields,
HDELs the columns that became NULL, and *moves* each unique entry, index/reference/tag
membership and score whose value changed; an INSERT writes what ``migrate`` writes (after a
DEL of the row key, so a row is never mixed with an older one), a DELETE removes the row key
and every membership. A primary-key change is therefore a delete plus an insert.

Two structures are not deltas: counters (``Tab:id``) only ever rise, so an insert yields a
*candidate* (the new primary key) that the applier raises the counter to, never lowering it;
latest lists (``LIST`` of the newest N by a column) cannot be kept exactly from the change
alone (a delete would need the N+1th row), so a change that can affect one marks it *dirty*
and the applier rebuilds it from MySQL, as ``migrate`` does (docs/sync.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import chain, filterfalse
from typing import Any

from migrator.plan.batch import Command, Row
from migrator.plan.delta_code import Entries, entries_function
from migrator.plan.delta_entries import collector
from migrator.plan.owners import owners_of
from migrator.plan.planner import TablePlan
from migrator.plan.vector_sets import vadd
from migrator.plan.where import row_test

EntryKey = tuple[str, bytes, bytes]

REMOVED = object()  # the last operation on an entry removed it

#: per entry type: the command that removes entries of a key, and the one that writes them
_REMOVE = {"H": b"HDEL", "h": b"HDEL", "s": b"DEL", "j": b"DEL", "S": b"SREM", "z": b"ZREM"}


@dataclass
class Delta:
    """The net effect of row changes applied in order: the last operation on each entry (its
    value, or REMOVED), grouped per ``(type, key)``; row hashes deleted whole, counter
    candidates, and the latest lists to rebuild (``(table, index into table.latest)``). A
    group of transactions gives one Delta, whose ``commands`` (coalesced per key, as
    migrate's batches are) bring Redis from the state before the group to the state after."""

    ops: dict[tuple[str, bytes], dict[bytes, Any]] = field(default_factory=dict)  # or REMOVED
    row_dels: dict[bytes, None] = field(default_factory=dict)
    counters: dict[bytes, int] = field(default_factory=dict)  # counter key -> highest pk seen
    dirty_latest: set[tuple[str, int]] = field(default_factory=set)
    #: entries of a unique: MySQL does not enforce whose row let go of its value (deleted, or
    #: the value changed): ``(table, index into table.unique, the old values)``; another row
    #: may hold the value still, so the applier sets the entry from MySQL's rows (one that
    #: holds it) or removes it (none does), after the group's own commands
    dirty_unique: set[tuple[str, int, tuple[bytes, ...]]] = field(default_factory=set)
    rows: int = 0
    rejected: int = 0  # rows not written, as migrate: a NULL in the key, a separator (escape)
    #: the keys written to, in the order of their first write (the order of their commands)
    written: dict[tuple[str, bytes], None] = field(default_factory=dict, repr=False)
    #: a row's own keys under ``expire:`` -> the moment they expire (Unix ms; None: never),
    #: the last one set: PEXPIREAT (PERSIST) after every write (plan/expiry_delta.py)
    expires: dict[bytes, bytes | None] = field(default_factory=dict)

    def put(self, ek: EntryKey, value: object) -> None:
        kind, key, sub = ek
        subs = self.ops.get((kind, key))
        if subs is None:
            subs = self.ops[kind, key] = {}
        subs[sub] = value
        if value is not REMOVED:
            self.written.setdefault((kind, key))

    def pending_members(self, key: bytes, held: set[bytes]) -> set[bytes]:
        """The members of SET ``key`` once this Delta is applied over ``held`` (what Redis
        holds now): for reads in the middle of a group (plan/cascade.py)."""
        out = set(held)
        for member, value in self.ops.get(("S", key), {}).items():
            if value is REMOVED:
                out.discard(member)
            else:
                out.add(member)
        return out

    def pending_hash(self, key: bytes, held: dict[bytes, bytes]) -> dict[bytes, bytes]:
        """The fields of row hash ``key`` once this Delta is applied over ``held``."""
        out = {} if key in self.row_dels else dict(held)
        for name, value in self.ops.get(("H", key), {}).items():
            if value is REMOVED:
                out.pop(name, None)
            else:
                out[name] = value
        return out

    def delete_row(self, key: bytes) -> None:
        """DEL of a row hash: what the group wrote to its fields before is wiped with it."""
        self.row_dels[key] = None
        if self.ops.pop(("H", key), None) is not None:
            self.written.pop(("H", key), None)

    def raise_counter(self, key: bytes, value: int) -> None:
        if value > self.counters.get(key, value - 1):
            self.counters[key] = value

    def add(self, other: Delta) -> None:
        for key in other.row_dels:
            self.delete_row(key)
        for kk, subs in other.ops.items():
            mine = self.ops.get(kk)
            if mine is None:
                self.ops[kk] = dict(subs)
            else:
                mine.update(subs)
        for kk in other.written:
            self.written.setdefault(kk)
        for key, value in other.counters.items():
            self.raise_counter(key, value)
        self.expires.update(other.expires)
        self.dirty_latest |= other.dirty_latest
        self.dirty_unique |= other.dirty_unique
        self.rows += other.rows
        self.rejected += other.rejected

    @property
    def commands(self) -> list[Command]:
        """DEL of whole row hashes (one key each: Cluster-safe), then every removal, then
        every write, one command per key, then the expiry of rows' own keys."""
        out: list[Command] = [(b"DEL", key) for key in self.row_dels]
        row_dels, ops = self.row_dels, self.ops
        # the keys with a removal: the only ones whose writes need a filter below
        removing: set[tuple[str, bytes]] = set()
        for kk, subs in ops.items():
            if REMOVED not in subs.values():  # identity only: bytes never equal the marker
                continue
            removing.add(kk)
            kind, key = kk
            if kind == "s" or kind == "j":
                out.append((b"DEL", key))
            elif kind == "v":  # VREM takes one element
                out += [(b"VREM", key, sub) for sub, v in subs.items() if v is REMOVED]
            elif kind != "H" or key not in row_dels:  # else gone with the row's DEL
                out.append((_REMOVE[kind], key, *[sub for sub, v in subs.items() if v is REMOVED]))
        for kk in self.written:
            kept = ops.get(kk)
            if kept is None:
                continue
            if kk in removing:
                kept = {sub: v for sub, v in kept.items() if v is not REMOVED}
                if not kept:
                    continue
            kind, key = kk
            if kind == "H" or kind == "h":
                out.append((b"HSET", key, *chain.from_iterable(kept.items())))
            elif kind == "S":
                out.append((b"SADD", key, *kept))
            elif kind == "s":
                out.append((b"SET", key, *kept.values()))
            elif kind == "j":
                out.append((b"JSON.SET", key, b"$", *kept.values()))
            elif kind == "v":
                out += [vadd(key, element, value) for element, value in kept.items()]
            else:
                out.append((b"ZADD", key, *chain.from_iterable((v, m) for m, v in kept.items())))
        for key, at in self.expires.items():  # after the writes: a SET clears a TTL
            out.append((b"PERSIST", key) if at is None else (b"PEXPIREAT", key, at))
        return out


class TableDelta:
    """Delta planning for one table, built from its ``TablePlan``."""

    def __init__(self, plan: TablePlan) -> None:
        self.plan = plan
        self.name = plan.table.name
        # per structure: its collector, or None where the generated code inlines it
        self.collectors = [collector(plan, s) for s in plan.structures]
        counter = plan.table.counter
        self.counter_key = counter.render({}).encode() if counter else None
        self.latest_positions = [plan.pos[latest.order_by] for latest in plan.table.latest]
        enforced = {u.columns for u in plan.resolved.unenforced_uniques}
        self.shared_positions = [
            (n, [plan.pos[c] for c in u.columns])
            for n, u in enumerate(plan.table.unique)
            if u.columns in enforced
        ]
        self.npk = len(plan.resolved.primary_key)
        self.whole_rows = plan.table.kind == "hash"
        self.guarded = bool(plan.guards)
        self.entries_of = entries_function(plan, self.collectors)
        self.row_key = plan.row_key
        # a row filter (``where:``): a row it leaves out is absent from Redis, so an image
        # outside it is planned as no row at all (plan/where.py)
        where = plan.table.where
        self.keeps = None if where is None else row_test(where, plan.pos, plan.resolved.schema)
        self.owners = owners_of(plan)
        #: the row images of the rows the filter leaves out, kept as well (plan/row_images.py)
        self.left_out = plan.left_out_images

    def entries(self, row: Row | None) -> Entries:
        """A row's entries, grouped per key (none for None)."""
        return {} if row is None else self.entries_of(row)

    def change(self, before: Row | None, after: Row | None, into: Delta | None = None) -> Delta:
        """Add one row change to ``into`` (a new Delta by default) and return it: (None, row)
        an insert, (row, None) a delete, else an update."""
        delta = Delta() if into is None else into
        delta.rows += 1
        outside: Row | None = None  # a row left out by the filter whose image is kept
        if self.keeps is not None:
            keeps = self.keeps
            if before is not None and not keeps(before):
                self._image(before, REMOVED, delta)
                before = None
            if after is not None and not keeps(after):
                self._left_out(after, delta)
                outside, after = after, None
        # under escape: reject a row with a separator inside a composite's value is never
        # written (plan/escape.py), as migrate does: it was not there before, it is not after
        if self.guarded:
            ambiguous = self.plan.ambiguous
            if before is not None and ambiguous(before) is not None:
                before = None
            if after is not None and ambiguous(after) is not None:
                delta.rejected += 1
                after = None
        row_key, entries_of = self.row_key, self.entries_of
        old_key = new_key = None
        old: Entries = {}
        new: Entries = {}
        if before is not None:
            old_key, old = row_key(before), entries_of(before)
        if after is not None:
            new_key, new = row_key(after), entries_of(after)
            if new_key is None:
                delta.rejected += 1
        ops = delta.ops
        dropped = None
        if old_key is not None and old_key != new_key and self.whole_rows:
            delta.delete_row(old_key)  # the whole row hash goes
            dropped = ("H", old_key)
        # filterfalse over a dict's own methods: C loops, where a comprehension is a call
        for kk, was in old.items():
            now = new.get(kk)
            if now is None:
                if kk == dropped:
                    continue
                gone: Iterable[bytes] = was
            elif was.keys() <= now.keys():  # every entry kept (changed or not)
                continue
            else:
                gone = list(filterfalse(now.__contains__, was))
            subs = ops.get(kk)
            if subs is None:
                subs = ops[kk] = {}
            for sub in gone:
                subs[sub] = REMOVED
        if new_key is not None and new_key != old_key and self.whole_rows:
            delta.delete_row(new_key)  # an inserted row never mixes with an older one
        written = delta.written
        for kk, now in new.items():
            subs = ops.get(kk)
            prior = old.get(kk) if old else None
            if prior is None:
                if subs is None:
                    ops[kk] = now  # a fresh dict of this call: kept, not copied
                else:
                    subs.update(now)
            elif prior != now:  # the entries not in ``prior`` as they are, in ``now``'s order
                changed = dict(filterfalse(prior.items().__contains__, now.items()))
                if not changed:
                    continue
                if subs is None:
                    ops[kk] = changed
                else:
                    subs.update(changed)
            else:
                continue
            written[kk] = None  # a key written before keeps its place
        if self.counter_key is not None and after is not None and new_key is not None:
            pk = after[0]
            if pk is not None and pk.lstrip(b"-").isdigit():
                delta.raise_counter(self.counter_key, int(pk))
        if self.latest_positions:
            for n, i in enumerate(self.latest_positions):
                if _latest_may_change(before, after, i, self.npk):
                    delta.dirty_latest.add((self.name, n))
        if before is not None:
            for n, positions in self.shared_positions:
                held = tuple(before[i] for i in positions)
                let_go = after is None or tuple(after[i] for i in positions) != held
                if let_go and all(v is not None for v in held):
                    delta.dirty_unique.add((self.name, n, held))  # type: ignore[arg-type]
        if outside is not None:  # after what the row's other entries planned
            self._image(outside, None, delta)
        return delta

    def _image(self, row: Row, removed: object, delta: Delta) -> None:
        """A row the filter leaves out: its image and SET members written (``removed`` None)
        or removed (REMOVED), where the table keeps them (``left_out``)."""
        if self.left_out is not None:
            for kind, key, sub, value in self.left_out.entries(row):
                delta.put((kind, key, sub), value if removed is None else removed)

    def _left_out(self, row: Row, delta: Delta) -> None:
        """A row the filter leaves out is in no structure, but its key still raises the
        counter: the counter's rule is over every row of the table (docs/mapping.md). Over
        shards its owner field, claimed before the group was planned (sync/shard_rows.py),
        goes: no shard holds the row in Redis, as ``migrate`` leaves it."""
        if self.owners is not None and self.owners.owner():
            delta.put(("h", self.owners.key, self.owners.field(row)), REMOVED)
        pk = row[0]
        if self.counter_key is not None and pk is not None and pk.lstrip(b"-").isdigit():
            delta.raise_counter(self.counter_key, int(pk))

    def changes(self, pairs: Iterable[tuple[Row | None, Row | None]]) -> Delta:
        total = Delta()
        for before, after in pairs:
            self.change(before, after, total)
        return total


def _latest_may_change(before: Row | None, after: Row | None, i: int, npk: int) -> bool:
    """Whether a change can move a row into, out of or within a latest list ordered by the
    column at ``i``: a row with an order value appears or disappears, or its order value or
    primary key (the list's member and tie-breaker) changes."""
    b = before[i] if before is not None else None
    a = after[i] if after is not None else None
    if b is None and a is None:
        return False
    if before is None or after is None or a != b:
        return True
    return tuple(before[:npk]) != tuple(after[:npk])
