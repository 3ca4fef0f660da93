"""Changes the binary log does not carry as rows, as the schema shows them.

* ``ON DELETE/UPDATE CASCADE`` and ``SET NULL`` (and ``SET DEFAULT``) of a foreign key are
  executed inside InnoDB (MariaDB, MySQL up to 9.x with ``innodb_native_foreign_keys=ON``):
  the log holds the parent's row change only, never the child rows the rule deletes or
  changes. ``sync`` applies them from the parent's change (read from the log even where the
  parent is not mapped, ``reaching`` aside) where it can do so exactly, and
  refuses the table at start otherwise (``migrator.plan.cascade``). A MySQL that runs foreign
  keys in its SQL layer (``innodb_native_foreign_keys=OFF``, 9.7's default) logs the cascaded
  rows like any other: nothing to apply, nothing refused.
* Transaction-precise system versioning (ROW START/END as ``BIGINT UNSIGNED`` transaction
  ids): MariaDB logs every change of such a table as a statement, even with
  ``binlog_format = ROW``; ``sync`` refuses the table.

``validate`` warns of each table ``sync`` refuses and ``init`` writes a comment above it.
``migrate`` and ``verify`` read the rows themselves and are not affected. Pure: works on the
schema it is handed.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

from migrator.mapping.kinds import FLOATS, Kind
from migrator.mapping.schema import Column, ForeignKey, Schema, TableSchema

TRX_WHY = "MariaDB writes its changes to the binary log as statements, never as rows"
TRX_FIX = (
    "version the table by time (ROW START/END as TIMESTAMP(6), which sync follows), or leave "
    "it out of the mapping for sync (migrate and verify are not affected)"
)


@dataclass(frozen=True)
class Unlogged:
    table: str
    what: str  # "foreign key fk_a (a_id) -> a ON DELETE CASCADE"
    why: str
    fix: str

    def __str__(self) -> str:
        return f"{self.table}: {self.what}"


def trx_versioned(tables: Iterable[TableSchema]) -> list[Unlogged]:
    """Tables with transaction-precise system versioning."""
    out = []
    for ts in tables:
        end = ts.row_end
        if end is not None and end in ts.column_names and ts.column(end).kind is Kind.INTEGER:
            what = f"transaction-precise system versioning (ROW END {end} is a transaction id)"
            out.append(Unlogged(ts.name, what, TRX_WHY, TRX_FIX))
    return out


#: the types whose equality in MySQL is the equality of their values' text (MariaDB's own)
BYTEWISE_TYPES = ("uuid", "inet4", "inet6")

COLLATION_FIX = (
    "give the foreign key and the key it references a binary collation without padding "
    "(utf8mb4_0900_bin on MySQL, utf8mb4_nopad_bin on MariaDB), or a CHAR type under a _bin "
    "collation, or BINARY/VARBINARY; or make the rule RESTRICT, or leave the table out of "
    "the mapping for sync (migrate and verify are not affected)"
)


def no_pad(collation: str) -> bool:
    """A NO PAD collation: trailing spaces count (MariaDB's ``*_nopad_*``, MySQL's
    ``*_0900_*``); every other collation compares as if the shorter value had spaces added."""
    return "_nopad_" in collation or "_0900_" in collation


def _base(column: Column) -> str:
    return column.column_type.split("(")[0].strip().lower()


#: kinds whose text is one per value when both columns have the same type: equal values, equal
#: text (a DECIMAL(6,2) is always written with two digits, a DATETIME(3) with three)
BY_TYPE = frozenset(
    (Kind.DECIMAL, Kind.DATE, Kind.DATETIME, Kind.TIMESTAMP, Kind.TIME, Kind.YEAR, Kind.BIT)
)


def inexact_match(child: Column, parent: Column) -> str:
    """Why MySQL may match a child's foreign-key value with a parent's value whose text differs
    ("" when its equality is byte equality, so the child rows are exactly those Redis lists
    under the parent's value): integers; binary strings; MariaDB's UUID and INET types; text
    under a ``_bin`` collation that is NO PAD, or PAD SPACE on CHAR columns on both sides
    (CHAR values are stored without trailing spaces), but for a CHAR and a VARCHAR
    (``mixed_chars``); DECIMAL, temporal types, YEAR and BIT of
    one same type on both sides (their text is canonical); FLOAT and DOUBLE of one same type
    on both sides (one text per value, but for zero: ``-0`` and ``0``, both looked up)."""
    if child.kind is Kind.INTEGER and parent.kind is Kind.INTEGER:
        return ""
    same = child.column_type.lower() == parent.column_type.lower()
    if same and child.kind in BY_TYPE and parent.kind is child.kind:
        return ""  # one type, one canonical text per value (DECIMAL's scale, DATETIME's digits)
    if same and child.kind in FLOATS and parent.kind is child.kind:
        return ""  # one text per value but zero's two ('-0' = '0'): plan/cascade.py looks up both
    if child.kind is Kind.BINARY and parent.kind is Kind.BINARY:
        return ""  # InnoDB compares them byte for byte, unpadded (a BINARY(n)'s 0x00s count)
    if child.kind is not Kind.TEXT or parent.kind is not Kind.TEXT:
        return f"{child.name} is {child.column_type}, compared by value, not by its text"
    if _base(child) in BYTEWISE_TYPES and same:
        return ""
    mixed = mixed_chars(child, parent)
    if mixed:
        return mixed
    collation = child.collation or ""
    shown = f"{child.name} is {child.column_type} under the collation {collation or '(none)'}"
    if not collation.endswith("_bin") or parent.collation != collation:
        return f"{shown}, where MySQL's equality is not byte equality (e.g. 'Ken' = 'ken')"
    if no_pad(collation) or _base(child) == _base(parent) == "char":
        return ""
    return f"{shown}, a PAD SPACE collation on a VARCHAR: 'a' = 'a ' in MySQL, not in Redis"


#: the prefix of a pseudo-column of a row: the server's comparison key of a text column
#: (``WEIGH + name``; source/selects.py selects it, sync asks the server for it)
WEIGH = "\x00weight:"


def weighed(column: Column) -> bool:
    """A text column that MySQL compares under a collation that is not byte equality (case or
    accent insensitive, or PAD SPACE on a VARCHAR): the rows of a cascading foreign key on it
    are found by the server's comparison key of its value (``WEIGHT_STRING``, after trailing
    spaces are cut under PAD SPACE), never by its bytes. Not MariaDB's UUID and INET types
    (their text is canonical)."""
    if column.kind is not Kind.TEXT or not column.collation or _base(column) in BYTEWISE_TYPES:
        return False
    collation = column.collation
    return not collation.endswith("_bin") or not (no_pad(collation) or _base(column) == "char")


def charset_of(collation: str) -> str:
    """The character set a collation belongs to: its name's first part (``utf8mb4_0900_ai_ci``,
    ``latin1_swedish_ci``, MariaDB's ``utf8mb3_general_ci``)."""
    return collation.split("_", 1)[0]


