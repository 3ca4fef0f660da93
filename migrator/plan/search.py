"""A table's search index, from what the mapping and MySQL say (docs/mapping.md, "search").

``definition(resolved)`` -> :class:`SearchIndex`: ``FT.CREATE <name> ON HASH PREFIX 1 <the
row key's literal prefix> [FILTER ...] SCHEMA ...`` where each attribute is a field of the row
hash:

* TEXT: the columns of MySQL's FULLTEXT indexes, and ``search.text``;
* NUMERIC SORTABLE: numeric columns of the mapping's ``unique``/``indexes``/``references``
  and of MySQL's indexes, sorted-set scores, ``search.numeric``; a DATE/DATETIME/TIMESTAMP
  column only with a numeric format (``formats: {col: epoch}`` or ``epoch_ms``), since the
  server drops from the index a hash whose NUMERIC field is not a number;
* TAG: the other index columns and ``search.tag``; ``CASESENSITIVE`` unless the column's
  collation is ``_ci``; ``SEPARATOR "\\x1f"`` so a value holding a comma stays one tag.

Only the columns the row hash holds can be indexed; others are left out (``skipped``). The
``digest`` names the definition: a changed one is a new version of the index
(``<name>:<digest>``), and the alias ``name`` moves to it (store/search_index.py).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from migrator.errors import MappingError
from migrator.mapping.kinds import Kind
from migrator.mapping.model import Mapping
from migrator.mapping.resolve import Resolved

TAG_SEPARATOR = "\x1f"
NUMERIC_FORMATS = ("epoch", "epoch_ms", "number")


@dataclass(frozen=True)
class Attribute:
    column: str
    field: str  # its name in the row hash
    type: str  # TAG, NUMERIC or TEXT
    case_sensitive: bool = False  # TAG only
    #: a JSON document's path to the value (``$.lang``): then ``path AS field``; None: the
    #: hash field itself
    path: str | None = None

    def args(self) -> list[str]:
        name = [self.field] if self.path is None else [self.path, "AS", self.field]
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

    def tags(self) -> tuple[Attribute, ...]:
        return tuple(a for a in self.attributes if a.type == "TAG")

    def command(self) -> list[str]:
        return ["FT.CREATE", self.version, *self.args()]


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def definitions(resolved: Sequence[Resolved], mapping: Mapping | None = None) -> list[SearchIndex]:
    """The search indexes the tables ask for (MappingError, exit 2, for a bad one: with the
    mapping's file and line when ``mapping`` is given)."""
    out = []
    for r in resolved:
        try:
            index = definition(r)
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


def definition(r: Resolved) -> SearchIndex | None:
    """The table's search index, or None when the mapping asks for none."""
    search = r.table.search
    if search is None:
        return None
    path = f"tables.{r.name}.search"
    if r.table.kind != "hash":
        raise MappingError(
            f"a search index needs the rows as hashes, but table {r.name} is 'as: {r.table.kind}'",
            path=path, hint="write 'as: hash' (the default) or remove 'search'",
        )  # fmt: skip
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
        if column not in r.columns:
            skipped.append(column)
            continue
        col = ts.column(column)
        kind = forced or ("NUMERIC" if col.kind.numeric or col.kind.temporal else "TAG")
        if kind == "NUMERIC" and not _numeric_in_hash(col.kind, formats.get(column)):
            if forced is None and not col.kind.temporal:
                kind = "TAG"
            else:
                raise MappingError(
                    f"column {column} ({col.column_type}) of table {r.name} would be a NUMERIC "
                    "attribute, but the row hash holds it as text, which the server cannot index",
                    path=path,
                    hint=f"write it as a number: formats: {{{column}: epoch}} (or epoch_ms)",
                )
        ci = (col.collation or "").endswith("_ci")
        attrs.append(Attribute(column, fields.get(column, column), kind, not ci))
    if not attrs:
        raise MappingError(
            f"the search index of table {r.name} would index nothing: no index, unique, "
            "sorted-set score or FULLTEXT column is in its row hash",
            path=path, hint="name columns to index: search: {name: ..., tag: [col], text: [col]}",
        )  # fmt: skip
    exclude = tuple(_excluded(r, prefix))
    return SearchIndex(r.name, search.name, prefix, exclude, tuple(attrs), tuple(skipped))


def _numeric_in_hash(kind: Kind, fmt: str | None) -> bool:
    if fmt is not None:
        return fmt in NUMERIC_FORMATS
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
