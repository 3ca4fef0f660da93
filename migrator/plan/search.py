"""A table's search index, from what the mapping and MySQL say (docs/mapping.md, "search").

``definition(resolved)`` -> :class:`SearchIndex`: ``FT.CREATE <name> ON HASH PREFIX 1 <the
row key's literal prefix> [FILTER ...] SCHEMA ...`` where each attribute is a field of the row
hash (``as: json``: ``ON JSON``, each attribute ``$.field AS field`` of the document; a JSON
number cannot be a TAG, and DECIMAL is a string there unless ``formats: {col: number}``):

* TEXT: the columns of MySQL's FULLTEXT indexes, and ``search.text``;
* NUMERIC SORTABLE: numeric columns of the mapping's ``unique``/``indexes``/``references``
  and of MySQL's indexes, sorted-set scores, ``search.numeric``; a DATE/DATETIME/TIMESTAMP
  column only with a numeric format (``formats: {col: epoch}`` or ``epoch_ms``), since the
  server drops from the index a hash whose NUMERIC field is not a number;
* TAG: the other index columns and ``search.tag``; ``CASESENSITIVE`` unless the column's
  collation is ``_ci``; ``SEPARATOR "\\x1f"`` so a value holding a comma stays one tag.
* VECTOR: the columns of ``search.vector``, ``FLAT|HNSW n TYPE FLOAT32 DIM d
  DISTANCE_METRIC m ...`` (plan/search_vectors.py).

Only the columns the row hash holds can be indexed; others are left out (``skipped``).
A document's nested children (plan/nesting.py) are indexed through a path named in
``search.tag``/``numeric``/``text``: ``tags.tagname`` (the nest's ``as``, then the child's
column; deeper: ``tags.notes.body``) is ``$.tags[*].tagname AS tags_tagname`` (``.*`` for a
``map``, nothing for an ``object``), typed by the child column's kind, format and collation
as a column of the table's own. The ``digest`` names the definition: a changed one is a new
version of the index (``<name>:<digest>``), and the alias ``name`` moves to it
(store/search_index.py).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping as Tables
from collections.abc import Sequence
from dataclasses import dataclass

from migrator.errors import MappingError
from migrator.mapping.kinds import Kind
from migrator.mapping.model import Mapping, VectorField
from migrator.mapping.resolve import Resolved
from migrator.mapping.schema import Column
from migrator.mapping.shape import suggest
from migrator.plan.nesting import parent_of
from migrator.plan.search_vectors import vector_args

TAG_SEPARATOR = "\x1f"
NUMERIC_FORMATS = ("epoch", "epoch_ms", "number")


@dataclass(frozen=True)
class Hop:
    """One step down a nesting: ``table``'s rows are the children, in the field ``as`` of
    the previous table's documents, of the rows whose ``refs`` their ``by`` columns name."""

    table: Resolved
    by: tuple[str, ...]
    refs: tuple[str, ...]


@dataclass(frozen=True)
class Attribute:
    column: str
    field: str  # its name in the row hash
    type: str  # TAG, NUMERIC or TEXT
    case_sensitive: bool = False  # TAG only
    #: a JSON document's path to the value (``$.lang``): then ``path AS field``; None: the
    #: hash field itself
    path: str | None = None
    #: a nested child's column: the nestings from the document's table down to the child's
    #: table, whose ``column`` it is (empty: a column of the table's own)
    via: tuple[Hop, ...] = dataclasses.field(default=(), compare=False)
    #: VECTOR only: what follows the type (``FLAT 6 TYPE FLOAT32 DIM 32 DISTANCE_METRIC L2``)
    vector: tuple[str, ...] = ()

    def args(self) -> list[str]:
        name = [self.field] if self.path is None else [self.path, "AS", self.field]
        if self.type == "VECTOR":
            return [*name, "VECTOR", *self.vector]
        if self.type == "TAG":
            out = [*name, "TAG", "SEPARATOR", TAG_SEPARATOR]
            return out + (["CASESENSITIVE"] if self.case_sensitive else [])
        if self.type == "NUMERIC":
            return [*name, "NUMERIC", "SORTABLE"]
        return [*name, "TEXT"]