def is_char(column: Column) -> bool:
    """A ``CHAR`` column (text, stored padded, printed without trailing spaces)."""
    return column.kind is Kind.TEXT and _base(column) == "char"


#: Python's codecs of the character sets whose characters are one byte or more, by MySQL's
#: names: what a CHAR(n) of them is padded to, n bytes, is counted in them (``Fit``)
CODECS = {"utf8mb4": "utf-8", "utf8mb3": "utf-8", "utf8": "utf-8", "latin1": "cp1252",
          "ascii": "ascii"}  # fmt: skip


def _length(column_type: str) -> int:
    inside = column_type.partition("(")[2].partition(")")[0]
    return int(inside) if inside.isdigit() else 1  # CHAR is CHAR(1)


@dataclass(frozen=True)
class Fit:
    """How InnoDB stores a parent's new key that an ``ON UPDATE CASCADE`` writes into a text
    child: a CHAR child prints it without trailing spaces ('b  ' is 'b'); a VARCHAR child of
    a CHAR(n) parent gets the parent's stored value, padded with spaces to n bytes ('b' is
    'b' and n - 1 spaces: seen on MariaDB 10.11 and MySQL 9.7)."""

    strip: bool = False
    pad: int = 0
    codec: str = "utf-8"

    def __call__(self, value: bytes) -> bytes:
        if self.strip:
            return value.rstrip(b" ")
        text = value.decode("utf-8", "surrogateescape")
        short = self.pad - len(text.encode(self.codec, "replace"))
        return value + b" " * short if short > 0 else value


def fit(child: Column, parent_type: str) -> Fit | None:
    """``Fit`` of a foreign-key column (None: the parent's value is stored as it is)."""
    if is_char(child):
        return Fit(strip=True)
    theirs = parent_type.split("(")[0].strip().lower()
    if child.kind is Kind.TEXT and theirs == "char" and child.collation:
        codec = CODECS.get(charset_of(child.collation))
        return Fit(pad=_length(parent_type), codec=codec) if codec else None
    return None


def mixed_chars(child: Column, parent: Column) -> str:
    """Why a CHAR on one side of a key and a VARCHAR on the other cannot be followed ("" when
    they can: under a PAD SPACE collation, their rows are found by the comparison key)."""
    bases = {_base(child), _base(parent)}
    if Kind.TEXT not in (child.kind, parent.kind) or "char" not in bases or bases == {"char"}:
        return ""
    collation = child.collation or ""
    shown = f"{child.name} is {child.column_type} and the parent's {parent.name} is "
    shown += f"{parent.column_type} under the collation {collation}"
    if no_pad(collation):
        return (
            f"{shown}, a NO PAD collation: InnoDB compares the CHAR's bytes padded with "
            "spaces, which MySQL prints without them"
        )
    if _base(parent) == "char" and charset_of(collation) not in CODECS:
        return (
            f"{shown}: an ON UPDATE CASCADE copies the CHAR's value padded to its length in "
            f"{charset_of(collation)}, which sync does not count"
        )
    return ""


