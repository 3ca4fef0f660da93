"""``migrator validate``: check a mapping file, and against the live schema if a source is known."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from migrator.commands.validate_shards import check_shards
from migrator.errors import MappingError, MappingErrors, MigratorError
from migrator.mapping.loader import load_mapping
from migrator.mapping.model import Mapping
from migrator.mapping.resolve import Resolved, resolve
from migrator.mapping.schema import Schema
from migrator.mapping.validate import (
    Problem,
    ValidateReport,
    check_schema,
    plural,
    problem_from,
)
from migrator.plan.cascade import followable
from migrator.plan.cascade_parents import outside
from migrator.plan.collisions import check_collisions
from migrator.plan.layout import TableLayout
from migrator.plan.nesting import trees
from migrator.plan.planner import TablePlan
from migrator.plan.search import DATABASE_FIX, database_of, definitions, wrong_database
from migrator.source.foreign_keys import cascades_logged, with_others
from migrator.source.mysql import Source
from migrator.source.selects import shared_keys_query
from migrator.source.where import condition
from migrator.store.cluster import SCHEMES
from migrator.sync.nesting import cascade_plans
from migrator.sync.nesting import refuse as refuse_nesting
from migrator.urls import mask


def validate(
    path: str | os.PathLike[str],
    source: str | None = None,
    environ: Any = None,
    for_sync: bool = False,
) -> ValidateReport:
    """Check the mapping file, and against the live schema when a source is known:
    ``source``, else ``$MIGRATOR_SOURCE_URL``, else the mapping's own ``source``.
    ``for_sync``: what only ``sync`` refuses is an error too (exit 2), not a note.
    Raises ConnectError (exit 3) when a source is given but cannot be reached."""
    report = _checked(path, source, environ)
    if for_sync:  # the same problems, judged for sync: every refusal of it is an error
        report.problems = [
            dataclasses.replace(p, level="error") if p.brief else p for p in report.problems
        ]
    return report


def _checked(path: str | os.PathLike[str], source: str | None, environ: Any) -> ValidateReport:
    report = ValidateReport(str(path))
    try:
        mapping = load_mapping(path, environ=environ)
    except MappingErrors as e:
        report.problems += [problem_from(x) for x in e.errors]
        return report
    except MappingError as e:
        report.problems.append(problem_from(e))
        return report
    report.tables = len(mapping.tables)
    env = os.environ if environ is None else environ
    target = env.get("MIGRATOR_TARGET_URL") or mapping.target
    report.problems += search_database(mapping, target)
    report.problems += cluster_streams(mapping, target)
    if mapping.sources:
        if source:
            report.problems.append(Problem(
                "error", "--source names one server, but the mapping lists the shards of a "
                "sharded source", "sources", mapping.file, mapping.line_of("sources"),
                "drop --source: validate checks every shard the mapping lists",
            ))  # fmt: skip
            return report
        return check_shards(report, mapping, against)
    url = source or env.get("MIGRATOR_SOURCE_URL") or mapping.source
    if not url:
        return report
    with Source(url) as src:
        report.source = mask(url)
        report.problems += against(mapping, src, src.schema())
    return report


def against(mapping: Mapping, src: Source, schema: Schema) -> list[Problem]:
    """The problems of the mapping against one server's live schema."""
    out = check_schema(mapping, schema)
    out += check_collisions(mapping, schema)
    out += shared_keys(mapping, schema, src, out)
    out += cascades(mapping, schema, cascades_logged(src.raw_connection()), src)
    out += searches(mapping, schema)
    out += nestings(mapping, schema, cascades_logged(src.raw_connection()))
    return out


def search_database(mapping: Mapping, target: str | None) -> list[Problem]:
    """``search:`` with a target in a database other than 0, which the query engine cannot
    index (migrate, verify and sync refuse it before they write)."""
    searched = [t.name for t in mapping.tables if t.search is not None]
    wrong = wrong_database(database_of(target), searched) if target else None
    if not wrong:
        return []
    line = mapping.line_of("target") if mapping.target else None
    return [Problem("error", wrong, "target", mapping.file, line, DATABASE_FIX)]


def cluster_streams(mapping: Mapping, target: str | None) -> list[Problem]:
    """Change streams with a ``redis+cluster://`` target, which sync refuses (a warning: migrate
    and verify are not concerned; a ``redis://`` URL naming a cluster node is seen by sync)."""
    streamed = [t.name for t in mapping.tables if t.streams is not None]
    if not target or not streamed or target.split("://", 1)[0].lower() not in SCHEMES:
        return []
    path = f"tables.{streamed[0]}.streams"
    return [Problem(
        "warning", f"sync refuses change streams on a Redis Cluster ({streamed[0]}): the "
        "entries, the rows and the position would not share one MULTI/EXEC", path, mapping.file,
        mapping.line_of(path), "sync to a single Redis server, or drop streams:",
        "sync refuses change streams on a Redis Cluster",
    )]  # fmt: skip


