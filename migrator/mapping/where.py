"""Row filters (``where:`` per table): the expression language, parsed once into a tree, and
the checks that a filter means the same to MySQL and to Python (docs/mapping.md#where).

The tree is compiled twice: to SQLAlchemy for every read of the source
(``migrator.source.where``) and to a Python test of a row for the binary log's rows
(``migrator.plan.where``). Both follow MySQL's three-valued logic (a comparison with NULL is
unknown, and a row is kept only when the whole filter is true). ``check`` refuses, with the
reason, every comparison whose two evaluations could disagree.

Grammar (keywords in any case)::

    filter  := or
    or      := and ("OR" and)*
    and     := not ("AND" not)*
    not     := "NOT" not | "(" or ")" | test
    test    := column ("=" | "!=" | "<>" | "<" | "<=" | ">" | ">=") literal
             | column ["NOT"] "IN" "(" literal ("," literal)* ")"
             | column "IS" ["NOT"] "NULL"
    column  := name | `back-quoted name`
    literal := number | 'text' | DATE 'YYYY-MM-DD' | DATETIME 'YYYY-MM-DD HH:MM:SS[.ffffff]'
             | TIMESTAMP '...' | TRUE | FALSE
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, TypeAlias

from migrator.mapping.kinds import Kind
from migrator.mapping.schema import Column, TableSchema

Op = Literal["=", "!=", "<", "<=", ">", ">="]
LitKind = Literal["number", "text", "date", "datetime"]


@dataclass(frozen=True)
class Lit:
    kind: LitKind
    value: str  # numbers as written ('-2.50'), dates normalised ('2024-01-02 03:04:05.000000')


@dataclass(frozen=True)
class Compare:
    column: str
    op: Op
    value: Lit


@dataclass(frozen=True)
class In:
    column: str
    values: tuple[Lit, ...]
    negated: bool = False


@dataclass(frozen=True)
class IsNull:
    column: str
    negated: bool = False


@dataclass(frozen=True)
class And:
    items: tuple[Node, ...]


@dataclass(frozen=True)
class Or:
    items: tuple[Node, ...]


@dataclass(frozen=True)
class Not:
    item: Node


Node: TypeAlias = Compare | In | IsNull | And | Or | Not


@dataclass(frozen=True)
class Filter:
    """A table's ``where:``: the text as written and its tree."""

    text: str
    tree: Node

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(c for c, _ in tests(self.tree)))


class FilterSyntaxError(ValueError):
    pass


_TOKEN = re.compile(
    r"""\s*(?:
      (?P<num>-?\d+(?:\.\d+)?(?![\w.]))
    | (?P<str>'(?:[^']|'')*')
    | (?P<qname>`(?:[^`]|``)+`)
    | (?P<name>[A-Za-z_][A-Za-z0-9_$]*)
    | (?P<op><>|!=|<=|>=|=|<|>)
    | (?P<punct>[(),])
    )""",
    re.VERBOSE,
)
_NOW = {
    "now", "current_date", "current_time", "current_timestamp", "curdate", "curtime",
    "sysdate", "utc_date", "utc_time", "utc_timestamp", "localtime", "localtimestamp",
    "unix_timestamp",
}  # fmt: skip
_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
_DATETIME = re.compile(r"(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?")


def parse(text: str) -> Filter:
    """The filter's tree; FilterSyntaxError says what is wrong and where."""
    tokens = _tokens(text)
    parser = _Parser(tokens, text)
    tree = parser.or_()
    if parser.i < len(tokens):
        raise parser.error("expected AND, OR or the end of the filter")
    return Filter(text, tree)


