"""Applying the foreign-key cascades ``sync`` follows (plan/cascade.py says which, and why):
each logged change of a parent finds the child rows its rule changes — through the child's
index or reference set, or its row images' SET per value (plan/row_images.py), read as of
this point of the group — and plans each child's change like a logged one, then follows
the child's own cascades in turn."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from migrator.errors import MigratorError
from migrator.mapping.kinds import zero_text
from migrator.plan.batch import Command, Row
from migrator.plan.cascade import Cascade
from migrator.plan.delta import REMOVED, Delta, TableDelta
from migrator.plan.expiry import decode_row, encode_row
from migrator.plan.planner import TablePlan
from migrator.plan.structures import RowHash

Read = Callable[[list[Command]], list[Any]]  # pipelined reads -> replies
#: (collation, value) pairs -> the server's comparison keys (source/weights.py ``Weights.keys``)
Weigh = Callable[[list[tuple[str, bytes]]], dict[tuple[str, bytes], bytes]]


class Cascades:
    """Applies the cascades of each logged change into the group's Delta (module docstring)."""

    def __init__(
        self,
        rules: list[Cascade],
        deltas: dict[str, TableDelta],
        read: Read,
        weigh: Weigh | None = None,
    ) -> None:
        self.by_parent: dict[str, list[Cascade]] = {}
        for rule in rules:
            self.by_parent.setdefault(rule.parent, []).append(rule)
        self.deltas, self.read = deltas, read
        #: the server's comparison keys of (collation, value) pairs (source/weights.py)
        self.weigh = weigh

    def follow(self, table: str, before: Row | None, after: Row | None, delta: Delta) -> None:
        for rule in self.by_parent.get(table, ()):
            action = rule.action(before, after)
            if action is None:
                continue
            values = tuple(before[i] for i in rule.parent_pos)  # type: ignore[index]
            if any(v is None for v in values):
                continue  # a NULL is referenced by no row
            kind, new_values = action
            child = self.deltas[rule.child]
            keys = self._keys(rule, values)
            new_keys = None if new_values is None else self._keys(rule, tuple(new_values))
            for old in self._found(rule, keys, delta):
                new: Row | None = None
                if kind != "delete":
                    row = list(old)
                    for k, i in enumerate(rule.child_pos):
                        v = new_values[k] if new_values is not None else None
                        fits = rule.fits[k] if rule.fits else None
                        row[i] = fits(v) if fits is not None and v is not None else v
                    for k, at in enumerate(rule.weigh):  # the comparison keys, as the values
                        if at is not None:
                            row[at[1]] = None if new_keys is None else new_keys[k]
                    new = tuple(row)
                child.change(old, new, delta)
                self.follow(rule.child, old, new, delta)

    def _keys(self, rule: Cascade, values: tuple[bytes | None, ...]) -> tuple[bytes | None, ...]:
        """``values`` as the child's SETs hold them: a weighed column's by its comparison key."""
        if not rule.weigh:
            return values
        assert self.weigh is not None
        pairs = [(at[0], v) for at, v in zip(rule.weigh, values) if at is not None and v]
        found = self.weigh(pairs) if pairs else {}
        return tuple(v if at is None or v is None else found.get((at[0], v), b"")
                     for at, v in zip(rule.weigh, values))  # fmt: skip

    def _found(self, rule: Cascade, values: tuple[bytes | None, ...], delta: Delta) -> list[Row]:
        """``_children`` of ``values``, and of each spelling of a FLOAT's or DOUBLE's zero
        among them (``-0`` and ``0``: MySQL's = finds both), each row once."""
        spellings = [
            [v.lstrip(b"-"), b"-" + v.lstrip(b"-")] if z and v is not None and zero_text(v) else [v]
            for v, z in zip(values, rule.zeros or (False,) * len(values))
        ]
        n = len(self.deltas[rule.child].plan.resolved.primary_key)
        out: dict[tuple[bytes | None, ...], Row] = {}
        for probe in itertools.product(*spellings):
            for row in self._children(rule, tuple(probe), delta):
                out.setdefault(tuple(row[:n]), row)
        return list(out.values())

    def _children(self, rule: Cascade, values: tuple[bytes | None, ...], delta: Delta) -> list[Row]:
        """The child rows whose foreign key holds ``values`` (as its SETs hold them: ``_keys``),
        as of this point of the group."""
        plan = self.deltas[rule.child].plan
        probe: list[bytes | None] = [None] * len(plan.row_names)
        for k, i in enumerate(rule.child_pos):
            probe[i] = values[k]
        if rule.by is not None:  # the child's own SET per value (plan/row_images.py)
            set_key: bytes | None = rule.by + encode_row(values)
        else:
            assert rule.set_key is not None
            set_key = rule.set_key(tuple(probe))
        if set_key is None:
            return []
        (members,) = self.read([(b"SMEMBERS", set_key)])
        found = sorted(delta.pending_members(set_key, set(members)))
        if rule.by is not None:  # members: encoded primary keys (plan/row_images.py)
            pks = [decode_row(m) for m in found]
        else:
            pks = [self._pk(plan, set_key, m) for m in found]
        if rule.images is not None:
            return self._images(rule.images, [encode_row(pk) for pk in pks], delta)
        n = len(plan.resolved.primary_key)
        rows = []
        for pk in pks:
            row: list[bytes | None] = [None] * len(plan.row_names)
            row[:n] = pk
            rows.append(row)
        if plan.table.kind != "hash":
            return [tuple(r) for r in rows]
        keys = [rk for r in rows if (rk := plan.row_key(tuple(r))) is not None]
        hashes = self.read([(b"HGETALL", rk) for rk in keys]) if keys else []
        fields = next(s.fields for s in plan.structures if isinstance(s, RowHash))
        out: list[Row] = []
        for row, key, held in zip(rows, keys, hashes):
            have = delta.pending_hash(key, as_fields(held))
            if not have:
                continue  # not there at this point of the group
            for name, i in fields:
                row[i] = have.get(name)
            out.append(tuple(row))
        return out

    def _images(self, key: bytes, pks: list[bytes], delta: Delta) -> list[Row]:
        """The rows of the encoded primary keys ``pks`` from the row images ``key``, as of
        this point of the group (plan/row_images.py)."""
        if not pks:
            return []
        (held,) = self.read([(b"HMGET", key, *pks)])
        pending = delta.ops.get(("h", key), {})
        out: list[Row] = []
        for pk, image in zip(pks, held):
            image = pending.get(pk, image)
            if image is not None and image is not REMOVED:
                out.append(decode_row(image))
        return out

    @staticmethod
    def _pk(plan: TablePlan, set_key: bytes, member: bytes) -> tuple[bytes | None, ...]:
        pk_values = plan.read_joined(plan.resolved.primary_key, member)
        if pk_values is None:  # not a member sync or migrate writes
            raise MigratorError(
                f"{plan.table.name}: the member {member!r} of {set_key!r} is not a primary "
                "key of the table, so the rows its foreign key's rule changes are unknown",
                "run 'migrator verify --fix' or a new first load (sync --reload)",
            )
        return tuple(pk_values)


def as_fields(reply: Any) -> dict[bytes, bytes]:
    """HGETALL's reply as a dict: RESP3 (redis-py 8's default) answers a map, RESP2 a flat
    list of fields and values."""
    if isinstance(reply, dict):
        return reply
    return dict(zip(reply[::2], reply[1::2]))
