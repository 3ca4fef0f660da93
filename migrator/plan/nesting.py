"""Children nested in their parent's JSON document (``nest:``; docs/mapping.md#nested-children).

A nesting tree hangs under a table mapped ``as: json`` / ``as: json-string`` (the top): each
level is a table whose ``nest: {in: ...}`` names its parent, joined through a foreign key
(``by``: the child's columns; the parent's columns they point at: ``refs``). A parent's
document is its own fields (plan/documents.py) plus one field per nested table:

* ``array``: the children's documents ordered by ``order`` (default: the primary key), ties by
  the primary key; values compare as numbers for numeric columns, else by their bytes; NULL
  first;
* ``map``: an object keyed by each child's primary key (its values joined by the separator);
* ``object``: the one child, or ``null`` (the child with the lowest primary key when several
  point at the same parent: ``validate`` asks for a unique key on ``by``).

Each child's document is its own written columns (its ``columns:``, ``fields:``,
``formats:``) plus its own nested children. The same bytes come out in ``migrate`` and
``verify``: keys sorted, no whitespace. This module is pure: the rows come from
source/nesting.py.

The rows of a tree kept beside its documents for ``sync`` (plan/nesting_side.py) hold, on
some tables, rows in no document, so that a row entering one brings its whole subtree
(``Level.whole`` and ``Level.roots``); the documents show only the rows their filters keep
(``Level.shows``), as read with each table's ``where:``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from migrator.errors import MigratorError
from migrator.mapping.filter_rules import compares_values
from migrator.mapping.kinds import Kind
from migrator.mapping.model import DOCUMENTS, Nest
from migrator.plan.batch import Command, Row
from migrator.plan.documents import NULL, Parts, parts_function, render, string
from migrator.plan.layout import TableLayout
from migrator.plan.structures import document_kind, vector_positions
from migrator.plan.where import row_test

_NUMERIC = (Kind.INTEGER, Kind.BIT, Kind.YEAR, Kind.DECIMAL, Kind.FLOAT, Kind.DOUBLE)


@dataclass
class Level:
    """One table of a nesting tree: its layout, and how its rows hang under their parent."""

    layout: TableLayout
    nest: Nest | None  # None: the top
    by: tuple[int, ...] = ()  # positions, in this table's rows, of the columns naming the parent
    refs: tuple[int, ...] = ()  # positions, in the parent's rows, of the columns they name
    children: list[Level] = field(default_factory=list)
    #: every row is read and kept beside the documents, those its ``where:`` leaves out too
    #: (set by ``trees``: see ``keeping``)
    whole: bool = False
    #: its rows with a NULL in the foreign key to the parent are kept (with their subtrees)
    roots: bool = False
    keeps: Callable[[Row], bool] | None = field(init=False)  # the row filter, None: none
    parts: Callable[[Row], Parts] = field(init=False)
    sort_key: Callable[[Row], Any] = field(init=False)

    def __post_init__(self) -> None:
        lay = self.layout
        cols = lay.resolved.columns
        schema = lay.resolved.schema
        self.parts = parts_function(
            [(lay.field(c), lay.pos[c]) for c in cols],
            {lay.pos[c]: document_kind(schema.column(c)) for c in cols},
            lay.formatters,
            {lay.pos[c]: f for c, f in lay.table.formats},
            vector_positions(lay),
        )
        pk = lay.resolved.primary_key
        order = (self.nest.order if self.nest is not None else ()) or pk
        steps = [(lay.pos[c], schema.column(c).kind in _NUMERIC) for c in (*order, *pk)]
        self.sort_key = lambda row: tuple(_comparable(row[i], n) for i, n in steps)
        where = lay.table.where
        self.keeps = None if where is None else row_test(where, lay.pos, schema)

    def shows(self, row: Row) -> bool:
        """Whether a row read (and kept) is in a document, as far as its own table says: the
        filter of a ``whole`` table (the others are read with it)."""
        return not self.whole or self.keeps is None or self.keeps(row)

    @property
    def name(self) -> str:
        return self.layout.table.name

    def tables(self) -> list[str]:
        return [self.name, *(t for c in self.children for t in c.tables())]


def _comparable(value: bytes | None, numeric: bool) -> tuple[bool, Any]:
    if value is None:
        return (False, b"")
    return (True, Decimal(value.decode()) if numeric else bytes(value))


def parent_of(nest: Nest, child: Any, parent: Any) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the child's columns, the parent's columns they point at) of a nesting; ``child``
    and ``parent``: their TableSchema. Raises MigratorError when no foreign key says so."""
    fks = [fk for fk in child.foreign_keys if fk.parent == parent.name]
    if nest.by is not None:
        fks = [fk for fk in fks if tuple(fk.columns) == tuple(nest.by)]
        if not fks:
            raise MigratorError(
                f"tables.{child.name}.nest.by: no foreign key ({', '.join(nest.by)}) -> "
                f"{parent.name}",
                "declare that foreign key in MySQL, or name its columns in nest.by",
            )
    elif len(fks) != 1:
        what = "no foreign key" if not fks else f"{len(fks)} foreign keys"
        raise MigratorError(
            f"tables.{child.name}.nest: {child.name} has {what} to {parent.name}",
            "declare one in MySQL" if not fks else "choose one with nest.by: [columns]",
        )
    return tuple(fks[0].columns), tuple(fks[0].parent_columns)