def _tokens(text: str) -> list[tuple[str, str, int]]:
    out = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            where = len(text[:pos]) + len(text[pos:]) - len(text[pos:].lstrip())
            raise FilterSyntaxError(
                f"unexpected {text[where : where + 10]!r} at character {where + 1}"
            )
        kind = m.lastgroup or ""
        out.append((kind, m.group(kind), m.start(kind)))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, tokens: list[tuple[str, str, int]], text: str) -> None:
        self.tokens, self.text, self.i = tokens, text, 0

    def error(self, message: str) -> FilterSyntaxError:
        if self.i < len(self.tokens):
            _kind, value, at = self.tokens[self.i]
            return FilterSyntaxError(f"{message}, found {value!r} at character {at + 1}")
        return FilterSyntaxError(f"{message}, found the end of the filter")

    def peek(self, *words: str) -> bool:
        if self.i >= len(self.tokens):
            return False
        kind, value, _ = self.tokens[self.i]
        return (kind in ("name", "op", "punct")) and value.upper() in words

    def take(self, *words: str) -> bool:
        if self.peek(*words):
            self.i += 1
            return True
        return False

    def expect(self, word: str) -> None:
        if not self.take(word):
            raise self.error(f"expected {word}")

    def or_(self) -> Node:
        items = [self.and_()]
        while self.take("OR"):
            items.append(self.and_())
        return items[0] if len(items) == 1 else Or(tuple(items))

    def and_(self) -> Node:
        items = [self.not_()]
        while self.take("AND"):
            items.append(self.not_())
        return items[0] if len(items) == 1 else And(tuple(items))

    def not_(self) -> Node:
        if self.take("NOT"):
            return Not(self.not_())
        if self.take("("):
            node = self.or_()
            self.expect(")")
            return node
        return self.test()

    def column(self) -> str:
        if self.i >= len(self.tokens):
            raise self.error("expected a column name")
        kind, value, _ = self.tokens[self.i]
        if kind == "qname":
            self.i += 1
            return value[1:-1].replace("``", "`")
        if kind == "name":
            low = value.lower()
            if low in _NOW:
                raise FilterSyntaxError(
                    f"{value} is not allowed: a row would leave or enter the filter as time "
                    "passes, with no change in the binary log for sync to follow; compare "
                    "with a fixed DATE '...' or DATETIME '...' instead"
                )
            if value.upper() in ("AND", "OR", "NOT", "IN", "IS", "NULL"):
                raise self.error("expected a column name")
            self.i += 1
            return value
        raise self.error("expected a column name")

    def test(self) -> Node:
        column = self.column()
        if self.take("IS"):
            negated = self.take("NOT")
            self.expect("NULL")
            return IsNull(column, negated)
        negated = self.take("NOT")
        if negated or self.peek("IN"):
            self.expect("IN")
            self.expect("(")
            values = [self.literal()]
            while self.take(","):
                values.append(self.literal())
            self.expect(")")
            return In(column, tuple(values), negated)
        if self.i < len(self.tokens) and self.tokens[self.i][0] == "op":
            op = self.tokens[self.i][1]
            self.i += 1
            return Compare(column, "!=" if op == "<>" else op, self.literal())  # type: ignore[arg-type]
        raise self.error("expected a comparison (=, !=, <, <=, >, >=), IN or IS [NOT] NULL")

    def literal(self) -> Lit:
        if self.i >= len(self.tokens):
            raise self.error("expected a value")
        kind, value, _ = self.tokens[self.i]
        if kind == "num":
            self.i += 1
            return Lit("number", value)
        if kind == "str":
            self.i += 1
            return Lit("text", value[1:-1].replace("''", "'"))
        if kind == "name":
            word = value.upper()
            if word in ("TRUE", "FALSE"):
                self.i += 1
                return Lit("number", "1" if word == "TRUE" else "0")
            if word == "NULL":
                raise FilterSyntaxError(
                    "a comparison with NULL is never true; write 'column IS NULL' or "
                    "'column IS NOT NULL'"
                )
            if word in ("DATE", "DATETIME", "TIMESTAMP"):
                self.i += 1
                if self.i >= len(self.tokens) or self.tokens[self.i][0] != "str":
                    raise self.error(f"expected a quoted value after {word}")
                text = self.tokens[self.i][1][1:-1]
                self.i += 1
                return _temporal(word, text)
            if value.lower() in _NOW:
                self.column()  # raises the message about now()
        raise self.error("expected a value (a number, 'text', DATE '...', DATETIME '...')")


def _temporal(word: str, text: str) -> Lit:
    if word == "DATE":
        m = _DATE.fullmatch(text)
        if m is None or not _valid(*m.groups()):
            raise FilterSyntaxError(f"DATE {text!r} is not a date: write DATE 'YYYY-MM-DD'")
        return Lit("date", f"{text} 00:00:00.000000")
    m = _DATETIME.fullmatch(text)
    if m is None or not _valid(*m.groups()[:3]):
        raise FilterSyntaxError(
            f"{word} {text!r} is not a date and time: write {word} 'YYYY-MM-DD HH:MM:SS[.ffffff]'"
        )
    y, mo, d, hh, mi, ss, frac = m.groups()
    if int(hh) > 23 or int(mi) > 59 or int(ss) > 59:
        raise FilterSyntaxError(f"{word} {text!r}: the time is out of range")
    return Lit("datetime", f"{y}-{mo}-{d} {hh}:{mi}:{ss}.{(frac or '').ljust(6, '0')}")


def _valid(y: str, m: str, d: str) -> bool:
    import calendar

    year, month, day = int(y), int(m), int(d)
    return year >= 1 and 1 <= month <= 12 and 1 <= day <= calendar.monthrange(year, month)[1]


