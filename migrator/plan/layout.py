"""A table's row layout: the columns read (primary key first), their positions in a row, and
the key functions built from the mapping's templates. Shared by the planner's structures,
the packed hot path and verify."""

from __future__ import annotations

import re

from migrator.mapping.cascades import WEIGH, weighed_columns
from migrator.mapping.keyspace import separator_count
from migrator.mapping.model import Template
from migrator.mapping.resolve import Resolved, column_uses
from migrator.plan.batch import KeyFn, Row, Stats, compile_template, joiner
from migrator.plan.escape import (
    AMBIGUOUS,
    BACKSLASH,
    composite,
    escaper,
    first_ambiguous,
    joined,
    matched,
    may_need_escape,
    needles,
    reader,
    separator_chars,
)
from migrator.plan.values import formatter


class TableLayout:
    """Where one table's row values sit (``select``, ``pos``) and the keys they make."""

    def __init__(self, resolved: Resolved) -> None:
        self.resolved = resolved
        self.table = resolved.table
        self.table_sep = resolved.separator
        self.sep = resolved.separator.encode()
        self.select = self._select_columns()
        self.pos = {name: i for i, name in enumerate(self.select)}
        #: the text columns of cascading foreign keys MySQL compares under a collation
        #: (mapping/cascades.py ``weighed``; their rows are found by plan/row_images.py's SETs):
        #: a row read for the table holds after ``select`` the server's comparison key of each
        #: (``row_names``: the names the source selects, source/selects.py); none for a nested table
        #: or one with ``expire:``, which keep no row images
        kept = self.table.nest is None and self.table.expire is None
        self.weighed = tuple(c for c in weighed_columns(resolved.schema) if c in self.pos and kept)
        self.row_names = self.select + tuple(WEIGH + c for c in self.weighed)
        # separators inside values (migrator/plan/escape.py): the escape function and the
        # positions it may change (escape: backslash), or the positions to look at (reject)
        sep, kind = self.table_sep, self._kind
        self.esc = escaper(self.sep) if resolved.escape == BACKSLASH else None
        self.escapable = frozenset(
            self.pos[c]
            for c in self.select
            if self.esc is not None and may_need_escape(kind(c), sep)
        )
        self._counts: dict[str, int | None] = {}
        self._readers: dict[tuple[Template, bool], re.Pattern[bytes]] = {}
        self.sep_chars = separator_chars(sep)
        self.needles = needles(self.sep_chars)
        # under escape: reject, per ambiguous composite (two or more of its columns hold the
        # separator a varying number of times): the positions of all its columns (it is only
        # written when none is NULL) and of those varying columns
        guards: dict[tuple[int, ...], tuple[tuple[int, str], ...]] = {}
        for group in self.composites() if self.esc is None else []:
            looked_at = tuple((self.pos[c], c) for c in dict.fromkeys(group) if self.varies(c))
            if len(looked_at) > 1:
                guards[tuple(sorted({self.pos[c] for c in group}))] = looked_at
        self.guards = list(guards.items())
        #: every position looked at, with its column (empty: no row can be ambiguous)
        self.checked = list(dict.fromkeys(x for _, looked_at in self.guards for x in looked_at))
        self.row_key = self.key_fn(self.resolved.key)
        key = self.resolved.key
        self.row_key_positions = [self.pos[key.columns[p]] for p in key.parts if isinstance(p, int)]
        self.pk_text = self.join_fn(self.resolved.primary_key)
        # field names and value formats of the row hash / column strings (fields:, formats:)
        self.field_names = dict(self.table.fields)
        self.formatters = {
            self.pos[c]: formatter(f, self._kind(c))  # type: ignore[arg-type]
            for c, f in self.table.formats
        }
        templates = [t for t in self._templates() if t.lowered]
        #: a field format or lower() in a template: the generated fast paths are left out
        self.transforms = bool(self.formatters) or bool(templates)

    def field(self, column: str) -> bytes:
        """The name a column's value has in the row hash (and after a column string's key)."""
        return self.field_names.get(column, column).encode()

    def value_fn(self, column: str) -> KeyFn | None:
        """Row -> the column's value as the row hash writes it (its format), or None when
        the column has no format (the value as it is)."""
        fmt = self.formatters.get(self.pos[column])
        if fmt is None:
            return None
        i = self.pos[column]
        return lambda row: None if row[i] is None else fmt(row[i])  # type: ignore[arg-type]

    def _templates(self) -> list[Template]:
        t = self.table
        out = [self.resolved.key, *(u.key for u in t.unique if u.key is not None)]
        out += [s.key for s in t.sorted] + [x.key for x in t.sets] + [x.member for x in t.sets]
        return out + [v.key for v in t.vector_sets]

    def _kind(self, column: str) -> object:
        return self.resolved.schema.column(column).kind

    def sep_count(self, column: str) -> int | None:
        """The separator characters every value of ``column`` holds (None: it varies)."""
        if column not in self._counts:
            c = self.resolved.schema.column(column)
            self._counts[column] = separator_count(c.kind, c.column_type, self.table_sep)
        return self._counts[column]

    def varies(self, column: str) -> bool:
        return self.sep_count(column) is None

    # -- separators inside values ----------------------------------------------------------
    def composites(self) -> list[tuple[str, ...]]:
        """The column groups whose values are joined into one key, member or field: a
        separator inside their values makes it ambiguous when two or more of them vary
        (plan/escape.py)."""
        t, r = self.table, self.resolved
        groups: list[tuple[str, ...]] = []

        def template(tp: Template) -> None:
            if composite(tp):
                groups.append(tp.columns)

        if t.kind != "none":
            template(r.key)
        for u in t.unique:
            if u.key is not None:
                template(u.key)
            elif len(u.columns) > 1:
                groups.append(u.columns)
        groups += [ix.columns for ix in r.index_sets() if len(ix.columns) > 1]
        for tp in [st.key for st in t.sorted] + [v.key for v in t.vector_sets]:
            template(tp)
        for tag in t.sets:
            template(tag.key)
            template(tag.member)
        pk_as_text = t.unique or t.indexes or t.references or t.sorted or t.latest or t.vector_sets
        if len(r.primary_key) > 1 and pk_as_text:
            groups.append(r.primary_key)
        return groups

    def key_fn(self, template: Template) -> KeyFn:
        """Row -> a key of ``template``; under ``escape: backslash`` every value is escaped."""
        return compile_template(template, self.pos, self.esc, self.escapable)

    def member_fn(self, template: Template) -> KeyFn:
        """Row -> a set member of ``template``: escaped only when it joins several values."""
        if not composite(template):
            return compile_template(template, self.pos)
        return compile_template(template, self.pos, self.esc, self.escapable)

    def join_fn(self, columns: tuple[str, ...]) -> KeyFn:
        """Row -> the columns' values joined by the separator (a composite unique entry, a
        composite primary key as a member), escaped under ``escape: backslash``."""
        return joiner([self.pos[c] for c in columns], self.sep, self.esc, self.escapable)

    def read(self, template: Template, text: bytes, escaped: bool) -> dict[str, bytes] | None:
        """The values a key or member of ``template`` was made from (None: it cannot be one);
        ``escaped``: the text is escaped under ``escape: backslash`` (keys always, members
        when composite)."""
        escaped = escaped and self.esc is not None
        regex = self._readers.get((template, escaped))
        if regex is None:
            counts = tuple(self.sep_count(c) for c in template.columns)
            regex = self._readers[template, escaped] = reader(template, self.sep, escaped, counts)
        return matched(template, regex.fullmatch(text), self.sep, escaped)

    def read_joined(self, columns: tuple[str, ...], text: bytes) -> list[bytes] | None:
        """The values of ``join_fn(columns)``'s text, in order (None: it cannot be one)."""
        if len(columns) == 1:
            return [text]
        got = self.read(joined(columns, self.table_sep), text, True)
        return None if got is None else [got[c] for c in columns]

    def ambiguous(self, row: Row) -> str | None:
        """Under ``escape: reject``, the first column whose value makes a composite ambiguous."""
        return first_ambiguous(row, self.guards, self.needles) if self.guards else None

    def reject(self, row: Row, column: str, stats: Stats) -> None:
        """Count and name a row that is not written (its primary key, the column to blame)."""
        pk = tuple(
            (v or b"").decode("utf-8", "backslashreplace")
            for v in row[: len(self.resolved.primary_key)]
        )
        stats.reject(AMBIGUOUS, pk, column)

    def _select_columns(self) -> tuple[str, ...]:
        names = list(self.resolved.primary_key)
        own_columns = f"tables.{self.table.name}.columns"
        # as: none writes no value of its own, but a nested table's are in its parent's document
        reads_own = self.table.kind != "none" or self.table.nest is not None
        wanted = [c for p, c in column_uses(self.table) if reads_own or p != own_columns]
        for c in self.resolved.schema.column_names:  # schema order, for readable SQL
            if c in wanted and c not in names:
                names.append(c)
        return tuple(names)

    # -- key names -------------------------------------------------------------------------
    def unique_hash_key(self, columns: tuple[str, ...]) -> bytes:
        return self.table_sep.join([self.table.name, "uniques", *columns]).encode()

    def index_template(self, columns: tuple[str, ...]) -> Template:
        parts = [_escape(self.table.name), "indices"]
        for c in columns:
            parts += [_escape(c), f"{{{c}}}"]
        return Template.parse(self.table_sep.join(parts))


def _escape(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")