@dataclass(frozen=True)
class SearchIndex:
    table: str
    alias: str  # what the application queries
    prefix: str
    exclude: tuple[str, ...]  # key prefixes under ``prefix`` that are not rows
    attributes: tuple[Attribute, ...]
    skipped: tuple[str, ...]  # index columns the row hash does not hold
    on: str = "HASH"  # JSON for documents: attributes then carry their ``path``

    def args(self) -> list[str]:
        """FT.CREATE's arguments after the index name."""
        out = ["ON", self.on, "PREFIX", "1", self.prefix]
        if self.exclude:
            cond = " && ".join(f"!startswith(@__key, {_quote(p)})" for p in self.exclude)
            out += ["FILTER", cond]
        out.append("SCHEMA")
        for a in self.attributes:
            out += a.args()
        return out

    @property
    def digest(self) -> str:
        return hashlib.sha256("\0".join(self.args()).encode()).hexdigest()[:12]

    @property
    def version(self) -> str:
        """This definition's own index name; the alias points to it."""
        return f"{self.alias}:{self.digest}"

    def vectors(self) -> tuple[Attribute, ...]:
        return tuple(a for a in self.attributes if a.type == "VECTOR")

    def tags(self) -> tuple[Attribute, ...]:
        return tuple(a for a in self.attributes if a.type == "TAG")

    def command(self) -> list[str]:
        return ["FT.CREATE", self.version, *self.args()]


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def definitions(
    resolved: Sequence[Resolved],
    mapping: Mapping | None = None,
    everything: Sequence[Resolved] | None = None,
) -> list[SearchIndex]:
    """The search indexes the tables ask for (MappingError, exit 2, for a bad one: with the
    mapping's file and line when ``mapping`` is given). ``everything``: the mapping's tables
    resolved, among them the nested children a path names (default: ``resolved``)."""
    tables = {t.name: t for t in (resolved if everything is None else everything)}
    out = []
    for r in resolved:
        try:
            index = definition(r, tables)
        except MappingError as e:
            if mapping is None:
                raise
            line = mapping.line_of(e.path)
            raise MappingError(
                e.detail, path=e.path, file=mapping.file, line=line, hint=e.hint
            ) from None
        if index is not None:
            out.append(index)
    return out


def definition(r: Resolved, tables: Tables[str, Resolved] | None = None) -> SearchIndex | None:
    """The table's search index, or None when the mapping asks for none. ``tables``: the
    mapping's tables resolved, by name, where the nested children a path names are found."""
    search = r.table.search
    if search is None:
        return None
    path = f"tables.{r.name}.search"
    if r.table.kind not in ("hash", "json"):
        raise MappingError(
            f"a search index needs the rows as hashes or RedisJSON documents, but table "
            f"{r.name} is 'as: {r.table.kind}'",
            path=path, hint="write 'as: hash' (the default) or 'as: json', or remove 'search'",
        )  # fmt: skip
    doc = r.table.kind == "json"
    prefix = _prefix(r)
    if not prefix:
        raise MappingError(
            f"the row key {r.key.text!r} starts with a placeholder: no prefix to index",
            path=path, hint="start the key with literal text, e.g. 'book:{id}'",
        )  # fmt: skip
    ts = r.schema
    fulltext = {c for ix in ts.indexes if ix.kind == "FULLTEXT" for c in ix.columns}
    indexed = [c for u in r.table.unique for c in u.columns]
    indexed += [c for ix in r.table.indexes for c in ix.columns]
    indexed += [c for ref in r.table.references for c in ref.columns]
    indexed += [c for ix in ts.indexes if ix.kind == "BTREE" for c in ix.columns]
    scores = [s.score for s in r.table.sorted]
    wanted: dict[str, str | None] = {}  # column -> forced type (None: from its kind)
    for c in [*indexed, *scores, *search.tag, *search.numeric, *search.text, *fulltext]:
        wanted.setdefault(c, None)
    for c in scores:
        wanted[c] = "NUMERIC"
    for kind, cols in (("TAG", search.tag), ("NUMERIC", search.numeric)):
        for c in cols:
            wanted[c] = kind
    for c in (*fulltext, *search.text):
        wanted[c] = "TEXT"
    fields = dict(r.table.fields)
    formats = dict(r.table.formats)
    attrs, skipped = [], []
    for column, forced in wanted.items():
        if column not in ts.column_names:  # a path into the nested children: tags.tagname
            attrs.append(_nested(r, column, forced, tables or {}, path))
            continue
        if column not in r.columns:
            skipped.append(column)
            continue
        col = ts.column(column)
        kind, sensitive = _typed(r.name, col, forced, formats.get(column), doc, path, column)
        field = fields.get(column, column)
        json_path = "$" + _member(field) if doc else None
        attrs.append(Attribute(column, field, kind, sensitive, json_path))
    for vec in search.vector:
        where = f"{path}.vector.{vec.column}"
        if vec.column not in ts.column_names:
            attrs.append(_nested(r, vec.column, None, tables or {}, where, vec))
            continue
        if vec.column not in r.columns:
            raise MappingError(
                f"column {vec.column} of table {r.name} is not in its "
                + ("document" if doc else "row hash") + ", so it cannot be a vector field",
                path=where, hint=f"add it to tables.{r.name}.columns",
            )  # fmt: skip
        col = ts.column(vec.column)
        field = fields.get(vec.column, vec.column)
        json_path = "$" + _member(field) if doc else None
        spec = vector_args(r.name, col, vec, where, own=True)
        attrs.append(Attribute(vec.column, field, "VECTOR", False, json_path, vector=spec))
    if not attrs:
        raise MappingError(
            f"the search index of table {r.name} would index nothing: no index, unique, "
            "sorted-set score or FULLTEXT column is in its row hash",
            path=path, hint="name columns to index: search: {name: ..., tag: [col], text: [col]}",
        )  # fmt: skip
    names = [a.field for a in attrs]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise MappingError(
            f"two attributes of the search index of table {r.name} are named {twice[0]}",
            path=path, hint="give one of the columns another name with fields:",
        )  # fmt: skip
    exclude = () if doc else tuple(_excluded(r, prefix))  # ON JSON skips the unique hashes
    return SearchIndex(
        r.name, search.name, prefix, exclude, tuple(attrs), tuple(skipped),
        on="JSON" if doc else "HASH",
    )  # fmt: skip


