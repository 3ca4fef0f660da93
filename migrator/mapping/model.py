"""The mapping as frozen data. No I/O here: loader.py reads it, build.py builds it, resolve.py
completes it."""

from __future__ import annotations

import re
from collections import abc
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from migrator.mapping.expiry import Expiry
    from migrator.mapping.where import Filter

Kind = Literal["hash", "columns", "json", "json-string", "none"]
KINDS: tuple[Kind, ...] = ("hash", "columns", "json", "json-string", "none")
#: the kinds that write one JSON document per row (docs/values.md#json-documents): RedisJSON
#: (``json``) or a JSON text in a STRING (``json-string``)
DOCUMENTS: tuple[Kind, ...] = ("json", "json-string")

_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([^{}]*)\}")
_LOWER = re.compile(r"\s*lower\(\s*([^()]*?)\s*\)\s*$")


@dataclass(frozen=True)
class Template:
    """A key template such as ``emp:{emp_id}``: literal text with ``{column}`` placeholders.

    ``{{`` and ``}}`` stand for literal braces; ``{lower(column)}`` is the column's value in
    lower case (``login:{lower(name)}:id``).
    """

    text: str
    parts: tuple[str | int, ...]  # literal strings, or an index into ``columns``
    columns: tuple[str, ...]
    #: per entry of ``columns``: written through lower(); () when none is
    lowered: tuple[bool, ...] = ()

    @classmethod
    def parse(cls, text: str) -> Template:
        parts: list[str | int] = []
        columns: list[str] = []
        lowered: list[bool] = []
        pos = 0
        literal = ""
        for m in _PLACEHOLDER.finditer(text):
            literal += text[pos : m.start()]
            pos = m.end()
            if m.group(0) == "{{":
                literal += "{"
            elif m.group(0) == "}}":
                literal += "}"
            else:
                name = m.group(1)
                if not name:
                    raise ValueError("empty placeholder '{}'")
                low = _LOWER.match(name)
                if low is not None:
                    name = low.group(1)
                    if not name:
                        raise ValueError("lower() names no column: write {lower(column)}")
                elif "(" in name or ")" in name:
                    raise ValueError(
                        f"unknown function in {{{name}}}: the only one is lower(column)"
                    )
                if literal:
                    parts.append(literal)
                    literal = ""
                entries = list(zip(columns, lowered))
                if (name, low is not None) not in entries:
                    columns.append(name)
                    lowered.append(low is not None)
                    entries.append((name, low is not None))
                parts.append(entries.index((name, low is not None)))
        rest = text[pos:]
        if "{" in rest or "}" in rest:
            raise ValueError("unbalanced brace (write '{{' or '}}' for a literal brace)")
        literal += rest
        if literal:
            parts.append(literal)
        return cls(text, tuple(parts), tuple(columns), tuple(lowered) if any(lowered) else ())

    @property
    def is_literal(self) -> bool:
        return not self.columns

    def is_lowered(self, index: int) -> bool:
        """Whether the placeholder of ``columns[index]`` is written through lower()."""
        return bool(self.lowered) and self.lowered[index]

    def render(self, values: abc.Mapping[str, str]) -> str:
        return "".join(
            p if isinstance(p, str) else _lower(values[self.columns[p]], self.is_lowered(p))
            for p in self.parts
        )

    def glob(self) -> str:
        """A SCAN MATCH pattern for every key the template can produce."""
        out = []
        for p in self.parts:
            out.append(_glob_escape(p) if isinstance(p, str) else "*")
        return "".join(out)


def _lower(value: str, lowered: bool) -> str:
    return value.lower() if lowered else value


def _glob_escape(text: str) -> str:
    return re.sub(r"([*?\[\]\\])", r"\\\1", text)


@dataclass(frozen=True)
class Retries:
    """How transient failures are retried (migrator/retry.py): ``attempts`` retries in a
    row at most, waiting ``backoff`` seconds, doubled each time up to ``max_backoff``."""

    attempts: int = 8
    backoff: float = 0.5
    max_backoff: float = 10.0


#: the row changes a change stream can carry (mapping/streams.py)
OPS = ("insert", "update", "delete")
#: how an entry holds the row's images (mapping/streams.py)
FORMS = ("fields", "json")


@dataclass(frozen=True)
class Streams:
    """A table's change stream: its key (``{table}`` already rendered), the operations it
    carries, its columns (``all``, ``keys``, or named ones) and its trimming."""

    key: str
    ops: tuple[str, ...] = OPS
    columns: str | tuple[str, ...] = "all"
    maxlen: int | None = None
    #: trim the entries older than that many seconds (``XADD ... MINID ~``)
    maxage: float | None = None
    #: the key as written, for people
    template: str = ""
    #: the first load appends one ``snapshot`` entry per row it writes
    snapshot: bool = False
    #: the images as entry fields (``fields``) or as one JSON object each (``json``)
    form: str = "fields"


