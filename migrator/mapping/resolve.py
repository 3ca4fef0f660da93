"""Mapping + live schema -> tables with every default filled in (see docs/mapping.md)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from migrator.errors import MappingError, MappingErrors
from migrator.mapping.filter_rules import keeps_left_out
from migrator.mapping.model import Index, Mapping, Table, Template, Unique
from migrator.mapping.schema import Schema, TableSchema
from migrator.mapping.shape import suggest


@dataclass(frozen=True)
class Resolved:
    """A table whose primary_key, key, columns and counter are concrete."""

    table: Table
    schema: TableSchema
    separator: str
    escape: str = "reject"  # a separator inside a composite's value: reject or backslash
    mapping_name: str = "mapping"  # for the keys migrator keeps of its own (expiry schedule)
    #: the shard of a sharded source (``sources:``) whose rows this is ("": not sharded);
    #: its tables keep an owner hash (plan/owners.py)
    shard: str = ""
    #: it keeps the row images of the rows its filter leaves out too, for sync's cascades
    #: (mapping/filter_rules.py ``keeps_left_out``)
    left_out_images: bool = False

    @property
    def name(self) -> str:
        return self.table.name

    @property
    def primary_key(self) -> tuple[str, ...]:
        assert self.table.primary_key is not None
        return self.table.primary_key

    @property
    def key(self) -> Template:
        assert self.table.key is not None
        return self.table.key

    @property
    def columns(self) -> tuple[str, ...]:
        assert self.table.columns is not None
        return self.table.columns

    @property
    def counter(self) -> Template | None:
        return self.table.counter or None

    @property
    def trusts_declared_key(self) -> bool:
        """The primary key is the mapping's declaration, which MySQL does not keep unique:
        rows may share a key (migrate and verify count them)."""
        return self.table.kind != "none" and not self.schema.is_unique(self.primary_key)

    @property
    def unenforced_uniques(self) -> tuple[Unique, ...]:
        """The ``unique:`` entries whose columns MySQL does not keep unique: a value several
        rows hold has one entry naming one of them (migrate, verify and sync count them)."""
        return tuple(u for u in self.table.unique if not self.schema.is_unique(u.columns))

    def index_sets(self) -> tuple[Index, ...]:
        """Non-unique indexes plus references, each column list once (never twice); none when
        a search index stands in for them (``search: {index_sets: false}``)."""
        if self.table.without_index_sets:
            return ()
        seen: list[tuple[str, ...]] = []
        for cols in [i.columns for i in self.table.indexes] + [
            r.columns for r in self.table.references
        ]:
            if cols not in seen:
                seen.append(cols)
        return tuple(Index(c) for c in seen)


def default_key(name: str, pk: tuple[str, ...], sep: str) -> Template:
    return Template.parse(sep.join([_escape(name)] + [f"{{{c}}}" for c in pk]))


def _escape(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def resolve(
    mapping: Mapping, schema: Schema, only: list[str] | None = None, shard: str = ""
) -> list[Resolved]:
    """Complete every table of the mapping against the live schema; all problems at once.
    ``shard``: the shard of a sharded source whose schema this is (``Resolved.shard``)."""
    errors: list[MappingError] = []
    out: list[Resolved] = []
    for table in mapping.tables:
        if only is not None and table.name not in only:
            continue
        path = f"tables.{table.name}"
        ts = schema.tables.get(table.name)
        if ts is None:
            hint = suggest(table.name, schema.tables)
            what = "a view" if table.name in schema.views else "no such table"
            errors.append(
                _error(
                    mapping,
                    path,
                    f"{what} '{table.name}' in database "
                    f"'{schema.database}' (only base tables can be migrated)",
                    hint,
                )
            )
            continue
        table_errors = _check_columns(mapping, table, ts, path)
        if table_errors:
            errors.extend(table_errors)
            continue
        pk = table.primary_key or ts.row_identity()
        if not pk:
            errors.append(
                _error(
                    mapping,
                    path,
                    f"table '{table.name}' has no primary key and no "
                    "NOT NULL unique index to key its rows",
                    "set 'primary_key: [col, ...]' to columns that identify a row",
                )
            )
            continue
        sep = mapping.options.separator
        key = table.key or default_key(table.name, pk, sep)
        columns = table.columns
        if columns is None:  # a nested child's element has no key to carry its primary key
            columns = tuple(c for c in ts.column_names if c not in pk or table.nest is not None)
        counter = table.counter
        if counter is None:
            single_int = len(pk) == 1 and ts.column(pk[0]).is_integer
            counter = Template.parse(f"{_escape(table.name)}{sep}id") if single_int else False
        resolved = dataclasses.replace(
            table, primary_key=tuple(pk), key=key, columns=columns, counter=counter
        )
        escape = table.escape or mapping.options.escape
        kept = keeps_left_out(table, ts, mapping, schema)
        out.append(Resolved(resolved, ts, sep, escape, mapping.name, shard, kept))
    if errors:
        raise MappingErrors(errors) if len(errors) > 1 else errors[0]
    return out


def _error(mapping: Mapping, path: str, message: str, hint: str | None = None) -> MappingError:
    return MappingError(
        message, path=path, file=mapping.file, line=mapping.line_of(path), hint=hint
    )


def column_uses(table: Table) -> list[tuple[str, str]]:
    """Every (mapping path, column name) a table's mapping refers to."""
    p = f"tables.{table.name}"
    uses: list[tuple[str, str]] = []

    def add(path: str, cols: tuple[str, ...] | None) -> None:
        uses.extend((path, c) for c in cols or ())

    add(f"{p}.primary_key", table.primary_key)
    add(f"{p}.columns", table.columns)
    if table.key is not None:
        add(f"{p}.key", table.key.columns)
    if table.counter:
        add(f"{p}.counter", table.counter.columns)
    for i, u in enumerate(table.unique):
        add(f"{p}.unique[{i}]", u.columns)
        if u.key is not None:
            add(f"{p}.unique[{i}].key", u.key.columns)
    for i, x in enumerate(table.indexes):
        add(f"{p}.indexes[{i}]", x.columns)
    for i, r in enumerate(table.references):
        add(f"{p}.references[{i}].columns", r.columns)
    for i, s in enumerate(table.sorted):
        add(f"{p}.sorted[{i}].key", s.key.columns)
        add(f"{p}.sorted[{i}].score", (s.score,))
    for i, latest in enumerate(table.latest):
        add(f"{p}.latest[{i}].order_by", (latest.order_by,))
    for i, vs in enumerate(table.vector_sets):
        add(f"{p}.vector_sets[{i}].key", vs.key.columns)
        add(f"{p}.vector_sets[{i}].vector", (vs.vector,))
        add(f"{p}.vector_sets[{i}].attributes", vs.attributes)
    for i, st in enumerate(table.sets):
        add(f"{p}.sets[{i}].key", st.key.columns)
        add(f"{p}.sets[{i}].member", st.member.columns)
    if table.where is not None:
        add(f"{p}.where", table.where.columns)
    if table.expire is not None:
        add(f"{p}.expire.column", table.expire.columns)
    for column, _ in table.fields:
        add(f"{p}.fields.{column}", (column,))
    for column, _ in table.formats:
        add(f"{p}.formats.{column}", (column,))
    if table.search is not None:  # a path into nested children (tags.tagname): plan/search.py
        for k in ("tag", "numeric", "text"):
            add(f"{p}.search.{k}", tuple(c for c in getattr(table.search, k) if "." not in c))
        for v in table.search.vector:
            if "." not in v.column:
                add(f"{p}.search.vector.{v.column}", (v.column,))
    if table.nest is not None:
        add(f"{p}.nest.by", table.nest.by or ())
        add(f"{p}.nest.order", table.nest.order)
    if table.streams is not None and isinstance(table.streams.columns, tuple):
        add(f"{p}.streams.columns", table.streams.columns)
    return uses


def _check_columns(
    mapping: Mapping, table: Table, ts: TableSchema, path: str
) -> list[MappingError]:
    known = ts.column_names
    errors = []
    for use_path, col in column_uses(table):
        if col not in known:
            errors.append(
                _error(
                    mapping,
                    use_path,
                    f"unknown column '{col}' in table {table.name}",
                    suggest(col, known),
                )
            )
    return errors
