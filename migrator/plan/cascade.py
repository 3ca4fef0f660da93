"""Foreign-key cascades for ``sync``, applied from the parent's change (docs/sync.md).

InnoDB runs ``ON DELETE/UPDATE CASCADE`` and ``SET NULL`` itself: the binary log holds the
parent's row change only. ``sync`` applies the rule from three things it has: the parent's
change (its before and after row), the constraint's rule, and the child rows Redis already
holds as of the log position — found through the child's index or reference set on exactly
the foreign key's columns, each row read back from its hash. Redis is read *before* the
group's commands are sent, so every read is overlaid with what the group has planned so far
(``Delta.pending_members`` / ``pending_hash``): the rows are those of the moment of the
parent's change. Each child change is then planned like any logged change (``TableDelta``),
and followed in turn (a cascade of a cascade): plan/cascade_apply.py ``Cascades``.

A child whose row cannot be read back from its hash, or with no index or reference on exactly
the foreign key's columns, keeps row images and a SET per value beside its keys
(plan/row_images.py): its rows are then read from those (``Cascades._images``).

A parent table left out of the mapping, or in another database of the server (keyed
``database.table``), is read from the log all the same, for its cascades only
(plan/cascade_parents.py): ``watched`` names its columns the foreign keys reference, the
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
a parent whose own rows change by a rule the log does not carry (``filtered``), where the
table keeps no images of the rows its filter leaves out (a nested table, a sharded
source's: elsewhere they are kept, plan/row_images.py, and found like any other); a
separator that may occur in a composite's values next to a column ``SET NULL`` empties; a
Redis Cluster target (a replay of a half-applied group could read children of a later state).
The child's primary key may be text: the members are read back (``TableLayout.read_joined``),
never compared.

A MySQL that runs foreign keys in its SQL layer (``innodb_native_foreign_keys=OFF``, 9.7's
default) writes the cascaded child rows to the log itself, before the parent's row: with
``logged`` nothing is applied from the parent's change and nothing refused for it.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from migrator.errors import MigratorError
from migrator.mapping.cascades import (
    COLLATION_FIX,
    Fit,
    Unlogged,
    fit,
    inexact_key,
    reaching,
    trx_versioned,
)
from migrator.mapping.filter_rules import admitting
from migrator.mapping.kinds import FLOATS
from migrator.mapping.resolve import Resolved
from migrator.mapping.schema import ForeignKey
from migrator.plan.batch import Row
from migrator.plan.cascade_parents import UNMAPPED_FIX, Parents, elsewhere, unmapped, watched
from migrator.plan.planner import KeyFn, TablePlan
from migrator.plan.row_images import by_prefix, images_of, indexed, unreadable

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
#: why a table keeps no images of the rows its filter leaves out (filter_rules.keeps_left_out)
UNKEPT = (
    "and, nested (nest:) or of a sharded source (sources:), it keeps no images of the rows "
    "its filter leaves out"
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
    #: per foreign-key column, whether it is a FLOAT or DOUBLE, whose zero a child may hold
    #: as ``-0`` or ``0`` (MySQL's = finds both): both are looked up; () when none is
    zeros: tuple[bool, ...] = ()
    #: per foreign-key column, how a parent's new value an ``ON UPDATE CASCADE`` writes into
    #: it is stored (mapping/cascades.py ``Fit``: a CHAR's trailing spaces cut, a VARCHAR
    #: child of a CHAR padded); () when every value is stored as it is
    fits: tuple[Fit | None, ...] = ()

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
    key = fk.parent_key  # ``database.table`` for another database's (never mapped)
    if fk.parent_database:
        found = elsewhere(fk, (parents or {}).get(key), plans)
        if found[0]:
            return found
    if key not in plans and key in failed:
        why = f"the parent table {fk.parent} did not pass validation (see its error): fix it first"
        return why, FIX
    why = _mapped(fk, child, plans, cluster)
    if why:
        return why, NONE_FIX if child.table.kind == "none" else FIX
    kept = filtered(fk, child.resolved, plans)
    if kept[0]:
        return kept
    mapped = plans.get(key)
    parent = mapped.resolved.schema if mapped is not None else (parents or {}).get(key)
    if mapped is None:
        why = unmapped(fk, parent)
        if why:
            return why, UNMAPPED_FIX
    return inexact_key(fk, child.resolved.schema, parent, child.weighed), COLLATION_FIX


def _mapped(fk: ForeignKey, child: TablePlan, plans: dict[str, TablePlan], cluster: bool) -> str:
    """Why the mapping does not keep what the rule needs ("" when it does)."""
    parent = plans.get(fk.parent_key)
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
    the filter left out can come in only where ``admitting`` says (mapping/filter_rules.py).
    Such a table keeps the images of the rows its filter leaves out (``left_out_images``), as
    does a filtered parent whose own rows change by a rule the log does not carry: their rows
    are found whole, and each is filtered again. Refused where they are not kept (``nest:``,
    ``sources:``): Redis does not hold those rows, nor (for a parent) their children."""
    where = child.table.where
    rule = "" if where is None else admitting(where, fk.columns, fk.unlogged_rules)
    if where is not None and rule and not child.left_out_images:
        read = ", ".join(c for c in fk.columns if c in where.columns)
        how = ("can keep a row whose foreign key is NULL" if rule.endswith("SET NULL")
               else "compares the foreign key's values")  # fmt: skip
        why = (
            f"the child's row filter (where:) reads the foreign key's columns ({read}) and "
            f"{how}: its {rule} can bring into it a row Redis does not hold, {UNKEPT}"
        )
        return why, WHERE_FIX
    parent = plans.get(fk.parent_key)
    if parent is None or parent.table.where is None or parent.resolved.left_out_images:
        return "", ""  # (its left-out rows' images are kept: plan/row_images.py)
    own = reaching(fk, parent.resolved.schema)
    if own is None:
        return "", ""
    name = f"{own.name} " if own.name else ""
    why = (
        f"the parent table {fk.parent} has a row filter (where:) and its own rows change by "
        f"its foreign key {name}-> {own.parent} {', '.join(own.unlogged_rules)}, which the "
        f"binary log does not carry, {UNKEPT}: the children of the rows it leaves out are "
        "unknown"
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
            what += f" -> {fk.parent_key} {', '.join(fk.unlogged_rules)}"
            if why:
                refused.append(Unlogged(name, what, f"sync cannot apply it exactly: {why}", fix))
                continue
            weigh = _weigh(fk, child)
            whole = any(weigh) or child.resolved.left_out_images  # every row: by its images
            ix = None if whole else next(
                (i for i in child.resolved.index_sets() if set(i.columns) == set(fk.columns)),
                None)  # fmt: skip
            set_key = None if ix is None else child.key_fn(child.index_template(ix.columns))
            images = images_of(child)
            by = None
            if ix is None and images is not None:
                by = by_prefix(child.resolved, tuple(fk.columns))
                assert any(p == by for p, _ in images.by)
            zeros = tuple(child.resolved.schema.column(c).kind in FLOATS for c in fk.columns)
            columns = child.resolved.schema
            fits = tuple(fit(columns.column(c), t) for c, t in zip(fk.columns, fk.parent_types))
            mapped = plans.get(fk.parent_key)
            pos = mapped.pos if mapped else {c: i for i, c in enumerate(outside[fk.parent_key])}
            rules.append(
                Cascade(
                    fk,
                    fk.parent_key,
                    name,
                    tuple(pos[c] for c in fk.parent_columns),
                    tuple(child.pos[c] for c in fk.columns),
                    set_key,
                    by,
                    None if images is None or not images.whole else images.key,
                    weigh if any(weigh) else (),
                    zeros if any(zeros) else (),
                    fits if any(fits) else (),
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