def trees(layouts: Mapping[str, TableLayout]) -> dict[str, Level]:
    """The nesting tree of each top table (mapped as a document, with nested children),
    from the layouts of every mapped table. Raises MigratorError on a nesting that cannot
    be (a parent not in the mapping, not a document, a cycle, no foreign key)."""
    nested = {n: lay for n, lay in layouts.items() if lay.table.nest is not None}
    if not nested:
        return {}
    for name, lay in nested.items():
        nest = lay.table.nest
        assert nest is not None
        top, seen = nest.parent, [name]
        while top in nested:
            if top in seen:
                raise MigratorError(
                    f"tables.{name}.nest: a cycle ({' -> '.join([*seen, top])})",
                    "a table cannot be nested, through its parents, in itself",
                )
            seen.append(top)
            parent_nest = layouts[top].table.nest
            assert parent_nest is not None
            top = parent_nest.parent
        if top not in layouts:
            raise MigratorError(
                f"tables.{name}.nest.in: '{top}' is not a mapped table",
                "nest a table in a table of the mapping",
            )
        if lay.table.expire is not None:
            raise MigratorError(
                f"tables.{name}.expire: a nested table's rows live in their parent's document",
                "drop expire: from the nested table (or nest: from it)",
            )
        if layouts[top].table.kind not in DOCUMENTS:
            raise MigratorError(
                f"tables.{name}.nest.in: '{top}' is mapped as: {layouts[top].table.kind}",
                f"map '{top}' as: json or as: json-string, whose documents hold its children",
            )

    def level(lay: TableLayout, nest: Nest | None, parent: TableLayout | None) -> Level:
        by: tuple[int, ...] = ()
        refs: tuple[int, ...] = ()
        if nest is not None and parent is not None:
            cols, pcols = parent_of(nest, lay.resolved.schema, parent.resolved.schema)
            mine = [c for c in cols if c not in lay.pos]
            theirs = [c for c in pcols if c not in parent.pos]
            unread = mine + [f"{parent.table.name}.{c}" for c in theirs]
            if unread:
                fix = [f"add {', '.join(mine)} to tables.{lay.table.name}.columns"] if mine else []
                if theirs:
                    fix.append(f"add {', '.join(theirs)} to tables.{parent.table.name}.columns")
                raise MigratorError(
                    f"tables.{lay.table.name}.nest: the foreign key's columns {unread} are "
                    "not read",
                    " and ".join(fix) + " (a child is filed under its parent by them)",
                )
            by = tuple(lay.pos[c] for c in cols)
            refs = tuple(parent.pos[c] for c in pcols)
            if nest.field in {parent.field(c).decode() for c in parent.resolved.columns}:
                raise MigratorError(
                    f"tables.{lay.table.name}.nest.as: '{nest.field}' is a field of "
                    f"{parent.table.name}'s document already",
                    "choose another name",
                )
        out = Level(lay, nest, by, refs)
        kids = sorted(n for n, c in nested.items() if _parent(c) == lay.table.name)
        out.children = [level(nested[k], nested[k].table.nest, lay) for k in kids]
        keeping(out, None if parent is None else parent.table.name)
        names = [c.nest.field for c in out.children if c.nest is not None]
        if len(set(names)) != len(names):
            raise MigratorError(
                f"tables.{lay.table.name}: two nested tables share a field name ({names})",
                "give each nest its own 'as'",
            )
        return out

    tops = sorted({_top(n, layouts) for n in nested})
    return {t: level(layouts[t], None, None) for t in tops}