def _typed(
    table: str, col: Column, forced: str | None, fmt: str | None, doc: bool, path: str, name: str
) -> tuple[str, bool]:
    """(TAG, NUMERIC or TEXT; case-sensitive) of a column of ``table``, which the search
    lists call ``name``; MappingError when the value as written cannot be of that type."""
    column = col.name
    kind = forced or ("NUMERIC" if col.kind.numeric or col.kind.temporal else "TAG")
    number = _number(col.kind, fmt, doc)
    where = "document" if doc else "row hash"
    owner = "" if name == column else f"tables.{table}."  # a nested child's own formats
    if kind == "NUMERIC" and not number:
        if forced is None and not col.kind.temporal:
            kind = "TAG"
        else:
            fmt = "number" if col.kind is Kind.DECIMAL else "epoch"
            hint = f"write it as a number: {owner}formats: {{{column}: {fmt}}}"
            if not (col.kind.numeric or col.kind.temporal):
                hint = f"index it as a TAG or TEXT: search: {{tag: [{name}]}}"
            raise MappingError(
                f"column {column} ({col.column_type}) of table {table} would be a NUMERIC "
                f"attribute, but the {where} holds it as text, which the server cannot index",
                path=path, hint=hint,
            )  # fmt: skip
    if kind == "TAG" and doc and number:
        raise MappingError(
            f"column {column} of table {table} is a number in the document, which a TAG "
            "cannot index",
            path=path, hint=f"index it as numeric: search: {{numeric: [{name}]}}",
        )  # fmt: skip
    return kind, not (col.collation or "").endswith("_ci")


