"""Live schema -> mapping -> commented YAML: what ``migrator init`` writes (the defaults of
docs/mapping.md, "What `migrator init` drafts").

The draft is data first (:class:`Draft`, one :class:`TableDraft` per table, each a plain
dict in the mapping's own shape plus the comments a person needs), rendered to YAML last.
Every scalar is written by ``yaml.safe_dump``, so names with spaces, colons or braces stay
intact; braces in names are doubled inside key templates.

Choices beyond those defaults, all of them written into the file as comments:

* a foreign key is written as ``references`` (it names its parent, which ``verify`` checks);
  a non-unique index on exactly the same columns is then left out, since it would be the
  very same SET (docs/mapping.md: "written once, never twice");
* a UNIQUE index on the primary key is left out (it would map each key to itself), and so
  is any index that contains the primary key (each SET would hold a single row), a prefix
  index (``KEY (title(191))``: MySQL indexes the start of a value, Redis keys would hold
  it whole) and an index on a TEXT or BLOB column; each gets a comment saying why;
* a table with no key is left out, with an example ``primary_key``/``key`` to map it by hand
  when some columns are unique and never NULL in its rows (``mapping.profile``), else saying
  that none is;
* a non-unique index on a date/time column, or on a numeric one holding about a value per
  row, becomes a sorted set scored by it, the SET-per-value form in a comment;
* a column whose name contains a brace cannot be named by a ``{column}`` placeholder; a
  table that needs one in its key is left out, saying why.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

import yaml

from migrator.errors import SourceError, docs
from migrator.mapping.cascades import cascade_notes
from migrator.mapping.profile import NO_PROFILE, Profile, as_sorted, proven_identity
from migrator.mapping.schema import IndexInfo, Schema, TableSchema
from migrator.mapping.shape import suggest
from migrator.urls import mask

BatchSize = 5000


def esc(text: str) -> str:
    """Literal text inside a key template: braces doubled."""
    return text.replace("{", "{{").replace("}", "}}")


def placeholder(column: str) -> str:
    return "{" + column + "}"


def placeable(column: str) -> bool:
    """A column can be named by a ``{column}`` placeholder (no braces in its name)."""
    return "{" not in column and "}" not in column


@dataclass
class TableDraft:
    name: str
    body: dict[str, Any] | None  # None: left out of the mapping
    notes: list[str] = field(default_factory=list)  # comment lines above the table
    rows: int = 0
    comments: dict[str, list[str]] = field(default_factory=dict)  # after a key of the body


@dataclass
class Draft:
    source: str  # masked
    source_setting: str  # what the file's 'source:' says (never a password)
    database: str
    date: str
    separator: str
    tables: list[TableDraft]
    views: tuple[str, ...]
    #: table -> rows the default ``escape: reject`` would not write (then that table, and
    #: only it, gets ``escape: backslash``: the other tables' keys stay as they are)
    rejects: dict[str, int] = field(default_factory=dict)
    #: a sharded source's ``sources:`` (name, URL setting), drafted from the first's schema
    shards: tuple[tuple[str, str], ...] = ()

    @property
    def mapped(self) -> list[TableDraft]:
        return [t for t in self.tables if t.body is not None]

    def as_dict(self) -> dict[str, Any]:
        """The mapping as plain data (what ``yaml.safe_load`` of :meth:`render` gives)."""
        return {
            "version": 1,
            **(
                {"sources": [{"name": n, "url": u} for n, u in self.shards]}
                if self.shards
                else {"source": self.source_setting}
            ),
            "options": {
                "separator": self.separator,
                "batch_size": BatchSize,
            },
            "tables": {
                t.name: {**t.body, **({"escape": "backslash"} if t.name in self.rejects else {})}
                for t in self.mapped
                if t.body is not None
            },
        }

    def render(self) -> str:
        return render(self)


def is_join_table(ts: TableSchema) -> bool:
    """Every column is in a primary key of two or more columns (the tag example)."""
    return len(ts.primary_key) >= 2 and set(ts.column_names) == set(ts.primary_key)


def draft_table(
    ts: TableSchema, schema: Schema, sep: str, profile: Profile | None = None
) -> TableDraft:
    """One table's defaults (docs/mapping.md), written out in full so a person can edit them;
    ``profile``: what the rows said (None: they were not read)."""
    d = TableDraft(ts.name, None, rows=ts.row_estimate)
    pk = ts.row_identity()
    if not pk:
        d.notes.append(
            f"{ts.name}: left out: no primary key and no NOT NULL unique index to key its "
            "rows; add one in MySQL, or map it by hand with primary_key: [columns...] "
            "(MySQL will not enforce it; migrate and verify report rows that share a key)"
        )
        d.notes += by_hand(ts, sep, profile)
        return d
    bad = [c for c in pk if not placeable(c)]
    if bad:
        d.notes.append(
            f"{ts.name}: left out: key column {bad[0]!r} has a brace in its name, which a "
            "{column} placeholder cannot name"
        )
        return d
    body: dict[str, Any] = {}
    d.notes += cascade_notes(ts, schema)
    if not ts.primary_key:
        body["primary_key"] = list(pk)
        d.notes.append(f"no primary key: rows keyed by the NOT NULL unique index on {_cols(pk)}")
    if is_join_table(ts):
        return _join_table(d, ts, body, sep)
    body["key"] = sep.join([esc(ts.name), *(placeholder(c) for c in pk)])
    body["columns"] = [c for c in ts.column_names if c not in pk]
    if len(pk) == 1 and ts.column(pk[0]).is_integer:
        body["counter"] = f"{esc(ts.name)}{sep}id"
    unique: list[Any] = []
    indexes: list[Any] = []
    scored: list[dict[str, str]] = []
    references: list[dict[str, Any]] = []
    covered: list[str] = []
    # a reference names a table of the source's database: another database's parent has its
    # foreign key's index drafted under indexes (the same SETs), and no references entry
    fk_columns = {fk.columns for fk in ts.foreign_keys if not fk.parent_database}
    for ix in ts.indexes:
        if not ts.primary_key and ix.columns == pk:
            continue  # the NOT NULL unique index the rows are keyed by (noted above)
        why = left_out(ix, ts, pk)
        if why:
            d.notes.append(why)
        elif ix.unique:
            entry = _names(ix.columns)
            if entry not in unique:
                unique.append(entry)
        elif ix.columns in fk_columns:
            covered.append(_cols(ix.columns))
        elif as_sorted(ts, ix.columns, profile or NO_PROFILE):
            zset = sorted_entry(ts.name, ix.columns[0], sep)
            if zset not in scored:
                scored.append(zset)
                d.comments.setdefault("sorted", []).append(
                    f"{ix.columns[0]}: range queries by score (ZRANGE {zset['key']} A B "
                    "BYSCORE); a SET per value would hold about one row each. That form "
                    f"instead: indexes: [{scalar(ix.columns[0])}]"
                )
        else:
            entry = _names(ix.columns)
            if entry not in indexes:
                indexes.append(entry)
    if covered:
        d.notes.append(
            f"index{'es' if len(covered) > 1 else ''} on {', '.join(covered)}: the same SETs "
            "as the foreign keys under references, written there once"
        )
    for fk in (k for k in ts.foreign_keys if not k.parent_database):
        ref: dict[str, Any] = {"columns": _names(fk.columns), "table": fk.parent}
        parent = schema.tables.get(fk.parent)
        if parent is None or parent.primary_key != fk.parent_columns:
            ref["parent_columns"] = _names(fk.parent_columns)
        if ref not in references:
            references.append(ref)
    for name, items in (
        ("unique", unique),
        ("indexes", indexes),
        ("sorted", scored),
        ("references", references),
    ):
        if items:
            body[name] = items
    d.body = body
    return d


def by_hand(ts: TableSchema, sep: str, profile: Profile | None) -> list[str]:
    """The example for a table left out for want of a key: columns the rows prove unique
    and never NULL, or why there are none."""
    if profile is None:
        return ["its rows were not read: no columns to suggest as its key"]
    rows = profile.rows.get(ts.name, 0)
    cols = proven_identity(ts, profile)
    if cols is None:
        why = (
            "it has no rows" if not rows else f"none is unique and never NULL in its {rows:,} rows"
        )
        return [f"no column or index can key it ({why}): add a primary key in MySQL first"]
    key = sep.join([esc(ts.name), *(placeholder(c) for c in cols)])
    return [
        f"{_cols(cols)} is unique and never NULL in all {rows:,} rows today, e.g.:",
        f"  {scalar(ts.name)}:",
        f"    primary_key: {scalar(list(cols))}",
        f"    key: {scalar(key)}",
    ]


def sorted_entry(table: str, column: str, sep: str) -> dict[str, str]:
    """A sorted set of the table's rows scored by ``column``: ``{table}:by:{column}``."""
    return {"key": sep.join([esc(table), "by", esc(column)]), "score": column}