@dataclass(frozen=True)
class StreamDefaults:
    """``options.streams``: what every table's stream has unless the table says otherwise."""

    template: Template
    ops: tuple[str, ...] = OPS
    columns: str = "all"
    maxlen: int | None = None
    #: trim the entries older than that many seconds (``XADD ... MINID ~``)
    maxage: float | None = None
    snapshot: bool = False
    form: str = "fields"


@dataclass(frozen=True)
class Options:
    separator: str = ":"
    nulls: Literal["omit"] = "omit"
    batch_size: int = 5000
    #: globs (Redis SCAN syntax) of keys under the mapping's key space that it does not own
    ignore: tuple[str, ...] = ()
    retries: Retries = Retries()
    #: a separator inside a value of a composite key: "reject" the row, or "backslash"-escape
    #: it (migrator/plan/escape.py)
    escape: str = "reject"
    #: ``streams:`` for every table (mapping/streams.py); out of the repr: the keys the
    #: tables load do not depend on it (sync/identity.py)
    streams: StreamDefaults | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Unique:
    """A unique index. ``key`` None: one HASH ``{table}:uniques:{cols}`` {value -> pk};
    otherwise a STRING per value, named by the template (``login:{name}:id`` -> pk)."""

    columns: tuple[str, ...]
    key: Template | None = None


@dataclass(frozen=True)
class Index:
    """A non-unique index: a SET per value, ``{table}:indices:c1:v1[:c2:v2]`` {pk...}."""

    columns: tuple[str, ...]


@dataclass(frozen=True)
class Reference:
    """A foreign key, kept as a child-side index on ``columns``; ``table`` is the parent."""

    columns: tuple[str, ...]
    table: str
    parent_columns: tuple[str, ...] | None = None  # default: the parent's primary key


@dataclass(frozen=True)
class Sorted:
    """A SORTED SET: member = primary key, score = a numeric or temporal column."""

    key: Template
    score: str


#: a vector set's quantization (VADD's NOQUANT, Q8, BIN); noquant keeps every float exact
QUANTS = ("noquant", "q8", "bin")


@dataclass(frozen=True)
class VectorSet:
    """A Redis 8 vector set (``VADD``): element = primary key, vector = a VECTOR column (or a
    BLOB/VARBINARY of packed little-endian float32, ``dim`` declared), attributes = columns
    given to ``VSIM ... FILTER`` as a JSON object (mapping/vector_sets.py)."""

    key: Template
    vector: str
    dim: int | None = None  # None: the VECTOR column's own
    attributes: tuple[str, ...] = ()
    quant: str = "noquant"
    m: int | None = None  # HNSW M (VADD ... M); None: the server's default
    ef: int | None = None  # the build's EF (VADD ... EF); None: the server's default


@dataclass(frozen=True)
class Latest:
    """A capped LIST of primary keys, newest ``order_by`` first, at most ``limit`` long."""

    key: Template
    order_by: str
    limit: int = 100


@dataclass(frozen=True)
class SetSpec:
    """A SET per rendered ``key``, holding the rendered ``member`` (tag tables)."""

    key: Template
    member: Template


#: a vector field's algorithms and distance metrics (FT.CREATE ... VECTOR)
VECTOR_ALGORITHMS = ("FLAT", "HNSW")
VECTOR_METRICS = ("COSINE", "L2", "IP")
#: each algorithm's optional parameters, as the mapping spells them (FT.CREATE's in capitals)
VECTOR_PARAMS = {
    "FLAT": ("initial_cap", "block_size"),
    "HNSW": ("initial_cap", "m", "ef_construction", "ef_runtime", "epsilon"),
}


@dataclass(frozen=True)
class VectorField:
    """A vector attribute of a search index (``FT.CREATE ... VECTOR FLAT|HNSW``): ``column``
    (or a nested child's, ``variants.embedding``) holds float32 values, little-endian, 4 bytes
    each: a VECTOR column, or a BLOB/VARBINARY of ``dim`` of them. ``params``: the algorithm's
    own (name, value), as the mapping gives them."""

    column: str
    metric: str
    algorithm: str = "FLAT"
    dim: int | None = None  # a BLOB's; None: the VECTOR column's
    params: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class Search:
    """A search index of the table's rows (``FT.CREATE ... ON HASH``; plan/search.py): the
    application queries it by ``name``, an alias the tool moves to each new version.
    ``tag``/``numeric``/``text``: columns indexed besides those the mapping's and MySQL's
    indexes give; ``index_sets`` False leaves the table's SET indexes out (the server keeps
    the search index instead); ``vector``: the vector attributes."""

    name: str
    index_sets: bool = True
    tag: tuple[str, ...] = ()
    numeric: tuple[str, ...] = ()
    text: tuple[str, ...] = ()
    vector: tuple[VectorField, ...] = ()


