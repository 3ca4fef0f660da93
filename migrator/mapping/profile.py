"""What ``init`` asks of the rows, and what it makes of the answers (docs/mapping.md, "What
`migrator init` drafts"): which columns identify the rows of a table without a key, and
which indexed columns hold so many values that a sorted set serves them better than a SET
per value.

The questions are sets of columns; the answer to each is the number of distinct
combinations of values with no NULL among them (``COUNT(DISTINCT a, b)``), next to the
table's row count. A set of columns whose answer equals a non-zero row count is unique and
never NULL in the rows as they are: MySQL proves it of today's rows, not of tomorrow's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from migrator.mapping.kinds import Kind
from migrator.mapping.schema import TableSchema

Columns = tuple[str, ...]

MAX_QUESTIONS = 16  # sets of columns counted per table (one scan of the table answers all)
MANY_VALUES = 2  # a SET per value holding fewer rows than this on average: a sorted set
FEW_ROWS = 100  # below this many rows, too few to judge: a SET per value, as written
KEY_KINDS = (Kind.INTEGER, Kind.TEXT, Kind.DATE, Kind.DATETIME, Kind.TIMESTAMP, Kind.DECIMAL)
SCORE_KINDS = (Kind.INTEGER, Kind.DECIMAL, Kind.FLOAT, Kind.DOUBLE)


@dataclass
class Profile:
    """The answers: per table its rows, and per set of columns asked about its count of
    distinct non-NULL combinations."""

    rows: dict[str, int] = field(default_factory=dict)
    distinct: dict[tuple[str, Columns], int] = field(default_factory=dict)

    def identifies(self, table: str, columns: Columns) -> bool:
        """Every row has its own combination of these columns, none of them NULL."""
        rows = self.rows.get(table, 0)
        return rows > 0 and self.distinct.get((table, columns)) == rows

    def many_values(self, table: str, column: str) -> bool:
        """The column holds so many values that a SET per value would hold fewer than
        MANY_VALUES rows on average, in a table of FEW_ROWS rows or more."""
        rows, n = self.rows.get(table, 0), self.distinct.get((table, (column,)), 0)
        return rows >= FEW_ROWS and n * MANY_VALUES > rows


NO_PROFILE = Profile()


def _keyable(ts: TableSchema, columns: Columns) -> bool:
    return all(
        "{" not in c
        and "}" not in c
        and ts.column(c).kind in KEY_KINDS
        and not ts.column(c).is_long
        for c in columns
    )


def identity_candidates(ts: TableSchema) -> list[Columns]:
    """For a table without a primary key or NOT NULL unique index, in the order they are
    offered: its unique indexes, then each short column (integers first), then its other
    indexes; columns a key can hold (no TEXT/BLOB, JSON, floats or braces in the name)."""
    unique = [ix.columns for ix in ts.indexes if ix.unique and not ix.is_prefix]
    singles = sorted(
        ((c.name,) for c in ts.columns), key=lambda c: ts.column(c[0]).kind is not Kind.INTEGER
    )
    others = [ix.columns for ix in ts.indexes if not ix.unique and not ix.is_prefix]
    found: list[Columns] = []
    for cols in [*unique, *singles, *others]:
        if cols and cols not in found and _keyable(ts, cols):
            found.append(cols)
    return found[:MAX_QUESTIONS]


def score_candidate(ts: TableSchema, columns: Columns) -> bool:
    """A non-unique index init may draft as a sorted set if the rows say so: one numeric
    column (temporal ones are drafted so whatever the rows say)."""
    return len(columns) == 1 and ts.column(columns[0]).kind in SCORE_KINDS


def questions(ts: TableSchema) -> list[Columns]:
    """The sets of columns whose distinct values init counts for this table."""
    asked: list[Columns] = []
    if ts.row_identity() is None:
        asked += identity_candidates(ts)
    fk = {f.columns for f in ts.foreign_keys}
    for ix in ts.indexes:
        if not ix.unique and ix.columns not in fk and score_candidate(ts, ix.columns):
            asked.append(ix.columns)
    return list(dict.fromkeys(asked))[:MAX_QUESTIONS]


def proven_identity(ts: TableSchema, profile: Profile) -> Columns | None:
    """The first candidate that identifies every row today, or None."""
    return next((c for c in identity_candidates(ts) if profile.identifies(ts.name, c)), None)


def as_sorted(ts: TableSchema, columns: Columns, profile: Profile) -> bool:
    """Whether init drafts a non-unique index on ``columns`` as a sorted set: a temporal
    column, or a numeric one with many values (a SET per value would hold about one row)."""
    if len(columns) != 1:
        return False
    kind = ts.column(columns[0]).kind
    return kind.temporal or (kind in SCORE_KINDS and profile.many_values(ts.name, columns[0]))