def left_out(ix: IndexInfo, ts: TableSchema, pk: tuple[str, ...]) -> str | None:
    """Why an index gets no Redis structure in the draft (a comment), or None to map it."""
    what = f"{'UNIQUE ' if ix.unique else ''}index {ix.name} on {ix.shown()}"
    if ix.kind in ("FULLTEXT", "SPATIAL"):
        kind = f"{ix.kind} index {ix.name} on {ix.shown()}"
        return f"{kind} left out (Redis has no equivalent structure)"
    long = [c for c in ix.columns if ts.column(c).is_long]
    if long:
        col = ts.column(long[0])
        return (
            f"{what} left out: {col.name} is a {col.column_type.upper()} column; a Redis key "
            "per value would copy each long value into a key name (add it by hand if you "
            "need lookups by the whole value)"
        )
    if ix.is_prefix:
        return (
            f"{what} left out: a prefix index (MySQL indexes only the start of each value), "
            "while Redis keys would hold whole values (add it by hand if you need lookups "
            "by the whole value)"
        )
    if set(pk) <= set(ix.columns):
        if ix.unique and set(ix.columns) == set(pk):
            return f"{what}: the primary key itself; the row key already finds each row"
        if ix.unique:
            return f"{what} left out: it contains the primary key, which is unique already"
        return f"{what} left out: it contains the primary key, so each SET would hold a single row"
    return None