def tests(node: Node) -> list[tuple[str, Node]]:
    """Every (column, test) of the tree, in order."""
    if isinstance(node, (And, Or)):
        return [t for item in node.items for t in tests(item)]
    if isinstance(node, Not):
        return tests(node.item)
    return [(node.column, node)]


# -- what agrees --------------------------------------------------------------------------------
#: text collations whose case-insensitive '=' on printable ASCII Python repeats exactly
CI_COLLATIONS = {"general_ci", "unicode_ci", "unicode_520_ci", "0900_ai_ci", "0900_as_ci"}
TEXT_CHARSETS = ("utf8mb4", "utf8mb3", "utf8")


@dataclass(frozen=True)
class TextRule:
    """How ``=`` compares a text column: ignoring ASCII case (printable ASCII values only) or
    byte for byte; ``pad``: trailing spaces do not count (PAD SPACE collations)."""

    charset: str
    insensitive: bool
    pad: bool


def text_rule(column: Column) -> TextRule | None:
    """The rule of a text column's collation, or None when Python cannot repeat it."""
    collation = (column.collation or "").lower()
    charset, _, rest = collation.partition("_")
    if charset not in TEXT_CHARSETS:
        return None
    pad = "0900" not in rest and "nopad" not in rest
    if rest in ("bin", "0900_bin", "nopad_bin"):
        return TextRule(charset, False, pad)
    if rest in CI_COLLATIONS:
        return TextRule(charset, True, pad)
    return None


def check(f: Filter, ts: TableSchema) -> list[tuple[str, str]]:
    """(message, hint) for each test of the filter that MySQL and Python could evaluate
    differently, or that names an unknown column (checked elsewhere: skipped here)."""
    out: list[tuple[str, str]] = []
    known = set(ts.column_names)
    for column, test in tests(f.tree):
        if column not in known or isinstance(test, IsNull):
            continue
        col = ts.column(column)
        assert isinstance(test, (Compare, In))
        lits = (test.value,) if isinstance(test, Compare) else test.values
        problem = _problem(col, test, lits)
        if problem is not None:
            out.append(problem)
    return out


def _problem(col: Column, test: Compare | In, lits: tuple[Lit, ...]) -> tuple[str, str] | None:
    name, kind = col.name, col.kind
    ordered = isinstance(test, Compare) and test.op not in ("=", "!=")
    if kind in (Kind.INTEGER, Kind.BIT, Kind.DECIMAL):
        if any(lit.kind != "number" for lit in lits):
            return (
                f"'{name}' ({col.column_type}) is compared with a non-number",
                "compare a numeric column with a number: MySQL would convert the text by "
                "rules the binlog side does not repeat",
            )
        return None
    if kind in (Kind.DATE, Kind.DATETIME, Kind.TIMESTAMP):
        if any(lit.kind not in ("date", "datetime") for lit in lits):
            return (
                f"'{name}' ({col.column_type}) is compared with something other than a "
                "DATE '...' or DATETIME '...' literal",
                f"write e.g. {name} >= DATE '2024-01-01'",
            )
        return None
    if kind is Kind.TEXT:
        rule = text_rule(col)
        if rule is None:
            return (
                f"'{name}' has the collation {col.collation or 'unknown'}, whose comparisons "
                "the binlog side cannot repeat exactly",
                "filter on a utf8mb4 column with a _bin, _general_ci, _unicode_ci or "
                "_0900_ai_ci collation, or by IS [NOT] NULL",
            )
        if ordered:
            return (
                f"'{name}' is text: <, <=, > and >= follow its collation's order, which the "
                "binlog side cannot repeat exactly",
                "use =, !=, IN or NOT IN on text",
            )
        if any(lit.kind != "text" for lit in lits):
            return (
                f"'{name}' is text and is compared with a non-text value",
                "quote the value: MySQL would compare as numbers, by rules the binlog side "
                "does not repeat",
            )
        if rule.insensitive and any(not _printable(lit.value) for lit in lits):
            return (
                f"'{name}' has a case-insensitive collation ({col.collation}); a value other "
                "than printable ASCII is compared by rules the binlog side cannot repeat",
                "compare with printable ASCII text, or use a _bin collation",
            )
        return None
    if kind is Kind.BINARY:
        if ordered or any(lit.kind != "text" for lit in lits):
            return (
                f"'{name}' is binary: only =, !=, IN and NOT IN with a quoted value agree",
                "compare with a quoted value",
            )
        return None
    return (
        f"'{name}' is {kind.value} ({col.column_type}): its comparisons are not repeated "
        "exactly on the binlog side",
        "filter it by IS [NOT] NULL only; comparisons work on integer, DECIMAL, BIT, DATE, "
        "DATETIME, TIMESTAMP, text and binary columns",
    )


def _printable(text: str) -> bool:
    return all(" " <= ch <= "~" for ch in text)
