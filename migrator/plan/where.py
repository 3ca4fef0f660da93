"""A row filter (mapping/where.py) as a Python test of a row of the binary log, with MySQL's
three-valued logic: each test gives True, False or None (unknown: a NULL), and a row is in
the filter only when the whole filter is True, as in a ``WHERE``. Rows have the snapshot's
shape (``TableLayout.select``); each value is the text MySQL prints (docs/values.md).
``migrator.source.where`` writes the same tests in SQL; tests/test_where_agrees.py checks
that the two agree, against the server's own evaluation."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from decimal import Decimal, InvalidOperation

from migrator.mapping.kinds import Kind
from migrator.mapping.schema import TableSchema
from migrator.mapping.where import And, Compare, Filter, In, IsNull, Lit, Node, Not, Or, text_rule
from migrator.plan.batch import Row

Test = Callable[[Row], "bool | None"]


def row_test(f: Filter, pos: Mapping[str, int], ts: TableSchema) -> Callable[[Row], bool]:
    """Row -> whether the filter keeps it."""
    test = _node(f.tree, pos, ts)
    return lambda row: test(row) is True


def _node(node: Node, pos: Mapping[str, int], ts: TableSchema) -> Test:
    if isinstance(node, (And, Or)):
        items = [_node(n, pos, ts) for n in node.items]
        return _and(items) if isinstance(node, And) else _or(items)
    if isinstance(node, Not):
        inner = _node(node.item, pos, ts)

        def negate(row: Row) -> bool | None:
            got = inner(row)
            return None if got is None else not got

        return negate
    i = pos[node.column]
    if isinstance(node, IsNull):
        want_null = not node.negated
        return lambda row: (row[i] is None) == want_null
    column = ts.column(node.column)
    read = _reader(column.kind)
    if isinstance(node, In):
        equal = [_equal(column, v) for v in node.values]
        negated = node.negated

        def among(row: Row) -> bool | None:
            raw = row[i]
            if raw is None:
                return None
            found = any(eq(raw) for eq in equal)
            return not found if negated else found

        return among
    assert isinstance(node, Compare)
    if node.op in ("=", "!="):
        eq = _equal(column, node.value)
        differ = node.op == "!="
        return lambda row: None if row[i] is None else eq(row[i]) != differ  # type: ignore[arg-type]
    lit = _literal(column.kind, node.value)
    compare = _ORDER[node.op]

    def ordered(row: Row) -> bool | None:
        raw = row[i]
        if raw is None:
            return None
        return compare(read(raw), lit)

    return ordered


_ORDER: dict[str, Callable[[object, object], bool]] = {
    "<": lambda a, b: a < b,  # type: ignore[operator]
    "<=": lambda a, b: a <= b,  # type: ignore[operator]
    ">": lambda a, b: a > b,  # type: ignore[operator]
    ">=": lambda a, b: a >= b,  # type: ignore[operator]
}


def _and(items: list[Test]) -> Test:
    return _three_valued(items, decisive=False)


def _or(items: list[Test]) -> Test:
    return _three_valued(items, decisive=True)


def _three_valued(items: list[Test], decisive: bool) -> Test:
    """SQL's AND (``decisive=False``) or OR (``True``): the first item giving ``decisive``
    decides; else unknown (None) if any item was unknown, else ``not decisive``."""

    def combined(row: Row) -> bool | None:
        unknown = False
        for t in items:
            got = t(row)
            if got is decisive:
                return decisive
            if got is None:
                unknown = True
        return None if unknown else not decisive

    return combined


def _equal(column: object, lit: Lit) -> Callable[[bytes], bool]:
    """A non-NULL value -> whether MySQL's ``=`` (as written by source/where.py) holds."""
    from migrator.mapping.schema import Column

    assert isinstance(column, Column)
    kind = column.kind
    if kind is Kind.TEXT:
        rule = text_rule(column)
        assert rule is not None, "validate refuses it"
        if rule.insensitive:
            want = (lit.value.rstrip(" ") if rule.pad else lit.value).lower()

            def ci(raw: bytes) -> bool:
                text = raw.decode("utf-8", "surrogateescape")
                if not all(" " <= ch <= "~" for ch in text):
                    return False
                return (text.rstrip(" ") if rule.pad else text).lower() == want

            return ci
        target = lit.value.encode()
        if rule.pad:
            stripped = target.rstrip(b" ")
            return lambda raw: raw.rstrip(b" ") == stripped
        return lambda raw: raw == target
    if kind is Kind.BINARY:
        target = lit.value.encode()
        return lambda raw: raw == target
    read = _reader(kind)
    value = _literal(kind, lit)
    return lambda raw: read(raw) == value


def _reader(kind: Kind) -> Callable[[bytes], object]:
    if kind in (Kind.DATE, Kind.DATETIME, Kind.TIMESTAMP):
        return _instant
    return _number


def _literal(kind: Kind, lit: Lit) -> object:
    return lit.value if lit.kind in ("date", "datetime") else Decimal(lit.value)


def _number(raw: bytes) -> Decimal:
    try:
        return Decimal(raw.decode())
    except InvalidOperation:
        return Decimal(0)


def _instant(raw: bytes) -> str:
    """``2020-01-02`` or ``2020-01-02 03:04:05.25`` -> ``2020-01-02 03:04:05.250000``: fixed
    width text, so that comparing the text compares the instants."""
    text = raw.decode()
    if len(text) == 10:
        return text + " 00:00:00.000000"
    head, _, frac = text.partition(".")
    return f"{head}.{frac.ljust(6, '0')}"