def _join_table(d: TableDraft, ts: TableSchema, body: dict[str, Any], sep: str) -> TableDraft:
    pk = ts.primary_key
    body["as"] = "none"
    sets = []
    for c in pk:
        others = sep.join(placeholder(o) for o in pk if o != c)
        key = sep.join([esc(ts.name), esc(c), placeholder(c)])
        sets.append({"key": key, "member": others})
    body["sets"] = sets
    d.notes.append(
        "join table (every column is in the primary key): no row hashes; a SET per value "
        "of each key column, in both directions"
    )
    if ts.foreign_keys or ts.indexes:
        d.notes.append("its indexes and foreign keys are served by these sets")
    d.body = body
    return d


def _names(columns: tuple[str, ...]) -> str | list[str]:
    return columns[0] if len(columns) == 1 else list(columns)


def _cols(columns: tuple[str, ...]) -> str:
    return "(" + ", ".join(columns) + ")"


def source_setting(url: str, variable: str = "MYSQL_PASSWORD") -> str:
    """The ``source:`` line for the file: the URL with any password replaced by
    ``${MYSQL_PASSWORD:-}`` (``variable``), so the secret stays in the environment."""
    shown = mask(url)
    if ":***@" in shown:
        return shown.replace(":***@", f":${{{variable}:-}}@", 1)
    return shown


def draft(
    schema: Schema,
    *,
    source: str,
    tables: list[str] | None = None,
    separator: str = ":",
    today: dt.date | None = None,
    profile: Profile | None = None,
) -> Draft:
    """The defaults (docs/mapping.md) for every base table (or only ``tables``) of ``schema``;
    ``profile``: what the rows said (``mapping.profile``), None when they were not read."""
    names = list(schema.tables)
    if tables:
        for t in tables:
            if t not in schema.tables:
                what = "is a view" if t in schema.views else "is not a table"
                raise SourceError(
                    f"--tables names '{t}', which {what} in database '{schema.database}'",
                    suggest(t, names)
                    or ("tables: " + ", ".join(names) if names else "it has no tables"),
                )
        names = [n for n in names if n in tables]
    if not names:
        views = f" (only views: {', '.join(sorted(schema.views))})" * bool(schema.views)
        raise SourceError(
            f"database '{schema.database}' has no tables{views}: there is nothing to draft",
            "create the tables first, or name the database that holds them at the end of "
            "--source (mysql+pymysql://user@host:3306/DATABASE)",
        )
    return Draft(
        source=mask(source),
        source_setting=source_setting(source),
        database=schema.database,
        date=(today or dt.date.today()).isoformat(),
        separator=separator,
        tables=[draft_table(schema.tables[n], schema, separator, profile) for n in names],
        views=tuple(sorted(schema.views)) if not tables else (),
    )


