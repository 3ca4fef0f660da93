"""The source schema as the mapping sees it: tables, columns (with their value kind), keys,
indexes and foreign keys. Plain data; ``migrator.source.introspect`` reads it from a server."""

from __future__ import annotations

from dataclasses import dataclass

from migrator.mapping.kinds import Kind

LONG_TYPES = ("text", "mediumtext", "longtext", "blob", "mediumblob", "longblob")


@dataclass(frozen=True)
class Column:
    name: str
    kind: Kind
    nullable: bool
    column_type: str  # as MySQL spells it: "int(10) unsigned", "varchar(64)", "point"
    collation: str | None = None  # a text column's: "utf8mb4_general_ci"; None otherwise
    #: MariaDB's JSON: a LONGTEXT (kind TEXT: its text as written) checked by json_valid(),
    #: embedded as JSON in a document (plan/documents.py)
    json_text: bool = False

    @property
    def holds_json(self) -> bool:
        """A JSON column, of either engine."""
        return self.kind is Kind.JSON or self.json_text

    @property
    def is_integer(self) -> bool:
        return self.kind is Kind.INTEGER

    @property
    def dimension(self) -> int | None:
        """A MySQL VECTOR column's number of floats (``vector(32)``: 32); None for any other."""
        head, _, rest = self.column_type.lower().partition("(")
        if head.strip() != "vector":
            return None
        digits = rest.split(")")[0].strip()
        return int(digits) if digits.isdigit() else 2048  # VECTOR alone: MySQL's default

    @property
    def is_long(self) -> bool:
        """A TEXT or BLOB column (up to 64 KiB and more), not a short string."""
        return self.column_type.split("(")[0].strip().lower() in LONG_TYPES


@dataclass(frozen=True)
class IndexInfo:
    name: str
    columns: tuple[str, ...]
    unique: bool
    kind: str = "BTREE"  # BTREE (incl. HASH), FULLTEXT or SPATIAL
    # per column, the prefix MySQL indexes (191 for KEY (title(191))); None: the whole value
    lengths: tuple[int | None, ...] = ()

    @property
    def is_prefix(self) -> bool:
        return any(n is not None for n in self.lengths)

    def shown(self) -> str:
        """``(title(191), grp)``: the columns as the index definition writes them."""
        lengths = self.lengths or (None,) * len(self.columns)
        cols = [c if n is None else f"{c}({n})" for c, n in zip(self.columns, lengths)]
        return "(" + ", ".join(cols) + ")"


@dataclass(frozen=True)
class ForeignKey:
    name: str
    columns: tuple[str, ...]
    parent: str
    parent_columns: tuple[str, ...]
    on_delete: str = ""  # the rule as MySQL spells it: CASCADE, SET NULL, RESTRICT...; "" none
    on_update: str = ""
    parent_database: str = ""  # the parent's database where it is not the table's own
    #: the referenced columns' types (``COLUMN_TYPE``, as ``Column.column_type``), where the
    #: parent is in the table's database: a child ``CHAR`` referencing a ``VARCHAR`` compares
    #: with padding (mapping/cascades.py ``weighed_columns``); () when unknown
    parent_types: tuple[str, ...] = ()

    @property
    def parent_key(self) -> str:
        """The parent table as sync keys it: its name, or ``database.name`` for a table of
        another database (plan/cascade_parents.py), never confused with a table of that name
        in the table's own database."""
        return f"{self.parent_database}.{self.parent}" if self.parent_database else self.parent

    @property
    def unlogged_rules(self) -> list[str]:
        """The rules under which InnoDB changes this table's rows itself, without writing
        those changes to the binary log (``ON DELETE CASCADE``, ``ON UPDATE SET NULL``...)."""
        out = []
        for event, rule in (("DELETE", self.on_delete), ("UPDATE", self.on_update)):
            if rule.upper() in ("CASCADE", "SET NULL", "SET DEFAULT"):
                out.append(f"ON {event} {rule.upper()}")
        return out


@dataclass(frozen=True)
class TableSchema:
    name: str
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...]
    indexes: tuple[IndexInfo, ...]  # every index but the primary key, unique ones included
    foreign_keys: tuple[ForeignKey, ...]
    row_estimate: int = 0
    # a system-versioned table (MariaDB): its ROW END column, which the binary log carries
    # (the hidden ``row_end`` unless declared); None for an ordinary table
    row_end: str | None = None

    def column(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(name)

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def is_unique(self, columns: tuple[str, ...]) -> bool:
        """MySQL enforces uniqueness of these columns (a unique index on a subset of them)."""
        wanted = set(columns)
        keys = [self.primary_key] + [i.columns for i in self.indexes if i.unique]
        return any(k and set(k) <= wanted for k in keys)

    def row_identity(self) -> tuple[str, ...] | None:
        """The primary key, else the first unique index whose columns are all NOT NULL."""
        if self.primary_key:
            return self.primary_key
        for index in self.indexes:
            if index.unique and all(not self.column(c).nullable for c in index.columns):
                return index.columns
        return None


@dataclass(frozen=True)
class Schema:
    database: str
    tables: dict[str, TableSchema]
    views: tuple[str, ...]
