"""The live schema: every base table's columns, keys, indexes and foreign keys, read through
SQLAlchemy's inspector and information_schema into ``migrator.mapping.schema`` objects."""

from __future__ import annotations

import re
import time
import warnings
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from migrator.errors import ConnectError, SourceError
from migrator.mapping.kinds import Kind, kind_of
from migrator.mapping.schema import Column, ForeignKey, IndexInfo, Schema, TableSchema


class _AnyType(sa.types.NullType):
    """A type SQLAlchemy does not know, whatever its arguments (``VECTOR(3)``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()


class _Lenient(dict):
    """The dialect's type names, and :class:`_AnyType` for every other: SQLAlchemy's reflection
    instantiates an unknown type's stand-in with the column's arguments, which fails
    (``TypeError: NullType() takes no arguments`` for MySQL 9's ``VECTOR(3)``)."""

    def __missing__(self, key: str) -> type[_AnyType]:
        return _AnyType


def read_schema(engine: Engine, only: list[str] | None = None, database: str = "") -> Schema:
    """Every base table (views listed apart) with columns, keys, indexes and foreign keys; of
    ``database`` where given (another database of the server, whose foreign keys' parents in
    it are then its own), else of the connection's."""
    dialect: Any = engine.dialect
    if not isinstance(dialect.ischema_names, _Lenient):
        dialect.ischema_names = _Lenient(dialect.ischema_names)
    with warnings.catch_warnings():
        # column kinds come from information_schema; the inspector's own types are not used
        warnings.filterwarnings("ignore", "Did not recognize type", sa.exc.SAWarning)
        # MariaDB's PERIOD FOR SYSTEM_TIME (system versioning: _row_end reads it)
        warnings.filterwarnings("ignore", "Unknown schema content", sa.exc.SAWarning)
        for attempt in range(SCHEMA_READS):
            try:
                return _read_schema(engine, only, database)
            except (sa.exc.NoSuchTableError, sa.exc.ProgrammingError) as e:
                if isinstance(e, sa.exc.ProgrammingError) and _code(e) != NO_SUCH_TABLE:
                    raise
                vanished = str(e).split("\n")[0]  # listed, then gone: a swap under way
                time.sleep(0.1 * (attempt + 1))
    raise ConnectError(
        f"the source's tables kept changing while their schema was read ({SCHEMA_READS} "
        f"reads in a row met a table listed and then gone: {vanished.strip('`')})",
        "a tool is swapping tables (gh-ost, pt-online-schema-change): run the command again "
        "once its cut-over is done",
    )


NO_SUCH_TABLE = 1146  # ER_NO_SUCH_TABLE


def _code(e: sa.exc.DBAPIError) -> int | None:
    args = getattr(e.orig, "args", ())
    return args[0] if args and isinstance(args[0], int) else None


#: reads of the schema in a row that may meet a table listed and then gone (a swap's RENAME
#: between the listing and the table's own reads) before the read gives up (exit 3)
SCHEMA_READS = 5


def _read_schema(engine: Engine, only: list[str] | None, other: str) -> Schema:
    inspector = sa.inspect(engine)
    within = other or None  # the inspector's schema: None for the connection's database
    with engine.connect() as conn:
        database = other or conn.execute(sa.text("SELECT DATABASE()")).scalar()
        if not database:
            raise SourceError(
                "the source URL names no database",
                "add it to the URL: mysql+pymysql://user@host:3306/DATABASE",
            )
        columns = _columns(conn, database)
        estimates: dict[str, int] = {}
        versioned: list[str] = []
        for table, table_type, rows in conn.execute(
            sa.text(
                "SELECT TABLE_NAME, TABLE_TYPE, TABLE_ROWS FROM information_schema.TABLES "
                "WHERE TABLE_SCHEMA = :db AND TABLE_TYPE IN ('BASE TABLE', 'SYSTEM VERSIONED')"
            ),
            {"db": database},
        ).all():
            estimates[_text(table)] = int(rows or 0)
            if _text(table_type) == "SYSTEM VERSIONED":
                versioned.append(_text(table))
        row_ends = {t: _row_end(conn, t, within) for t in versioned if only is None or t in only}
        referred = {
            str(fk["referred_schema"])
            for n in inspector.get_table_names(schema=within) if only is None or n in only
            for fk in inspector.get_foreign_keys(n, schema=within)
            if fk.get("referred_schema") not in (None, database)
        }  # fmt: skip
        elsewhere = {db: _columns(conn, db) for db in referred}  # their parents' types
    names = [n for n in inspector.get_table_names(schema=within) if only is None or n in only]
    tables = {}
    for name in names:
        pk_constraint = inspector.get_pk_constraint(name, schema=within)
        pk = tuple(pk_constraint.get("constrained_columns") or ())
        indexes = []
        for ix in inspector.get_indexes(name, schema=within):
            options = ix.get("dialect_options") or {}
            prefix = options.get("mysql_prefix") or "BTREE"
            cols = tuple(c for c in ix["column_names"] if c is not None)
            lengths = _prefix_lengths(cols, options.get("mysql_length"))
            indexes.append(
                IndexInfo(str(ix["name"]), cols, bool(ix["unique"]), str(prefix), lengths)
            )
        fks = tuple(
            ForeignKey(
                str(fk.get("name") or ""),
                tuple(fk["constrained_columns"]),
                fk["referred_table"],
                tuple(fk["referred_columns"]),
                str((fk.get("options") or {}).get("ondelete") or ""),
                str((fk.get("options") or {}).get("onupdate") or ""),
                _other(fk, str(database)),  # set for another database's table
                _types_of(elsewhere.get(_other(fk, str(database)), columns), fk),
            )
            for fk in inspector.get_foreign_keys(name, schema=within)
        )
        tables[name] = TableSchema(
            name=name,
            columns=tuple(columns.get(name, ())),
            primary_key=pk,
            indexes=tuple(indexes),
            foreign_keys=fks,
            row_estimate=int(estimates.get(name) or 0),
            row_end=row_ends.get(name),
        )
    return Schema(str(database), tables, tuple(inspector.get_view_names(schema=within)))


def _other(fk: Any, database: str) -> str:
    """The database of a foreign key's parent where it is not ``database`` ("" where it is)."""
    referred = str(fk.get("referred_schema") or "")
    return "" if referred == database else referred


def _types_of(columns: dict[str, list[Column]], fk: Any) -> tuple[str, ...]:
    """The referenced columns' types, by name in the parent's columns ("" where not found)."""
    types = {c.name: c.column_type for c in columns.get(fk["referred_table"], ())}
    return tuple(types.get(c, "") for c in fk["referred_columns"])


_PERIOD = re.compile(r"PERIOD\s+FOR\s+SYSTEM_TIME\s*\(\s*`((?:[^`]|``)+)`\s*,\s*`((?:[^`]|``)+)`")


def _row_end(conn: sa.Connection, table: str, database: str | None = None) -> str:
    """The ROW END column of a system-versioned table: declared in ``PERIOD FOR SYSTEM_TIME
    (start, end)``, else MariaDB's hidden ``row_end``."""
    quote = conn.dialect.identifier_preparer.quote_identifier
    quoted = quote(table) if database is None else f"{quote(database)}.{quote(table)}"
    ddl = _text(conn.execute(sa.text(f"SHOW CREATE TABLE {quoted}")).all()[0][1])
    m = _PERIOD.search(ddl)
    return m.group(2).replace("``", "`") if m else "row_end"


def _prefix_lengths(columns: tuple[str, ...], lengths: Any) -> tuple[int | None, ...]:
    """Per column, the prefix length of a prefix index (the inspector's ``mysql_length``: a
    dict by column, or one number for a one-column index), else None."""
    if isinstance(lengths, int):
        return tuple(lengths if i == 0 else None for i in range(len(columns)))
    lengths = lengths or {}
    return tuple(int(lengths[c]) if lengths.get(c) else None for c in columns)


def _columns(conn: sa.Connection, database: str) -> dict[str, list[Column]]:
    rows = conn.execute(
        sa.text(
            "SELECT TABLE_NAME, COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE, "
            "CHARACTER_SET_NAME, COLLATION_NAME FROM information_schema.COLUMNS "
            "WHERE TABLE_SCHEMA = :db ORDER BY TABLE_NAME, ORDINAL_POSITION"
        ),
        {"db": database},
    ).all()
    out: dict[str, list[Column]] = {}
    checked = _json_checked(conn, database)
    for table, name, data_type, column_type, nullable, charset, collation in rows:
        kind = kind_of(_text(data_type), _text(charset) if charset else None)
        if kind is Kind.TEXT and "json_valid" in _text(column_type).lower():
            kind = Kind.JSON
        out.setdefault(_text(table), []).append(
            Column(
                _text(name),
                kind,
                nullable == "YES",
                _text(column_type),
                _text(collation) if collation else None,
                json_text=kind is Kind.TEXT and (_text(table), _text(name)) in checked,
            )
        )
    return out


_JSON_VALID = re.compile(r"json_valid\(`((?:[^`]|``)+)`\)$", re.IGNORECASE)


def _json_checked(conn: sa.Connection, database: str) -> set[tuple[str, str]]:
    """MariaDB's JSON columns: (table, column) of each column-level ``json_valid(col)`` CHECK
    (MariaDB's JSON is a LONGTEXT with that check); none on MySQL, whose JSON is a type."""
    version = _text(conn.execute(sa.text("SELECT VERSION()")).scalar() or "")
    if "mariadb" not in version.lower():
        return set()
    found = set()
    for table, clause in conn.execute(
        sa.text(
            "SELECT TABLE_NAME, CHECK_CLAUSE FROM information_schema.CHECK_CONSTRAINTS "
            "WHERE CONSTRAINT_SCHEMA = :db AND LEVEL = 'Column'"
        ),
        {"db": database},
    ).all():
        m = _JSON_VALID.match(_text(clause).strip())
        if m:
            found.add((_text(table), m.group(1).replace("``", "`")))
    return found


def _text(value: object) -> str:
    return value.decode() if isinstance(value, (bytes, bytearray)) else str(value)
