"""Foreign-key cascades for ``sync``, applied from the parent's change (docs/sync.md).

InnoDB runs ``ON DELETE/UPDATE CASCADE`` and ``SET NULL`` itself: the binary log holds the
parent's row change only. ``sync`` applies the rule from three things it has: the parent's
change (its before and after row), the constraint's rule, and the child rows Redis already
holds as of the log position — found through the child's index or reference set on exactly
the foreign key's columns, each row read back from its hash. Redis is read *before* the
group's commands are sent, so every read is overlaid with what the group has planned so far
(``Delta.pending_members`` / ``pending_hash``): the rows are those of the moment of the
parent's change. Each child change is then planned like any logged change (``TableDelta``),
and followed in turn (a cascade of a cascade).

A child whose row cannot be read back from its hash, or with no index or reference on exactly
the foreign key's columns, keeps row images and a SET per value beside its keys
(plan/row_images.py): its rows are then read from those (``Cascades._images``).

A parent table left out of the mapping is read from the log all the same, for its cascades
only (plan/cascade_parents.py): ``watched`` names its columns the foreign keys reference, the
reader decodes those (sync/follow.py), and nothing is written for the parent itself; its
``Cascade.parent_pos`` are positions in that tuple. Its own rows must not change without a
trace in the log where that reaches the child (a cascade of a cascade through a table sync
does not hold: the rows of the middle table, and so its children, are unknown): refused, as
is a parent whose changes MariaDB logs as statements (transaction-precise versioning).

That is exact only when Redis holds what the rule needs and MySQL's equality of the key is byte
equality. ``followable`` names, per foreign key, why it is not (``sync`` then refuses the table
at start, naming the constraint): an unmapped parent as above; the
foreign key's columns are not read by the mapping; the key's columns compare
otherwise than byte-wise (``mapping.cascades.inexact_match``: a ``_ci`` collation, PAD SPACE on
a VARCHAR, a type compared by value unless both sides have one same DECIMAL, temporal, YEAR
or BIT type); a row filter the rule can bring a row into (mapping/filter_rules.py), or one on
a parent whose own rows change by a rule the log does not carry (``filtered``); a
separator that may occur in a composite's values next to a column ``SET NULL`` empties; a
Redis Cluster target (a replay of a half-applied group could read children of a later state).
The child's primary key may be text: the members are read back (``TableLayout.read_joined``),
never compared.

A MySQL that runs foreign keys in its SQL layer (``innodb_native_foreign_keys=OFF``, 9.7's
default) writes the cascaded child rows to the log itself, before the parent's row: with
``logged`` nothing is applied from the parent's change and nothing refused for it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from migrator.errors import MigratorError
from migrator.mapping.cascades import (
    COLLATION_FIX,
    Unlogged,
    inexact_key,
    reaching,
    trx_versioned,
)
from migrator.mapping.filter_rules import admitting
from migrator.mapping.resolve import Resolved
from migrator.mapping.schema import ForeignKey
from migrator.plan.batch import Command, Row
from migrator.plan.cascade_parents import OTHER_FIX, UNMAPPED_FIX, Parents, unmapped, watched
from migrator.plan.delta import REMOVED, Delta, TableDelta
from migrator.plan.expiry import decode_row, encode_row
from migrator.plan.planner import KeyFn, TablePlan
from migrator.plan.row_images import by_prefix, images_of, indexed, unreadable
from migrator.plan.structures import RowHash

Read = Callable[[list[Command]], list[Any]]  # pipelined reads -> replies
#: (collation, value) pairs -> the server's comparison keys (source/weights.py ``Weights.keys``)
Weigh = Callable[[list[tuple[str, bytes]]], dict[tuple[str, bytes], bytes]]

ASIDE = "leave the table out of the mapping for sync (migrate and verify are not affected)"
FIX = (
    "keep the foreign key's columns read (in columns:, or a references entry on them); "
    f"or make the rule RESTRICT, or {ASIDE}"
)
#: ``as: none`` reads no ``columns:`` of its own (plan/layout.py): a references entry it reads
NONE_FIX = (
    "add a references entry on the foreign key's columns (as: none reads no columns: of its "
    f"own), or map the table as: hash; or make the rule RESTRICT, or {ASIDE}"
)
WHERE_FIX = (
    "test the foreign key's columns only for NULL (crew_id IS NOT NULL), or, under SET NULL, "
    f"only in tests a NULL cannot pass (crew_id IN (1, 2)); or make the rule RESTRICT, or {ASIDE}"
)


@dataclass(frozen=True)
class Cascade:
    """One foreign key whose rules sync applies: child rows whose ``child_pos`` values equal
    the parent row's ``parent_pos`` values are found in the set ``set_key`` gives."""

    key: ForeignKey
    parent: str
    child: str
    parent_pos: tuple[int, ...]
    child_pos: tuple[int, ...]
    set_key: KeyFn | None  # None: the rows are found through ``by`` (plan/row_images.py)
    by: bytes | None = None  # the head of the child's SETs per value of the foreign key
    images: bytes | None = None  # the child's row images (plan/row_images.py), if kept
    #: per foreign-key column, the collation its value is compared under where the SETs of
    #: ``by`` hold the server's comparison key of it (mapping/cascades.py ``weighed``), with
    #: the position of that key in the child's row (after its ``select``); () when none is
    weigh: tuple[tuple[str, int] | None, ...] = ()

    def action(self, before: Row | None, after: Row | None) -> tuple[str, Row | None] | None:
        """What the parent's change does to the children: ("delete", None), ("null", None),
        ("set", the parent's new values), or None."""
        if before is None:
            return None
        if after is None:
            rule = self.key.on_delete.upper()
        else:
            old = tuple(before[i] for i in self.parent_pos)
            new = tuple(after[i] for i in self.parent_pos)
            if old == new:
                return None
            rule = self.key.on_update.upper()
            if rule == "CASCADE":
                return "set", new
        if rule == "CASCADE":
            return "delete", None
        if rule in ("SET NULL", "SET DEFAULT"):  # InnoDB has no SET DEFAULT: it is refused
            return "null", None
        return None