def padded(column: Column, parent_type: str) -> bool:
    """A ``CHAR`` under a PAD SPACE collation referencing a ``VARCHAR``: MySQL's = pads the
    shorter value with spaces ('a' = 'a ', the parent's trailing spaces kept), so its rows
    are found by the server's comparison key too, as a ``weighed`` column's."""
    if column.kind is not Kind.TEXT or not column.collation or no_pad(column.collation):
        return False
    theirs = parent_type.split("(")[0].strip().lower()
    return is_char(column) and theirs not in ("", "char")


def keyed_by_weight(fk: ForeignKey, ts: TableSchema, column: str) -> bool:
    """Whether the rows of ``fk`` are found by the server's comparison key of ``column``:
    it is ``weighed``, or ``padded`` against the column it references."""
    col = ts.column(column)
    if weighed(col):
        return True
    types = dict(zip(fk.columns, fk.parent_types))
    return padded(col, types.get(column, ""))


def weighed_columns(ts: TableSchema) -> tuple[str, ...]:
    """The columns of the table's cascading foreign keys whose rows are found by the
    server's comparison key (``keyed_by_weight``)."""
    names = ts.column_names
    out = [c for fk in ts.foreign_keys if fk.unlogged_rules
           for c in fk.columns if c in names and keyed_by_weight(fk, ts, c)]  # fmt: skip
    return tuple(dict.fromkeys(out))


def inexact_key(
    fk: ForeignKey,
    child: TableSchema,
    parent: TableSchema | None,
    keyed: Collection[str] | None = None,
) -> str:
    """``inexact_match`` of the first foreign-key column where it is not "" ("" when none),
    but for a ``weighed`` column under the parent's very collation whose rows are found by the
    server's comparison key (``keyed``: the columns whose key the child's plan reads, None:
    every weighed column)."""
    if parent is None:
        return ""
    for c, p in zip(fk.columns, fk.parent_columns):
        if c in child.column_names and p in parent.column_names:
            mine, theirs = child.column(c), parent.column(p)
            mixed = mixed_chars(mine, theirs)
            if mixed:
                return mixed
            same = theirs.kind is Kind.TEXT and theirs.collation == mine.collation
            weigh = weighed(mine) or padded(mine, theirs.column_type)
            if weigh and same and (keyed is None or c in keyed):
                continue
            why = inexact_match(mine, theirs)
            if why:
                return why
    return ""


def reaching(fk: ForeignKey, parent: TableSchema) -> ForeignKey | None:
    """The parent's own foreign key whose rule changes, without a trace in the log, rows or
    columns that ``fk`` references (None: none does): its ``ON DELETE CASCADE`` (the parent's
    rows go), or a ``SET NULL`` / ``ON UPDATE CASCADE`` on a column ``fk`` references. Where
    the parent is not mapped, sync does not hold its rows and cannot follow such a cascade of
    a cascade (plan/cascade.py)."""
    for own in parent.foreign_keys:
        rules = own.unlogged_rules
        touched = bool(set(own.columns) & set(fk.parent_columns))
        if "ON DELETE CASCADE" in rules or (touched and set(rules) - {"ON DELETE CASCADE"}):
            return own
    return None


def cascade_notes(ts: TableSchema, schema: Schema) -> list[str]:
    """What ``init`` writes above a table: how sync treats its cascading foreign keys (with
    the defaults init drafts: a reference set per foreign key, every column in the hash), on
    a server whose log does not carry the rows cascades change (MariaDB; docs/sync.md)."""
    out = [f"sync refuses it: {u.what} ({u.why})" for u in trx_versioned([ts])]
    for fk in ts.foreign_keys:
        if not fk.unlogged_rules:
            continue
        rules, cols = ", ".join(fk.unlogged_rules), ", ".join(fk.columns)
        # another database's parent (keyed database.table) is not in ``schema``: sync reads it
        parent = None if fk.parent_database else schema.tables.get(fk.parent)
        inexact = inexact_key(fk, ts, parent)
        if any(r.endswith("SET DEFAULT") for r in fk.unlogged_rules):
            inexact = "SET DEFAULT is not supported"
        own = None if parent is None else reaching(fk, parent)
        keep = f"({cols}) read"
        if own is not None:  # a cascade of a cascade: the middle table's rows must be held
            by = f"{own.name or 'a foreign key'} -> {own.parent} {', '.join(own.unlogged_rules)}"
            keep += f" and {fk.parent} mapped (its own rows change by {by})"
        else:
            keep += f" ({fk.parent_key} is read for it, mapped or not)"
        if not inexact:
            out.append(
                f"sync applies {fk.name or 'the foreign key'}'s {rules} from the parent's "
                f"change where the binary log lacks the cascaded rows (MariaDB): keep {keep}; "
                "a child not read back from its hash keeps row images of its own"
            )
        else:
            out.append(
                f"sync refuses it where the binary log lacks the cascaded rows (MariaDB): "
                f"{fk.name or 'a foreign key'} has {rules}, which sync cannot apply exactly: "
                f"{inexact}"
            )
    return out
