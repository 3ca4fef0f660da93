"""Two tables or structures that write the same keys (issue 10 item 5a), found before any
row is read: every pair of key patterns the mapping's tables write (``keyspace.table_patterns``)
is checked for a key both can render (``mapping.keyspace.example``), with each placeholder
holding what its column's values can hold (integers: digits; text: anything as the one
varying column of a composite, which is written with its separators; else anything but the
separator's characters, which ``escape`` rejects or escapes in a composite; a single-value
key's text is taken to hold none, a limit docs/mapping.md states). Run by ``validate`` and,
for its errors, before every command.

* **error**: the two patterns are the same but for their placeholders' names, which hold
  the same kinds of values (two tables keyed ``item:{id}``), or the same literal key: they
  write the same keys whenever the values meet.
* **warning**: other patterns that some values make meet (``t:{a}:{b}`` and the unique hash
  ``t:uniques:email`` for the row ``('uniques', 'email')``; a unique string ``login:{name}:id``
  beside ``as: columns`` keys ``login:{id}:id`` for a name made of digits), with an example
  key; and neighbouring placeholders with no separator between them (``{a}-{b}``).
"""

from __future__ import annotations

from collections.abc import Sequence

from migrator.errors import MigratorError
from migrator.mapping.keyspace import (
    ANY,
    column_chars,
    example,
    gaps_without_separator,
    may_be_empty,
    same_shape,
)
from migrator.mapping.model import Mapping, Template
from migrator.mapping.resolve import Resolved, resolve
from migrator.mapping.schema import Schema
from migrator.mapping.validate import Level, Problem
from migrator.plan.keyspace import KeyPattern, table_patterns
from migrator.plan.planner import TablePlan

#: structure name -> where it sits in a table's mapping (for the problem's path)
WHERE = {
    "hash": "key", "columns": "key", "document": "key", "unique-string": "unique",
    "unique": "unique",
    "index": "indexes", "sorted": "sorted", "set": "sets", "latest": "latest",
    "counter": "counter", "vector": "vector_sets",
}  # fmt: skip


def check_collisions(mapping: Mapping, schema: Schema) -> list[Problem]:
    """``collisions`` of every table that resolves against the schema (the others have
    problems of their own)."""
    resolved = []
    for table in mapping.tables:
        try:
            resolved += resolve(mapping, schema, [table.name])
        except MigratorError:
            continue
    return collisions(mapping, resolved)


def collisions(mapping: Mapping, resolved: Sequence[Resolved]) -> list[Problem]:
    """Pairs of key patterns that can write the same key, and ambiguous templates."""
    plans = {r.name: TablePlan(r) for r in resolved}
    patterns = [p for plan in plans.values() for p in table_patterns(plan)]
    out: list[Problem] = []

    def problem(level: Level, p: KeyPattern, message: str, hint: str) -> Problem:
        path = f"tables.{p.table}.{WHERE.get(p.what, p.what)}"
        return Problem(level, message, path, mapping.file, mapping.line_of(path), hint)

    def chars(p: KeyPattern) -> object:
        plan = plans[p.table]
        schema = plan.resolved.schema
        free = set() if plan.esc is not None else _free(p.template, plan)

        def of(column: str) -> object:
            c = schema.column(column)
            return ANY if column in free else column_chars(c.kind, c.column_type)

        return of

    def empty(p: KeyPattern) -> object:
        schema = plans[p.table].resolved.schema
        return lambda column: may_be_empty(
            schema.column(column).kind, schema.column(column).column_type
        )

    seen: set[tuple[str, str]] = set()
    for i, a in enumerate(patterns):
        for b in patterns[i + 1 :]:
            if not _heads_meet(a, b) or (a.table, a.template.text) == (b.table, b.template.text):
                continue
            sep = mapping.options.separator
            key = example(a.template, b.template, sep, chars(a), chars(b), empty(a), empty(b))  # type: ignore[arg-type]
            if key is None:
                continue
            pair = (
                f"{a.table} {a.what} '{a.template.text}'",
                f"{b.table} {b.what} '{b.template.text}'",
            )
            if pair in seen:
                continue
            seen.add(pair)
            certain = same_shape(a.template, b.template) and _same_values(a, b, plans)
            text = (
                f"the {pair[0]} and the {pair[1]} write the same keys"
                if certain
                else f"the {pair[0]} and the {pair[1]} can write the same key, e.g. '{key}'"
            )
            out.append(
                problem(
                    "error" if certain else "warning",
                    b,
                    text,
                    f"give one of them a prefix of its own, e.g. '{b.table}{sep}{b.what}{sep}...'",
                )
            )
    for p in patterns:
        for x, y in gaps_without_separator(p.template, mapping.options.separator):
            out.append(
                problem(
                    "warning",
                    p,
                    f"in '{p.template.text}', {{{x}}} and {{{y}}} have no separator between "
                    "them: their values cannot be told apart",
                    f"put the separator '{mapping.options.separator}' between them",
                )
            )
    return out


def _free(template: Template, plan: TablePlan) -> set[str]:
    """The placeholder of a composite whose values are written with their separators
    (``escape: reject``): its one varying column (plan/escape.py); in a composite with two or
    more, a value holding one is rejected. (A single-value key's text is taken to hold none,
    as before: docs/mapping.md names that limit.)"""
    varying = {c for c in template.columns if plan.varies(c)}
    return varying if len(template.columns) > 1 and len(varying) == 1 else set()


def _same_values(a: KeyPattern, b: KeyPattern, plans: dict[str, TablePlan]) -> bool:
    """Whether the placeholders, in order, hold the same kinds of values (two integer keys):
    then the patterns meet whenever the values do, not only for odd ones."""
    ta, tb = a.template, b.template
    sa, sb = plans[a.table].resolved.schema, plans[b.table].resolved.schema
    ca = [column_chars(sa.column(ta.columns[p]).kind, sa.column(ta.columns[p]).column_type)
          for p in ta.parts if isinstance(p, int)]  # fmt: skip
    cb = [column_chars(sb.column(tb.columns[p]).kind, sb.column(tb.columns[p]).column_type)
          for p in tb.parts if isinstance(p, int)]  # fmt: skip
    return ca == cb


def _name(p: KeyPattern) -> str:
    return f"{p.table} {p.what} '{p.template.text}'"


def _heads_meet(a: KeyPattern, b: KeyPattern) -> bool:
    """Whether the literal text before the first placeholder lets the keys meet at all."""
    ha, hb = a.head, b.head
    return ha.startswith(hb) or hb.startswith(ha)
