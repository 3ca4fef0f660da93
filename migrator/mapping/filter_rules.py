"""Whether a foreign key's rule, run by the server without a trace in the binary log, can
bring a row into a table's row filter (``where:``; docs/sync.md, "Row filters").

``sync`` holds the rows a filter keeps and nothing of the others. A rule that changes held rows
is followed: the changed row is filtered again, and one that leaves the filter is removed
(plan/delta.py). A rule that can change a row the filter left out into one it keeps cannot be:
that row's other columns are in no event of the log and nowhere in Redis. So:

* ``SET NULL`` makes the foreign key's columns NULL and leaves the rest: a row can come in only
  if the filter can be true with those columns NULL, whatever the others hold
  (``true_with_nulls``, MySQL's three-valued logic: ``crew_id IN (1, 2)`` is unknown for a NULL,
  ``crew_id IS NOT NULL`` false; ``crew_id IS NULL`` or ``active = 1 OR crew_id <> 5`` may be
  true);
* ``ON UPDATE CASCADE`` gives them the parent's new key, any value but NULL (the old one was not
  NULL either, it referenced a row): a filter that tests them only for NULL (``IS [NOT] NULL``)
  answers the same before and after; one that compares their values may not.

Such a table, and a filtered parent whose own rows change by such a rule where that reaches a
mapped child (a cascade of a cascade through the rows its filter leaves out), keeps the row
images of the rows its filter leaves out as well (``keeps_left_out``; plan/row_images.py): the
rule then finds them, and each is filtered again with its new values.

Pure: works on the filter's tree (mapping/where.py) and the schema it is handed.
"""

from __future__ import annotations

from collections.abc import Collection
from itertools import product

from migrator.mapping.cascades import reaching
from migrator.mapping.model import Mapping, Table
from migrator.mapping.schema import Schema, TableSchema
from migrator.mapping.where import And, Compare, Filter, In, IsNull, Node, Not, Or, tests

#: MySQL's three truth values: true, false, unknown (a comparison with NULL)
T, F, U = "T", "F", "U"
ANY = frozenset((T, F, U))
_NOT = {T: F, F: T, U: U}


def _and(a: str, b: str) -> str:
    return F if F in (a, b) else (U if U in (a, b) else T)


def _or(a: str, b: str) -> str:
    return T if T in (a, b) else (U if U in (a, b) else F)


def _values(node: Node, nulled: Collection[str]) -> frozenset[str]:
    """The truth values the tree can take for a row whose ``nulled`` columns are NULL and whose
    other columns hold anything (each test taken on its own: more than the row can reach,
    never less)."""
    if isinstance(node, IsNull):
        if node.column not in nulled:
            return ANY
        return frozenset((F if node.negated else T,))
    if isinstance(node, (Compare, In)):
        return frozenset((U,)) if node.column in nulled else ANY
    if isinstance(node, Not):
        return frozenset(_NOT[v] for v in _values(node.item, nulled))
    join = _and if isinstance(node, And) else _or
    assert isinstance(node, (And, Or))
    out = _values(node.items[0], nulled)
    for item in node.items[1:]:
        other = _values(item, nulled)
        out = frozenset(join(a, b) for a, b in product(out, other))
    return out


def true_with_nulls(f: Filter, nulled: Collection[str]) -> bool:
    """Whether the filter can keep a row whose ``nulled`` columns are NULL."""
    return T in _values(f.tree, nulled)


def compares_values(f: Filter, columns: Collection[str]) -> list[str]:
    """The ``columns`` whose values (not only their being NULL) the filter reads."""
    return list(dict.fromkeys(
        c for c, test in tests(f.tree) if c in columns and not isinstance(test, IsNull)
    ))  # fmt: skip


def admitting(f: Filter, columns: Collection[str], rules: Collection[str]) -> str:
    """The first of a foreign key's unlogged ``rules`` (``ON DELETE SET NULL``...) that can
    bring a row the filter leaves out into it ("" when none can). A filter that does not read
    the key's columns answers the same before and after."""
    if not set(columns) & set(f.columns):
        return ""
    for rule in rules:
        if rule.endswith("SET NULL") and true_with_nulls(f, columns):
            return rule
        if rule == "ON UPDATE CASCADE" and compares_values(f, columns):
            return rule
    return ""


def keeps_left_out(table: Table, ts: TableSchema, mapping: Mapping, schema: Schema) -> bool:
    """Whether the table keeps the row images of the rows its filter leaves out (module
    docstring): a rule of its own foreign key can bring such a row in (``admitting``), or its
    own rows change by a rule the log lacks that reaches a mapped child's cascading foreign key
    (mapping/cascades.py ``reaching``). Not for a nested table (``nest:``) nor a sharded
    source's (``sources:``): sync refuses those instead."""
    f = table.where
    if f is None or table.nest is not None or mapping.sources:
        return False
    if any(admitting(f, fk.columns, fk.unlogged_rules) for fk in ts.foreign_keys):
        return True
    for other in mapping.tables:
        child = schema.tables.get(other.name)
        if child is None or other.nest is not None:
            continue
        for fk in child.foreign_keys:
            mine = fk.parent == table.name and not fk.parent_database and fk.unlogged_rules
            if mine and reaching(fk, ts) is not None:
                return True
    return False
