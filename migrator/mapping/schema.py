"""The live source schema, read through SQLAlchemy's inspector and information_schema."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from migrator.errors import SourceError
from migrator.plan.values import Kind, kind_of


@dataclass(frozen=True)
class Column:
    name: str
    kind: Kind
    nullable: bool
    column_type: str  # as MySQL spells it: "int(10) unsigned", "varchar(64)", "point"

    @property
    def is_integer(self) -> bool:
        return self.kind is Kind.INTEGER


@dataclass(frozen=True)
class IndexInfo:
    name: str
    columns: tuple[str, ...]
    unique: bool
    kind: str = "BTREE"  # BTREE (incl. HASH), FULLTEXT or SPATIAL


@dataclass(frozen=True)
class ForeignKey:
    name: str
    columns: tuple[str, ...]
    parent: str
    parent_columns: tuple[str, ...]


@dataclass(frozen=True)
class TableSchema:
    name: str
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...]
    indexes: tuple[IndexInfo, ...]  # every index but the primary key, unique ones included
    foreign_keys: tuple[ForeignKey, ...]
    row_estimate: int = 0

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


def read_schema(engine: Engine, only: list[str] | None = None) -> Schema:
    """Every base table (views listed apart) with columns, keys, indexes and foreign keys."""
    with warnings.catch_warnings():
        # column kinds come from information_schema; the inspector's own types are not used
        warnings.filterwarnings("ignore", "Did not recognize type", sa.exc.SAWarning)
        return _read_schema(engine, only)


def _read_schema(engine: Engine, only: list[str] | None) -> Schema:
    inspector = sa.inspect(engine)
    with engine.connect() as conn:
        database = conn.execute(sa.text("SELECT DATABASE()")).scalar()
        if not database:
            raise SourceError(
                "the source URL names no database",
                "add it to the URL: mysql+pymysql://user@host:3306/DATABASE",
            )
        columns = _columns(conn, database)
        estimates: dict[str, int] = dict(
            conn.execute(
                sa.text(
                    "SELECT TABLE_NAME, TABLE_ROWS FROM information_schema.TABLES "
                    "WHERE TABLE_SCHEMA = :db AND TABLE_TYPE = 'BASE TABLE'"
                ),
                {"db": database},
            ).all()
        )
    names = [n for n in inspector.get_table_names() if only is None or n in only]
    tables = {}
    for name in names:
        pk = tuple(inspector.get_pk_constraint(name).get("constrained_columns") or ())
        indexes = []
        for ix in inspector.get_indexes(name):
            prefix = (ix.get("dialect_options") or {}).get("mysql_prefix") or "BTREE"
            cols = tuple(c for c in ix["column_names"] if c is not None)
            indexes.append(IndexInfo(str(ix["name"]), cols, bool(ix["unique"]), str(prefix)))
        fks = tuple(
            ForeignKey(
                str(fk.get("name") or ""),
                tuple(fk["constrained_columns"]),
                fk["referred_table"],
                tuple(fk["referred_columns"]),
            )
            for fk in inspector.get_foreign_keys(name)
        )
        tables[name] = TableSchema(
            name=name,
            columns=tuple(columns.get(name, ())),
            primary_key=pk,
            indexes=tuple(indexes),
            foreign_keys=fks,
            row_estimate=int(estimates.get(name) or 0),
        )
    return Schema(str(database), tables, tuple(inspector.get_view_names()))


def _columns(conn: sa.Connection, database: str) -> dict[str, list[Column]]:
    rows = conn.execute(
        sa.text(
            "SELECT TABLE_NAME, COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE, "
            "CHARACTER_SET_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = :db "
            "ORDER BY TABLE_NAME, ORDINAL_POSITION"
        ),
        {"db": database},
    ).all()
    out: dict[str, list[Column]] = {}
    for table, name, data_type, column_type, nullable, charset in rows:
        kind = kind_of(_text(data_type), _text(charset) if charset else None)
        if kind is Kind.TEXT and "json_valid" in _text(column_type).lower():
            kind = Kind.JSON
        out.setdefault(_text(table), []).append(
            Column(_text(name), kind, nullable == "YES", _text(column_type))
        )
    return out


def _text(value: object) -> str:
    return value.decode() if isinstance(value, (bytes, bytearray)) else str(value)