def searches(mapping: Mapping, schema: Schema) -> list[Problem]:
    """A ``search:`` the table's columns cannot make an index of (plan/search.py)."""
    out = []
    tables: dict[str, Resolved] = {}  # those that resolve, nested children among them
    for t in mapping.tables:
        try:
            tables.update((r.name, r) for r in resolve(mapping, schema, [t.name]))
        except MigratorError:
            continue
    for table in mapping.tables:
        if table.search is None:
            continue
        try:
            definitions(resolve(mapping, schema, [table.name]), mapping, list(tables.values()))
        except MappingError as e:
            if e.path.endswith(".search") or ".search.vector." in e.path:
                out.append(problem_from(e))
        except MigratorError:
            continue
    return out


def nestings(mapping: Mapping, schema: Schema, logged: bool = False) -> list[Problem]:
    """A ``nest:`` that cannot be (plan/nesting.py: a parent not mapped as a document, a
    cycle, no foreign key), and a warning for a tree sync refuses (sync/nesting.py)."""
    nested = [t for t in mapping.tables if t.nest is not None]
    if not nested:
        return []
    try:
        layouts = {r.name: TableLayout(r) for r in resolve(mapping, schema)}
    except MigratorError:
        return []  # problems of their own
    try:
        tops = trees(layouts)
    except MigratorError as e:
        path, _, message = e.message.partition(": ")
        if not path.startswith("tables."):
            path, message = "", e.message
        return [Problem("error", message, path, mapping.file, mapping.line_of(path), e.hint)]
    try:
        refuse_nesting(tops, cluster=False, logged=logged, schemas=schema.tables)
    except MigratorError as e:
        path, _, message = e.message.partition(": ")
        if not path.startswith("tables."):
            path, message = "", e.message
        return [Problem("warning", f"sync refuses these nested documents: {message}", path,
                        mapping.file, mapping.line_of(path), e.hint,
                        "sync refuses these nested documents")]  # fmt: skip
    return []


def cascades(
    mapping: Mapping, schema: Schema, logged: bool = False, src: Source | None = None
) -> list[Problem]:
    """A warning per reason sync refuses a mapped table (plan/cascade.py): the child of a
    foreign key whose CASCADE or SET NULL sync cannot apply exactly from the parent's change,
    or transaction-precise system versioning. ``src``: the server, whose other databases'
    parent tables are read from it (none read without it)."""
    plans, failed = {}, set()
    for table in mapping.tables:
        try:
            plans.update({r.name: TablePlan(r) for r in resolve(mapping, schema, [table.name])})
        except MigratorError:
            failed.add(table.name)  # problems of its own
    try:  # nested tables without keys of their own: sync/nesting.py follows their nesting
        plans = cascade_plans(plans, trees(plans))
    except MigratorError:
        pass  # nestings() reports it
    out = []
    mapped = [t.name for t in mapping.tables]
    parents = outside(schema.tables, mapped)
    if src is not None and not logged:
        fks = [fk for p in plans.values() for fk in p.resolved.schema.foreign_keys]
        parents = with_others(src, parents, fks, mapped)
    for u in followable(plans, logged=logged, failed=failed, parents=parents)[1]:
        where = f"tables.{u.table}"
        message = f"sync refuses this table: {u.what} ({u.why})"
        line = mapping.line_of(where)
        brief = f"sync refuses this table: {u.what}"
        out.append(Problem("warning", message, where, mapping.file, line, u.fix, brief))
    return out


def shared_keys(
    mapping: Mapping, schema: Schema, src: Source, problems: list[Problem]
) -> list[Problem]:
    """For each declared primary_key MySQL does not keep unique (validate warns of it): the
    keys that rows share today, and the SQL that lists them."""
    out = []
    for table in mapping.tables:
        path = f"tables.{table.name}"
        ts = schema.tables.get(table.name)
        pk = table.primary_key
        if ts is None or pk is None or table.kind == "none" or ts.is_unique(pk):
            continue
        if any(p.level == "error" and p.path.startswith(path) for p in problems):
            continue  # unknown columns: nothing to count with
        kept = None if table.where is None else condition(table.where, ts)
        keys, rows = src.shared_keys(table.name, [ts.column(c) for c in pk], kept)
        if keys:
            where = f"{path}.primary_key"
            out.append(
                Problem(
                    "warning",
                    f"{plural(keys, 'key')} of {table.name} shared by several rows today "
                    f"({plural(rows, 'row')} beyond one per key would be overwritten)",
                    where,
                    mapping.file,
                    mapping.line_of(where),
                    f"list them with: {shared_keys_query(table.name, pk)}",
                )
            )
    return out