def _why_not(
    fk: ForeignKey,
    child: TablePlan,
    plans: dict[str, TablePlan],
    cluster: bool,
    failed: Collection[str] = (),
    parents: Parents | None = None,
) -> tuple[str, str]:
    """Why sync cannot apply this key's rules exactly ("" when it can), and the fix;
    ``failed``: mapped tables that did not pass validation (validate has no plan of them);
    ``parents``: the source's tables, for a parent the mapping leaves out."""
    if fk.parent_database:  # the log is read for the source's own database only
        why = f"the parent table {fk.parent_database}.{fk.parent} is in another database"
        return why + ", whose changes sync does not read", OTHER_FIX
    if fk.parent not in plans and fk.parent in failed:
        why = f"the parent table {fk.parent} did not pass validation (see its error): fix it first"
        return why, FIX
    why = _mapped(fk, child, plans, cluster)
    if why:
        return why, NONE_FIX if child.table.kind == "none" else FIX
    kept = filtered(fk, child.resolved, plans)
    if kept[0]:
        return kept
    mapped = plans.get(fk.parent)
    parent = mapped.resolved.schema if mapped is not None else (parents or {}).get(fk.parent)
    if mapped is None:
        why = unmapped(fk, parent)
        if why:
            return why, UNMAPPED_FIX
    return inexact_key(fk, child.resolved.schema, parent, child.weighed), COLLATION_FIX


def _mapped(fk: ForeignKey, child: TablePlan, plans: dict[str, TablePlan], cluster: bool) -> str:
    """Why the mapping does not keep what the rule needs ("" when it does)."""
    parent = plans.get(fk.parent)
    r = child.resolved
    if cluster:
        return "on a Redis Cluster a replayed group could read the children of a later state"
    if any(x.endswith("SET DEFAULT") for x in fk.unlogged_rules):
        return "SET DEFAULT is not supported"
    if parent is not None and any(c not in parent.pos for c in fk.parent_columns):
        return f"the parent's columns {', '.join(fk.parent_columns)} are not read by the mapping"
    if any(c not in child.pos for c in fk.columns):
        return f"the foreign key's columns {', '.join(fk.columns)} are not read by the mapping"
    if images_of(child) is None:  # none kept: the row hash and an index must do
        why = unreadable(child) or (
            ""
            if indexed(r, fk)
            else f"no index or reference on exactly ({', '.join(fk.columns)}) to find the rows by"
        )
        if why:
            return why
    nulled = {child.pos[c] for c in fk.columns}
    if "SET NULL" in " ".join(fk.unlogged_rules) and any(set(g) & nulled for g, _ in child.guards):
        return "a separator may occur in a composite's values next to the nulled columns"
    return ""