def keeping(level: Level, parent: str | None) -> None:
    """Which of the level's rows are kept beside the documents besides those in one, for
    ``sync`` to write a row's subtree when the row enters a document:

    * ``whole``: a ``where:`` on a table with children, or on the top (the rows below a row
      it leaves out), or one that compares the nesting foreign key's values under its ``ON
      UPDATE CASCADE`` (where InnoDB's cascades are not logged, a rule can move a row into
      the filter): every row is kept, the filter applies to the documents only;
    * ``roots``: a foreign key whose columns may be NULL on a table with children: its rows
      with a NULL key (in no document) are kept, their children filed under them."""
    where = level.layout.table.where
    if parent is None:
        level.whole = where is not None
        return
    schema = level.layout.resolved.schema
    cols = tuple(level.layout.select[i] for i in level.by)
    fk = next(k for k in schema.foreign_keys if k.parent == parent and tuple(k.columns) == cols)
    cascades = fk.on_update.upper() == "CASCADE"
    moved = where is not None and cascades and bool(compares_values(where, cols))
    level.whole = where is not None and (bool(level.children) or moved)
    level.roots = bool(level.children) and any(schema.column(c).nullable for c in cols)


def _parent(lay: TableLayout) -> str | None:
    return None if lay.table.nest is None else lay.table.nest.parent


def _top(name: str, layouts: Mapping[str, TableLayout]) -> str:
    nest = layouts[name].table.nest
    while nest is not None:
        name = nest.parent
        nest = layouts[name].table.nest
    return name


Groups = dict[int, dict[tuple[bytes | None, ...], list[Row]]]  # id(level) -> refs -> rows


def group(level: Level, rows: Sequence[Row]) -> dict[tuple[bytes | None, ...], list[Row]]:
    """A level's rows by the parent they name (rows naming none, a NULL in ``by``, left out)."""
    out: dict[tuple[bytes | None, ...], list[Row]] = {}
    for row in rows:
        k = tuple(row[i] for i in level.by)
        if None not in k:
            out.setdefault(k, []).append(row)
    return out


def element(level: Level, row: Row, groups: Groups) -> bytes:
    """A row's document: its own fields and its nested children's."""
    parts = level.parts(row)
    for child in level.children:
        assert child.nest is not None
        mine = groups.get(id(child), {}).get(tuple(row[i] for i in child.refs), [])
        parts.append((child.nest.field.encode(), _collection(child, mine, groups)))
    parts.sort(key=lambda p: p[0])
    return render(parts)


def _collection(level: Level, rows: list[Row], groups: Groups) -> bytes:
    nest = level.nest
    assert nest is not None
    ordered = sorted((r for r in rows if level.shows(r)), key=level.sort_key)
    if nest.kind == "object":
        return element(level, ordered[0], groups) if ordered else NULL
    if nest.kind == "map":
        pk = level.layout.pk_text
        items = sorted((pk(r) or b"", element(level, r, groups)) for r in ordered)
        return b"{" + b",".join(string(k) + b":" + v for k, v in items) + b"}"
    return b"[" + b",".join(element(level, r, groups) for r in ordered) + b"]"


def commands(top: Level, rows: Sequence[Row], groups: Groups) -> list[Command]:
    """The writes of the top rows' whole documents (``JSON.SET key $ doc`` / ``SET``)."""
    lay = top.layout
    redisjson = lay.table.kind == "json"
    out: list[Command] = []
    for row in rows:
        key = lay.row_key(row)
        if key is None or not top.shows(row):
            continue
        doc = element(top, row, groups)
        out.append((b"JSON.SET", key, b"$", doc) if redisjson else (b"SET", key, doc))
    return out
