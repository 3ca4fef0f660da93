"""sync's schema tracking: each DDL statement that names a mapped table is decided by its
effect on the mapping (``migrator.plan.schema_change``), from the table's columns as its rows
were logged until then (the table-map metadata of ``binlog_row_metadata=FULL``) and as the
server has them after the statement. Rows are always decoded with the table map they were
logged with (``source.binlog``), so an applied change needs no new decoder.

A change that alters what the mapping writes for rows already in Redis is handed to the
follower's re-snapshot hook (``Resnapshot``: the table and why). ``sync`` gives none: the
follower queues the table's online re-snapshot (sync/online_snapshot.py), stores the
position after the statement and raises ``Replan``, and sync follows on with the mapping
resolved again. ``resnapshot_by_hand`` stops sync (exit 1) before the statement instead,
keeping the stored position."""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import suppress
from typing import Any

from migrator.mapping.model import Mapping
from migrator.mapping.schema import TableSchema
from migrator.plan.cascade_parents import located
from migrator.plan.keyspace import KeyPattern, KeySpace
from migrator.plan.planner import TablePlan
from migrator.plan.schema_change import (
    Effect,
    Shape,
    TableUse,
    decide,
    kind_of,
    table_use,
    unlogged,
)
from migrator.reports import SchemaChanged
from migrator.source.binlog.reader import SchemaChange
from migrator.source.binlog.reconnect import surfaced
from migrator.source.mysql import Source
from migrator.store.keys import remove_owned

#: the follower's re-snapshot hook: ``(table, reason)``; it returns once the table's
#: re-snapshot is under way (the stream goes on), or raises to stop sync
Resnapshot = Callable[[str, str], None]


def resnapshot_by_hand(table: str, reason: str) -> None:
    """The default hook: re-snapshotting one table while following is not connected here,
    so sync stops (exit 1) before the statement; the stored position stays where it is."""
    raise SchemaChanged(
        f"table '{table}' needs a re-snapshot: {reason}; sync stopped before the statement "
        "(everything up to it is applied, the stored position kept)",
        f"re-snapshot that table only: 'migrator sync MAPPING --resnapshot {table}'; or "
        "'migrator sync MAPPING --reload' removes the mapping's keys and loads every table",
    )


class Replan(Exception):
    """Raised by the follower once a table's re-snapshot is queued and the position after
    the DDL is stored: sync resolves the mapping again against the live schema and starts a
    new follower (a new log reader) from that position, so no row after the statement is
    decoded or packed with the table's old columns."""

    def __init__(self, table: str) -> None:
        super().__init__(table)
        self.table = table


def shape_of(schema: TableSchema) -> Shape:
    return tuple((c.name, c.column_type) for c in schema.columns)


Known = dict[str, tuple[Shape, tuple[str, ...]]]  # per table: its columns and primary key


def columns_field(known: Known) -> dict[str, str]:
    """The ``columns`` field of the sync state: the tables' columns as of its position."""
    return {"columns": json.dumps({n: [list(map(list, s)), list(k)]
                                   for n, (s, k) in known.items()})}  # fmt: skip


def loaded_columns(schemas: list[TableSchema]) -> dict[str, str]:
    """The ``columns`` field stored with a snapshot's position: the columns it was read with,
    so the first DDL after it is judged against them, not the columns at the next start."""
    return columns_field({s.name: (shape_of(s), tuple(s.primary_key)) for s in schemas})