# -- rendering ---------------------------------------------------------------------------------


def scalar(value: Any) -> str:
    """One YAML value (a scalar, or a list/dict in flow style), quoted where needed."""
    text = yaml.safe_dump(
        value, default_flow_style=True, allow_unicode=True, width=1 << 30, sort_keys=False
    )
    if text.endswith("\n...\n"):
        text = text[: -len("\n...\n")]
    return text.rstrip("\n")


def _escape_lines(d: Draft, table: str) -> list[str]:
    """``escape: backslash`` for ``table`` alone, with the reason, where the default would
    reject some of its rows (the keys of the other tables stay as they are)."""
    n = d.rejects.get(table)
    if not n:
        return []
    return [
        f"    # {n:,} rows hold {d.separator!r} inside a value of a composite key, which the",
        "    # default escape: reject would not write; backslash writes them escaped (this",
        "    # table's keys and members that join values; the other tables' stay as they are)",
        "    escape: backslash",
    ]


def render(d: Draft) -> str:
    out = [
        f"# migrator mapping drafted by 'migrator init' on {d.date}",
        f"# source: {d.source} (database {d.database})"
        + (f", the first of {len(d.shards)} shards, which hold the same tables" * bool(d.shards)),
        "# the defaults, written out in full (see the documentation's mapping.md:",
        f"# {docs('mapping.md#what-migrator-init-drafts')}): edit freely, then check with",
        "#   migrator validate THIS_FILE" + (" --source URL" * (not d.shards)),
        "# init never drafts these; add them to a table by hand where wanted:",
        "#   where: \"status = 'active'\"      only the rows a filter keeps (mapping.md#where)",
        "#   fields: {login_times: times}    field names; formats: {created: epoch} value",
        "#                                   formats (mapping.md#fields, #formats)",
        "#   expire: 1h  or  expire: {column: ends_at, offset: 1d}   keys that expire, a",
        "#                                   fixed ttl or a column's moment (mapping.md#expire)",
        "#   as: json  or  as: json-string   a JSON document per row instead of a hash",
        "#                                   (mapping.md#as)",
        "#   nest: {in: book, as: tags}      a child table inside its parent's documents",
        "#                                   (mapping.md#nested-children)",
        "#   search: {name: books}           a search index made from the mapping and MySQL's",
        "#                                   indexes (mapping.md#search)",
    ]
    if d.shards and any("${MYSQL_PASSWORD" in u for _, u in d.shards):
        out.append("# the passwords are not stored here: export each MYSQL_PASSWORD_<SHARD>=...")
    elif "${MYSQL_PASSWORD" in d.source_setting:
        out.append("# the password is not stored here: export MYSQL_PASSWORD=... or pass --source")
    if d.views:
        out.append("# views skipped (only base tables are migrated): " + ", ".join(d.views))
    out += [
        "version: 1",
        *(
            ["sources:", *(f"  - {scalar({'name': n, 'url': u})}" for n, u in d.shards)]
            if d.shards
            else [f"source: {scalar(d.source_setting)}"]
        ),
        "# target: redis://127.0.0.1:6379/0   (the default; or --target / MIGRATOR_TARGET_URL)",
        "options:",
        f"  separator: {scalar(d.separator)}",
        f"  batch_size: {BatchSize}",
        "tables:",
    ]
    for t in d.tables:
        out.append("")
        if t.body is None:
            out += [f"  # {note}" for note in t.notes]
            continue
        out.append(f"  # {t.name}: ~{t.rows:,} rows (estimate)")
        out += [f"  # {note}" for note in t.notes]
        out.append(f"  {scalar(t.name)}:")
        for key, value in t.body.items():
            if isinstance(value, list) and value and key != "columns" and key != "primary_key":
                out.append(f"    {key}:")
                out += [f"      - {scalar(item)}" for item in value]
            else:
                out.append(f"    {key}: {scalar(value)}")
            out += [f"    # {c}" for c in t.comments.get(key, [])]
        out += _escape_lines(d, t.name)
    if not d.mapped:
        out.append("  {}  # no table could be mapped (see the comments above)")
    return "\n".join(out) + "\n"
