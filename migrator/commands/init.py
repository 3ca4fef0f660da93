"""``migrator init``: draft a mapping from the live schema (and what its rows say)."""

from __future__ import annotations

from migrator.errors import MigratorError
from migrator.mapping.loader import parse_mapping
from migrator.mapping.profile import questions
from migrator.mapping.resolve import resolve
from migrator.mapping.scaffold import Draft, draft
from migrator.plan.planner import TablePlan
from migrator.source.distinct import count_distinct
from migrator.source.mysql import Source
from migrator.source.probe import rejected_rows


def init(source: str, tables: list[str] | None = None) -> Draft:
    """Read the live schema at ``source``, count what the draft needs to know of the rows
    (``mapping.profile``: one scan per table asked about), and draft its mapping. Where the
    draft would reject rows (a separator inside a value of an ambiguous composite under the
    default ``escape: reject``), the draft says how many per table and sets
    ``escape: backslash`` on those tables alone (the other tables' keys stay as they are)."""
    with Source(source) as src:
        schema = src.schema()
        names = [n for n in schema.tables if not tables or n in tables]
        asked = {n: questions(schema.tables[n]) for n in names}
        profile = count_distinct(src.engine, asked)
        d = draft(schema, source=source, tables=tables, profile=profile)
        if d.mapped:
            mapping = parse_mapping(d.render())
            for t in d.mapped:
                try:
                    (r,) = resolve(mapping, schema, [t.name])
                except MigratorError:  # validate will say what is wrong with it
                    continue
                n = rejected_rows(src, TablePlan(r))
                if n:
                    d.rejects[r.name] = n
        return d
