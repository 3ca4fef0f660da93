"""What sync refuses at start in nesting trees (``nest:``; docs/mapping.md#nested-children):
what it cannot keep exact from the binary log (sync/nesting.py), named with the fix."""

from __future__ import annotations

from collections.abc import Mapping

from migrator.errors import MigratorError
from migrator.mapping.cascades import inexact_key, reaching
from migrator.mapping.filter_rules import admitting
from migrator.mapping.kinds import FLOATS
from migrator.mapping.schema import ForeignKey, TableSchema
from migrator.plan.nesting import Level
from migrator.plan.nesting_side import sides, walk

FIX = "keep these documents current with migrate --replace and verify --fix"


def nesting_fk(level: Level, parent: Level) -> ForeignKey:
    cols = tuple(level.layout.select[i] for i in level.by)
    schema = level.layout.resolved.schema
    return next(fk for fk in schema.foreign_keys if fk.parent == parent.name and
                tuple(fk.columns) == cols)  # fmt: skip


def refuse(
    tops: dict[str, Level],
    cluster: bool,
    logged: bool,
    schemas: Mapping[str, TableSchema] | None = None,
) -> None:
    """Raise (exit 2) naming what sync cannot keep exact in these nesting trees, and the fix
    (``schemas``: the source's tables, the other parents of the trees' foreign keys)."""
    for top in tops.values():
        sides(top)  # a foreign key to other columns than the parent's primary key
        if cluster:
            raise MigratorError(
                f"sync cannot keep nested documents ({top.name}) on a Redis Cluster: a "
                "document and the rows it is rebuilt from live in different slots",
                f"sync to a single Redis server, or {FIX}",
            )
        if top.layout.table.expire is not None:
            raise MigratorError(
                f"tables.{top.name}: sync does not keep nested documents of a table with "
                "expire: (the rows kept beside the documents have no TTL, and no sweep removes "
                "the rows of an expired document's tree)",
                f"drop expire: from {top.name}, or {FIX}",
            )
        for level in walk(top) if not logged else ():
            lay = level.layout
            own = [nesting_fk(level, p) for p in walk(top) if level in p.children]
            for fk in lay.resolved.schema.foreign_keys:
                if any(fk is o for o in own) or not fk.unlogged_rules:
                    continue
                why = unfollowed(level, fk, (schemas or {}).get(fk.parent))
                if why:
                    raise MigratorError(
                        f"tables.{level.name}: its foreign key {fk.name} -> {fk.parent} "
                        f"{', '.join(fk.unlogged_rules)} changes rows of a nested document "
                        f"without a trace in the binary log, and sync cannot apply it: {why}",
                        f"make the rule RESTRICT, or {FIX}",
                    )


def unfollowed(level: Level, fk: ForeignKey, parent: TableSchema | None) -> str:
    """Why sync cannot apply the unlogged rule of a nested table's other foreign key ``fk``
    to the rows kept beside the documents ("" when it can: sync/nesting.py ``_others``)."""
    lay, schema = level.layout, level.layout.resolved.schema
    if level.nest is None or lay.table.kind != "none":
        return "the rows of a top table or of a nested table with keys of its own"
    if lay.resolved.shard:
        return "over a sharded source (the kept rows of every shard share the SETs per value)"
    if "SET DEFAULT" in " ".join(fk.unlogged_rules):
        return "InnoDB has no SET DEFAULT"
    if any(c not in lay.pos for c in fk.columns):
        return f"its columns are not read (add {', '.join(fk.columns)} to columns)"
    if parent is None or any(c not in parent.column_names for c in fk.parent_columns):
        return f"the parent table {fk.parent} is not read from the log"
    if any(schema.column(c).kind in FLOATS for c in fk.columns):
        return "a FLOAT or DOUBLE key ('-0' = '0' in MySQL)"
    inexact = inexact_key(fk, schema, parent, keyed=())
    if inexact:
        return f"the kept rows are filed by the bytes of its values, and {inexact}"
    if (own := reaching(fk, parent)) is not None:
        return (
            f"the rows of {fk.parent} change by its own foreign key {own.name} -> "
            f"{own.parent} {', '.join(own.unlogged_rules)}, which the log does not carry"
        )
    where = lay.table.where
    if where is not None and not level.whole and admitting(where, fk.columns, fk.unlogged_rules):
        return "its rule can bring a row its where: leaves out (not kept) into it"
    return ""
