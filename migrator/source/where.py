"""A row filter (mapping/where.py) as a SQLAlchemy condition for every read of a table.

Identifiers are SQLAlchemy columns and values bound parameters: nothing is pasted into SQL.
Each test is written so that MySQL computes exactly what ``migrator.plan.where`` computes
for a row of the binary log:

* numbers compare with an exact integer or DECIMAL literal;
* dates and times with ``CAST(:value AS DATETIME(6))`` (a DATE column at midnight);
* text under a case-insensitive collation with ``=`` and, besides, ``col COLLATE
  <charset>_bin NOT REGEXP '[^ -~]'``: only printable ASCII values can be equal, compared
  ignoring case (the collation's trailing-space rule applies); ``!=``, ``IN`` and ``NOT IN``
  are built from that ``=``.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql

from migrator.mapping.kinds import Kind
from migrator.mapping.resolve import Resolved
from migrator.mapping.schema import TableSchema
from migrator.mapping.where import And, Compare, Filter, In, IsNull, Lit, Node, Not, Or, text_rule
from migrator.source.expiry import alive

#: a character that is not printable ASCII
NOT_PRINTABLE = "[^ -~]"


def clause(resolved: Resolved, slack: float = 0.0) -> Any:
    """The table's filter as a condition, or None when it has none; a table with an expiry
    column also leaves out the rows more than ``slack`` seconds past it (source/expiry.py)."""
    f = resolved.table.where
    cond = None if f is None else condition(f, resolved.schema)
    live = alive(resolved, slack=slack)
    if live is None:
        return cond
    return live if cond is None else sa.and_(cond, live)


def read_clause(resolved: Resolved) -> Any:
    """The condition of a load's read of the table's rows: ``clause``, but none for a table
    that keeps the images of the rows its filter leaves out (``Resolved.left_out_images``):
    it is read whole, and the planner tells its rows apart (plan/planner.py ``split``)."""
    return None if resolved.left_out_images else clause(resolved)


def left_out(resolved: Resolved) -> Any:
    """The rows the table's filter leaves out (its condition is not true: false or unknown)."""
    f = resolved.table.where
    assert f is not None
    return sa.not_(sa.func.coalesce(condition(f, resolved.schema), sa.false()))


def condition(f: Filter, ts: TableSchema) -> Any:
    return _node(f.tree, ts)


def _node(node: Node, ts: TableSchema) -> Any:
    if isinstance(node, And):
        return sa.and_(*(_node(n, ts) for n in node.items))
    if isinstance(node, Or):
        return sa.or_(*(_node(n, ts) for n in node.items))
    if isinstance(node, Not):
        return sa.not_(_node(node.item, ts))
    col: Any = sa.column(node.column)
    if isinstance(node, IsNull):
        return col.is_not(None) if node.negated else col.is_(None)
    if isinstance(node, In):
        found = sa.or_(*(_equal(col, node.column, v, ts) for v in node.values))
        return sa.not_(found) if node.negated else found
    assert isinstance(node, Compare)
    if node.op == "=":
        return _equal(col, node.column, node.value, ts)
    if node.op == "!=":
        return sa.not_(_equal(col, node.column, node.value, ts))
    value = _value(node.value)
    return {
        "<": col < value, "<=": col <= value, ">": col > value, ">=": col >= value,
    }[node.op]  # fmt: skip


def _equal(col: Any, name: str, lit: Lit, ts: TableSchema) -> Any:
    column = ts.column(name)
    if column.kind is Kind.TEXT:
        rule = text_rule(column)
        if rule is not None and rule.insensitive:
            ascii_only = sa.not_(col.collate(f"{rule.charset}_bin").regexp_match(NOT_PRINTABLE))
            return sa.and_(col == sa.literal(lit.value), ascii_only)
    return col == _value(lit)


def _value(lit: Lit) -> Any:
    if lit.kind == "number":
        number: Any = int(lit.value) if "." not in lit.value else Decimal(lit.value)
        return sa.literal(number)
    if lit.kind in ("date", "datetime"):
        return sa.cast(sa.literal(lit.value), mysql.DATETIME(fsp=6))
    return sa.literal(lit.value)