@dataclass(frozen=True)
class Nest:
    """The table's rows embedded in their parent's JSON document (plan/nesting.py): under
    the field ``field`` of the row of ``parent`` that the foreign key ``by`` (None: the
    table's foreign key to ``parent``) points at. ``kind``: ``array`` (ordered by ``order``,
    ties by the primary key), ``map`` (keyed by the row's primary key) or ``object`` (one
    row per parent)."""

    parent: str
    field: str
    by: tuple[str, ...] | None = None
    kind: str = "array"
    order: tuple[str, ...] = ()


NEST_KINDS = ("array", "map", "object")


@dataclass(frozen=True)
class Table:
    name: str
    primary_key: tuple[str, ...] | None = None  # None: introspected
    key: Template | None = None  # None: "{table}:{pk1}[:{pk2}...]"
    kind: Kind = "hash"
    columns: tuple[str, ...] | None = None  # None: every non-primary-key column
    counter: Template | Literal[False] | None = None  # None: default, False: no counter
    unique: tuple[Unique, ...] = ()
    indexes: tuple[Index, ...] = ()
    references: tuple[Reference, ...] = ()
    sorted: tuple[Sorted, ...] = ()
    latest: tuple[Latest, ...] = ()
    sets: tuple[SetSpec, ...] = ()
    vector_sets: tuple[VectorSet, ...] = ()
    #: column -> its name as a hash field / column-string suffix (default: the column's)
    fields: tuple[tuple[str, str], ...] = ()
    #: column -> how its value is written in the row hash / column strings (FORMATS)
    formats: tuple[tuple[str, str], ...] = ()
    #: only the rows this filter keeps are in Redis (mapping/where.py); None: every row
    where: Filter | None = None
    #: how long each row's own keys live (mapping/expiry.py); None: for ever
    expire: Expiry | None = None
    #: this table's own ``escape`` policy (None: ``options.escape``): the keys of the other
    #: tables stay as they are
    escape: str | None = None
    #: a search index of the rows (None: none). Out of the repr: the fingerprints of what the
    #: keys depend on (sync/identity.py) stay as they were; ``index_sets: false``, which
    #: changes the keys, is added to them by name
    search: Search | None = field(default=None, repr=False)
    #: embedded in the parent's document (None: not nested); out of the repr as ``search``
    nest: Nest | None = field(default=None, repr=False)
    #: the table's change stream, options' defaults applied (None: none); out of the repr
    streams: Streams | None = field(default=None, repr=False)

    @property
    def document_vectors(self) -> tuple[str, ...]:
        """The own columns a document table's ``search.vector`` names: its documents hold
        them as arrays of numbers (a BLOB's would be base64 otherwise), so they are part of
        what its keys depend on (sync/identity.py, mapping/fingerprint.py)."""
        if self.search is None or self.kind != "json":
            return ()
        return tuple(sorted(v.column for v in self.search.vector if "." not in v.column))

    @property
    def without_index_sets(self) -> bool:
        """A search index stands in for the SET indexes (``search: {index_sets: false}``)."""
        return self.search is not None and not self.search.index_sets


@dataclass(frozen=True)
class Shard:
    """One of the servers of a sharded source (``sources:``): the same schema, some of the
    rows. ``name`` is short (letters, digits, ``_``, ``-``): it names the shard in reports,
    in the keys of its position and state, and in ``--shard``."""

    name: str
    url: str


@dataclass(frozen=True)
class Mapping:
    """One migration: where from, where to, how each table becomes keys."""

    version: int
    source: str | None
    target: str | None
    options: Options
    tables: tuple[Table, ...]
    sources: tuple[Shard, ...] = ()  # a sharded source: exclusive with ``source``
    name: str = "mapping"  # used for checkpoint keys: migrator:<name>:...
    file: str | None = None
    lines: abc.Mapping[str, int] = field(default_factory=dict, compare=False, repr=False)

    def table(self, name: str) -> Table:
        for t in self.tables:
            if t.name == name:
                return t
        raise KeyError(name)

    def kept(self) -> tuple[str, ...]:
        """Globs of the keys under the tables' key spaces that are not theirs: the
        ``options.ignore`` globs and the change streams (which verify does not call stray
        and ``migrate --replace`` / ``sync --reload`` leave alone)."""
        streams = dict.fromkeys(_glob_escape(t.streams.key) for t in self.tables if t.streams)
        return (*self.options.ignore, *streams)

    def __iter__(self) -> abc.Iterator[Table]:
        return iter(self.tables)

    def line_of(self, path: str) -> int | None:
        """The YAML line of ``path`` (``tables.emp.indexes[1]``), or of its nearest parent."""
        while path:
            if path in self.lines:
                return self.lines[path]
            cut = max(path.rfind("."), path.rfind("["))
            path = path[:cut] if cut > 0 else ""
        return None