class SchemaWatch:
    """The mapped tables' columns as sync knows them, and the effect of each DDL."""

    def __init__(
        self,
        mapping: Mapping,
        plans: dict[str, TablePlan],
        ctl: Source,
        stored: str | None,
        parents: dict[str, tuple[TableSchema, tuple[str, ...]]] | None = None,
    ) -> None:
        self.mapping, self.plans, self.ctl = mapping, plans, ctl
        self.uses: dict[str, TableUse] = {n: table_use(mapping, p) for n, p in plans.items()}
        # the columns as of the stored position (kept with it in the sync state since the
        # first group); without them, as the server had them at start
        self.known: Known = {
            n: (shape_of(p.resolved.schema), p.resolved.schema.primary_key)
            for n, p in plans.items()
        }
        #: parent tables the mapping leaves out, read for their foreign keys' rules only
        self.parents = set(parents or {})
        #: (database, table) of a parent in another database (keyed ``database.table``)
        self.elsewhere = {n: located(n, ts) for n, (ts, _) in (parents or {}).items()}
        for n, (ts, cols) in (parents or {}).items():
            self.uses[n] = parent_use(n, cols)
            self.known[n] = (shape_of(ts), ts.primary_key)
        self.unsaved = True
        with suppress(ValueError, TypeError, KeyError):
            for n, (cols, key) in json.loads(stored or "{}").items():
                if n in self.known:
                    self.known[n] = (tuple((a, b) for a, b in cols), tuple(key))
                    self.unsaved = False

    def fields(self, always: bool = False) -> dict[str, str]:
        """The ``columns`` field for the next position write: the first time, or ``always``
        (after an applied DDL)."""
        if not (self.unsaved or always):
            return {}
        self.unsaved = False
        return columns_field(self.known)

    def effect(self, ddl: SchemaChange) -> Effect:
        table = ddl.table
        if ddl.missing:
            return unlogged(self.uses[table], ddl.missing)
        known, key = self.known[table]
        types = dict(known)
        # the columns as the table's rows were logged until now (the last table map), with
        # the types sync last knew for them
        logged = ddl.logged if ddl.logged is not None else tuple(types)
        before = tuple((n, types.get(n, "?")) for n in logged)
        ctl, there = self.ctl, self.elsewhere.get(table)
        database, name = there or (str(ctl.url.database or ""), table)
        live = surfaced(lambda: ctl.schema([name], database if there else "").tables.get(name),
                        "reading the schema after a DDL", ctl.close)  # fmt: skip
        after = shape_of(live) if live is not None else None
        key_after = live.primary_key if live is not None else ()
        kind = kind_of(ddl.query, name, database, ddl.schema)
        found = decide(kind, self.uses[table], before, after, key, key_after)
        if table in self.parents:
            found = parent_effect(found, table)
        if found.action != "stop" and after is not None:
            self.known[table] = (after, tuple(key_after))
        return found

    def truncate(self, client: Any, table: str) -> int:
        """Remove the table's keys (its counter stays: sync never lowers one)."""
        space = KeySpace(list(self.plans.values()), self.mapping.kept())

        def counter(p: KeyPattern | None) -> bool:
            return p is not None and p.what == "counter"

        return remove_owned(client, space, [table], keep=counter)


def parent_use(name: str, columns: tuple[str, ...]) -> TableUse:
    """How sync uses a parent table the mapping leaves out: ``columns``, the ones its
    children's cascading foreign keys reference (plan/cascade.py)."""
    place = f"the mapping's children of {name} (its cascading foreign keys)"
    return TableUse(name, frozenset(columns), False, (), place)


def parent_effect(found: Effect, table: str) -> Effect:
    """A DDL of a parent table the mapping leaves out (read for its cascades only): nothing
    of it is in Redis, so a TRUNCATE removes nothing; a referenced column retyped stops."""
    if found.action == "truncate":
        return Effect("apply", f"TRUNCATE {table}: read for its foreign keys' rules only, "
                      "nothing to remove")  # fmt: skip
    if found.action == "resnapshot":
        return Effect("stop", found.what + " (read for its foreign keys' rules)", found.places)
    return found


def stopped(ddl: SchemaChange, effect: Effect) -> SchemaChanged:
    """The exit-1 error of a DDL that sync cannot apply: what, where, and the fix."""
    if not ddl.query:  # rows logged without a mapped column
        return SchemaChanged(
            f"table '{ddl.table}' changed at {ddl.position}: {effect.what}; sync stopped before "
            "them (everything up to them is applied)",
            "the mapping no longer fits: change " + "; ".join(effect.places) + ", then "
            "'migrator sync MAPPING --reload' removes the mapping's keys and loads a new snapshot",
        )
    query = short_query(ddl.query)
    head = (
        f"table '{ddl.table}' changed at {ddl.position}: {query}; {effect.what}; sync stopped "
        "before it (everything up to it is applied)"
    )
    return SchemaChanged(
        head,
        "the mapping no longer fits: change " + "; ".join(effect.places) + " (run 'migrator "
        "validate MAPPING' against the source), then 'migrator sync MAPPING --reload' removes "
        "the mapping's keys and loads a new snapshot",
    )


def short_query(query: str) -> str:
    """A statement on one line, cut at 80 characters."""
    one = " ".join(query.split())
    return one if len(one) <= 80 else one[:77] + "..."