def filtered(fk: ForeignKey, child: Resolved, plans: dict[str, TablePlan]) -> tuple[str, str]:
    """Why a row filter (``where:``) keeps sync from finding every row the rule changes (("",
    "") when it does not), and the fix. A SET NULL or ON UPDATE CASCADE changes the foreign
    key's columns only: a changed row that leaves the filter is removed like any other, and one
    the filter left out can come in only where ``admitting`` says (mapping/filter_rules.py):
    Redis does not hold it. A parent with a filter of its own holds no rows it leaves out, so
    where its own rows change by a rule the log does not carry, the children of those it
    leaves out are unknown (a cascade of a cascade through rows sync does not hold)."""
    where = child.table.where
    rule = "" if where is None else admitting(where, fk.columns, fk.unlogged_rules)
    if where is not None and rule:
        read = ", ".join(c for c in fk.columns if c in where.columns)
        how = ("can keep a row whose foreign key is NULL" if rule.endswith("SET NULL")
               else "compares the foreign key's values")  # fmt: skip
        why = (
            f"the child's row filter (where:) reads the foreign key's columns ({read}) and "
            f"{how}: its {rule} can bring into it a row Redis does not hold"
        )
        return why, WHERE_FIX
    parent = plans.get(fk.parent)
    if parent is None or parent.table.where is None:
        return "", ""
    own = reaching(fk, parent.resolved.schema)
    if own is None:
        return "", ""
    name = f"{own.name} " if own.name else ""
    why = (
        f"the parent table {fk.parent} has a row filter (where:) and its own rows change by "
        f"its foreign key {name}-> {own.parent} {', '.join(own.unlogged_rules)}, which the "
        "binary log does not carry: the children of the rows it leaves out are unknown"
    )
    return why, f"drop where: from {fk.parent}, or make one of the two rules RESTRICT, or {ASIDE}"


def followable(
    plans: dict[str, TablePlan],
    cluster: bool = False,
    logged: bool = False,
    failed: Collection[str] = (),
    parents: Parents | None = None,
) -> tuple[list[Cascade], list[Unlogged]]:
    """The cascades sync applies, and every reason it refuses a mapped table (this module's
    docstring; transaction-precise versioning too). ``logged``: the server logs the rows its
    cascades change (none to apply); ``failed``: mapped tables without a plan because they
    did not pass validation; ``parents``: the source's tables by name (at least the parents
    the mapping leaves out: without them such a parent is refused)."""
    rules: list[Cascade] = []
    refused: list[Unlogged] = []
    outside = watched(plans, parents or {})
    for name, child in plans.items() if not logged else ():
        for fk in child.resolved.schema.foreign_keys:
            if not fk.unlogged_rules:
                continue
            why, fix = _why_not(fk, child, plans, cluster, failed, parents)
            what = f"foreign key {fk.name + ' ' if fk.name else ''}({', '.join(fk.columns)})"
            what += f" -> {fk.parent} {', '.join(fk.unlogged_rules)}"
            if why:
                refused.append(Unlogged(name, what, f"sync cannot apply it exactly: {why}", fix))
                continue
            weigh = _weigh(fk, child)
            ix = None if any(weigh) else next(
                (i for i in child.resolved.index_sets() if set(i.columns) == set(fk.columns)),
                None)  # fmt: skip
            set_key = None if ix is None else child.key_fn(child.index_template(ix.columns))
            images = images_of(child)
            by = None
            if ix is None and images is not None:
                by = by_prefix(child.resolved, tuple(fk.columns))
                assert any(p == by for p, _ in images.by)
            mapped = plans.get(fk.parent)
            pos = mapped.pos if mapped else {c: i for i, c in enumerate(outside[fk.parent])}
            rules.append(
                Cascade(
                    fk,
                    fk.parent,
                    name,
                    tuple(pos[c] for c in fk.parent_columns),
                    tuple(child.pos[c] for c in fk.columns),
                    set_key,
                    by,
                    None if images is None or not images.whole else images.key,
                    weigh if any(weigh) else (),
                )
            )
    schemas = [p.resolved.schema for p in plans.values()]
    refused += trx_versioned(schemas)
    return rules, refused


def _weigh(fk: ForeignKey, child: TablePlan) -> tuple[tuple[str, int] | None, ...]:
    """``Cascade.weigh`` of the key: (collation, position of the comparison key) per column."""
    schema, width = child.resolved.schema, len(child.select)
    return tuple(
        (schema.column(c).collation or "", width + child.weighed.index(c))
        if c in child.weighed else None
        for c in fk.columns
    )  # fmt: skip


def refuse_unfollowable(
    plans: dict[str, TablePlan], cluster: bool, logged: bool, parents: Parents
) -> None:
    """Raise (exit 2) naming every constraint or versioning sync cannot follow exactly."""
    _, refused = followable(plans, cluster, logged, parents=parents)
    if refused:
        reasons = "; ".join(f"{u} ({u.why})" for u in refused)
        fixes = "; ".join(dict.fromkeys(u.fix for u in refused))
        raise MigratorError(
            f"sync cannot keep these tables exact and refuses them: {reasons}", fixes
        )


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
            for old in self._children(rule, keys, delta):
                new: Row | None = None
                if kind != "delete":
                    row = list(old)
                    for k, i in enumerate(rule.child_pos):
                        row[i] = new_values[k] if new_values is not None else None
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
