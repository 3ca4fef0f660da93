"""Parent tables a mapping leaves out, read from the log for their children's cascades
only (plan/cascade.py, docs/sync.md#foreign-key-cascades-and-the-tables-sync-refuses).

Where the server runs a foreign key's rule without logging the child rows it changes, sync
needs the parent's row change, mapped or not: ``watched`` names the columns it reads of each
such parent (the ones the foreign keys reference, in the table's order: what
``Cascade.parent_pos`` points into), and ``unmapped`` why a parent left out cannot be followed
(a cascade of a cascade through it, statements in the log). Pure: works on the schema.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from migrator.mapping.cascades import TRX_WHY, reaching, trx_versioned
from migrator.mapping.schema import ForeignKey, TableSchema

UNMAPPED_FIX = (
    "map the parent table too (sync then follows its rows' own rules in turn; as: none with "
    "a references entry on its own foreign key writes no key per row); or make one "
    "of the two rules RESTRICT, or leave the table out of the mapping for sync (migrate and "
    "verify are not affected)"
)
OTHER_FIX = (
    "make the rule RESTRICT, or leave the table out of the mapping for sync (migrate and "
    "verify are not affected)"
)
Parents = Mapping[str, TableSchema]  # the source's tables by name (unmapped parents' schemas)


def outside(tables: Parents, mapped: Collection[str]) -> dict[str, TableSchema]:
    """The source's tables the mapping leaves out (the ``parents`` of ``followable``)."""
    return {n: t for n, t in tables.items() if n not in mapped}


def watched(plans: Mapping[str, Any], parents: Parents) -> dict[str, tuple[str, ...]]:
    """The parent tables the mapping leaves out whose row changes sync reads for the rules of
    their mapped children's foreign keys: the columns those keys reference, in the table's
    order (what ``Cascade.parent_pos`` points into)."""
    wanted: dict[str, set[str]] = {}
    for child in plans.values():
        for fk in child.resolved.schema.foreign_keys:
            if fk.unlogged_rules and fk.parent not in plans and fk.parent in parents:
                wanted.setdefault(fk.parent, set()).update(fk.parent_columns)
    return {
        name: tuple(c.name for c in parents[name].columns if c.name in cols)
        for name, cols in sorted(wanted.items())
    }


def unmapped(fk: ForeignKey, parent: TableSchema | None) -> str:
    """Why the rows of a parent the mapping leaves out cannot be followed for ``fk`` ("" when
    they can): unknown, logged as statements, or changed by a rule of their own that the log
    does not carry and that reaches the referenced columns (a cascade of a cascade)."""
    if parent is None or any(c not in parent.column_names for c in fk.parent_columns):
        return (
            f"the parent table {fk.parent} is not read from the log (not in the source's "
            "schema, or a nested table with as: none)"
        )
    if trx_versioned([parent]):
        return f"the parent table {fk.parent} is not in the mapping and {TRX_WHY}"
    own = reaching(fk, parent)
    if own is None:
        return ""
    name = f"{own.name} " if own.name else ""
    return (
        f"the parent table {fk.parent} is not in the mapping and its own rows change by its "
        f"foreign key {name}-> {own.parent} {', '.join(own.unlogged_rules)}, which the binary "
        "log does not carry: a cascade of a cascade through a table sync does not hold"
    )
