"""Parent tables a mapping leaves out, read from the log for their children's cascades
only (plan/cascade.py, docs/sync.md#foreign-key-cascades-and-the-tables-sync-refuses).

Where the server runs a foreign key's rule without logging the child rows it changes, sync
needs the parent's row change, mapped or not: ``watched`` names the columns it reads of each
such parent (the ones the foreign keys reference, in the table's order: what
``Cascade.parent_pos`` points into), and ``unmapped`` why a parent left out cannot be followed
(a cascade of a cascade through it, statements in the log). A parent in another database of
the server is read as one left out, keyed ``database.table`` (``ForeignKey.parent_key``):
``elsewhere`` says why it cannot be (its schema unreadable, a source's table of that very
name). Pure: works on the schema.
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
ASIDE = "make the rule RESTRICT, or leave the table out of the mapping for sync (migrate and "
ASIDE += "verify are not affected)"
#: the source's tables by name (unmapped parents' schemas), another database's by
#: ``database.table`` (source/foreign_keys.py ``with_others``)
Parents = Mapping[str, TableSchema]


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
            key = fk.parent_key
            if fk.unlogged_rules and key not in plans and key in parents:
                wanted.setdefault(key, set()).update(fk.parent_columns)
    return {
        name: tuple(c.name for c in parents[name].columns if c.name in cols)
        for name, cols in sorted(wanted.items())
    }


def located(key: str, parent: TableSchema) -> tuple[str, str] | None:
    """(database, table) of a parent keyed ``database.table`` (another database's), None for
    a table of the source's own database (keyed by its name)."""
    if key == parent.name:
        return None
    return key[: -len(parent.name) - 1], parent.name


def elsewhere(
    fk: ForeignKey, parent: TableSchema | None, mapped: Collection[str]
) -> tuple[str, str]:
    """Why a parent in another database cannot be read from the log (("", "") when it can),
    and the fix: a table of the source's database is named ``database.table`` too, or the
    account cannot read the other database's schema."""
    key, db = fk.parent_key, fk.parent_database
    if key in mapped or (parent is not None and parent.name != fk.parent):
        why = (
            f"the parent table {fk.parent} of the database {db} and the source's table named "
            f"'{key}' cannot be told apart"
        )
        return why, f"rename the source's table '{key}'; or {ASIDE}"
    if parent is None:
        why = (
            f"the schema of the parent table {key} cannot be read (no such table, or the "
            f"account lacks SELECT on the database {db})"
        )
        return why, f"GRANT SELECT ON `{db}`.* TO the source's account; or {ASIDE}"
    return "", ""


def unmapped(fk: ForeignKey, parent: TableSchema | None) -> str:
    """Why the rows of a parent the mapping leaves out cannot be followed for ``fk`` ("" when
    they can): unknown, logged as statements, or changed by a rule of their own that the log
    does not carry and that reaches the referenced columns (a cascade of a cascade)."""
    key = fk.parent_key
    if parent is None or any(c not in parent.column_names for c in fk.parent_columns):
        return (
            f"the parent table {key} is not read from the log (not in the source's "
            "schema, or a nested table with as: none)"
        )
    if trx_versioned([parent]):
        return f"the parent table {key} is not in the mapping and {TRX_WHY}"
    own = reaching(fk, parent)
    if own is None:
        return ""
    name = f"{own.name} " if own.name else ""
    return (
        f"the parent table {key} is not in the mapping and its own rows change by its "
        f"foreign key {name}-> {own.parent} {', '.join(own.unlogged_rules)}, which the binary "
        "log does not carry: a cascade of a cascade through a table sync does not hold"
    )