def _nested(
    r: Resolved,
    entry: str,
    forced: str | None,
    tables: Tables[str, Resolved],
    path: str,
    vec: VectorField | None = None,
) -> Attribute:
    """The attribute of a nested child's column that ``entry`` names (``tags.tagname``: the
    field ``tags`` of the documents, then a column of the table nested there)."""
    if r.table.kind != "json":
        raise MappingError(
            f"table {r.name} has no column {entry!r}, and a path into nested children needs "
            f"documents, but its rows are 'as: {r.table.kind}'",
            path=path,
            hint=f"map {r.name} 'as: json' with its children nested (nest: {{in: {r.name}, "
            "as: ...}), or name a column of its own",
        )
    hops: list[Hop] = []
    steps: list[tuple[str, str]] = []  # (field, how its children are held)
    parent, rest = r, entry
    while True:
        kids = sorted(
            (t for t in tables.values() if t.table.nest and t.table.nest.parent == parent.name),
            key=lambda t: t.name,
        )
        child = next((k for k in kids if _under(k, rest)), None)
        if child is None:
            known = ", ".join(k.table.nest.field for k in kids if k.table.nest) or "none"
            where = r.name if parent is r else f"{parent.name} (in {r.name})"
            raise MappingError(
                f"{entry!r} is not a column of table {r.name} nor a path into its nested "
                f"children: the documents of {where} have no nested field "
                f"{rest.split('.', 1)[0]!r} (nested fields: {known})",
                path=path,
                hint="name a nested field and a column of the child's table, e.g. "
                "tags.tagname for a table nested with nest: {in: " + r.name + ", as: tags}",
            )
        nest = child.table.nest
        assert nest is not None
        by, refs = parent_of(nest, child.schema, parent.schema)
        hops.append(Hop(child, by, refs))
        steps.append((nest.field, nest.kind))
        rest = rest[len(nest.field) + 1 :]
        if rest in child.schema.column_names or "." not in rest:
            break
        parent = child
    if rest not in child.columns:
        known_columns = child.columns if rest in child.schema.column_names else ()
        raise MappingError(
            f"{entry!r}: the documents nested from table {child.name} hold no column {rest!r}"
            + (" (it is not in its columns)" if known_columns else ""),
            path=path,
            hint=f"add it to tables.{child.name}.columns"
            if known_columns
            else suggest(rest, child.columns) or f"its columns: {', '.join(child.columns)}",
        )
    col = child.schema.column(rest)
    field_name = dict(child.table.fields).get(rest, rest)
    json_path = "$" + "".join(_step(f, how) for f, how in steps) + _member(field_name)
    name = "_".join([*(f for f, _ in steps), field_name])
    if vec is not None:
        spec = vector_args(child.name, col, vec, path, own=False)
        return Attribute(rest, name, "VECTOR", False, json_path, tuple(hops), spec)
    formats = dict(child.table.formats)
    kind, sensitive = _typed(child.name, col, forced, formats.get(rest), True, path, entry)
    return Attribute(rest, name, kind, sensitive, json_path, tuple(hops))


def _under(child: Resolved, rest: str) -> bool:
    nest = child.table.nest
    return nest is not None and rest.startswith(nest.field + ".")


def _step(name: str, how: str) -> str:
    """A nested field in a JSON path, then each of its children: ``.tags[*]``."""
    return _member(name) + {"array": "[*]", "map": ".*", "object": ""}[how]


def _member(name: str) -> str:
    """``.lang``, or ``["odd name"]`` for a field that is not a plain identifier."""
    return f".{name}" if name.isidentifier() else "[" + _quote(name) + "]"


def _number(kind: Kind, fmt: str | None, doc: bool) -> bool:
    """Whether the row hash (text) or the document (JSON, plan/documents.py) holds the
    column's values as numbers the server can index as NUMERIC."""
    if fmt is not None:
        return fmt in NUMERIC_FORMATS
    if doc:  # DECIMAL is a string in a document, exactly; BIT a number
        return kind in (Kind.INTEGER, Kind.BIT, Kind.YEAR, Kind.FLOAT, Kind.DOUBLE)
    return kind.numeric and kind is not Kind.BIT


def _prefix(r: Resolved) -> str:
    first = r.key.parts[0] if r.key.parts else ""
    return first if isinstance(first, str) else ""


def _excluded(r: Resolved, prefix: str) -> list[str]:
    """Hashes the tool writes under the row prefix that are not rows: unique hashes."""
    out = []
    for u in r.table.unique:
        if u.key is None:
            name = r.separator.join([r.name, "uniques", *u.columns])
            if name.startswith(prefix):
                out.append(r.separator.join([r.name, "uniques", ""]))
    return list(dict.fromkeys(out))


DATABASE_FIX = (
    "load into database 0 (a target URL ending in /0, e.g. redis://host:6379/0), or remove "
    "'search:' from the mapping"
)


def database_of(url: str) -> int:
    """The database number a Redis URL names (``redis://h/3``, ``unix:///s?db=3``), as
    redis-py reads it; 0 when it names none (or not a number: the connection says why)."""
    from urllib.parse import parse_qs, urlsplit

    parts = urlsplit(url)
    path = parts.path.strip("/") if parts.scheme in ("redis", "rediss") else ""
    text = path or (parse_qs(parts.query).get("db") or ["0"])[0]
    return int(text) if text.isdigit() else 0


def wrong_database(database: int, tables: Sequence[str]) -> str | None:
    """Why search indexes cannot be built on ``database``: the query engine indexes keys of
    database 0 only (FT.CREATE answers "Cannot create index on db != 0")."""
    if database == 0 or not tables:
        return None
    return (
        f"the mapping asks for search indexes ({', '.join(tables)}), but the target is "
        f"database {database}: the query engine indexes database 0 only"
    )
