"""The rows of a nesting tree kept beside its documents (``nest:``; docs/mapping.md), so
that ``sync`` can rebuild a top document from the row images as of its position, without
reading MySQL (which may be ahead of it). Two kinds of keys migrator keeps of its own, per
table of the tree (``<m>``: the mapping's name):

* ``migrator:<m>:nest:<table>``: a HASH, the row's primary key (``encode_row`` of its values)
  -> the row's image (every selected value, ``encode_row``), for the top table and each nested
  one: the rows in a document, and the ones plan/nesting.py's ``keeping`` keeps besides (a
  ``whole`` table's rows its filter leaves out, a ``roots`` table's rows with a NULL key, and
  the rows below them);
* ``migrator:<m>:nest:<table>:in:<parent key>``: a SET per parent row of a nested table, of
  its children's primary keys (encoded as above), the parent's key encoded likewise;
* ``migrator:<m>:nest:<table>:by:<columns>:<values>``: a SET per value of each other foreign
  key of a nested table whose rule InnoDB may run without a trace in the log (``others``:
  ``ON DELETE CASCADE``, ``SET NULL``...), of the primary keys of the kept rows holding it
  (none for a NULL), so that ``sync`` finds the rows that rule changes when the other parent
  changes, as plan/row_images.py files a plain table's rows.

``migrate`` writes them with the documents, ``verify`` compares them, ``sync`` keeps them
(sync/nesting.py) and renders each document it touches from them with plan/nesting.py's
``element``: the same bytes as migrate's. This module is pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from migrator.errors import MigratorError
from migrator.mapping.schema import ForeignKey
from migrator.plan.batch import Command, Row
from migrator.plan.expiry import encode_row
from migrator.plan.nesting import Groups, Level


def rows_key(level: Level) -> bytes:
    lay = level.layout
    return f"migrator:{lay.resolved.mapping_name}:nest:{lay.table.name}".encode()


def members_key(level: Level, parent: bytes) -> bytes:
    """The SET of ``level``'s children of the parent whose encoded key is ``parent``."""
    return rows_key(level) + b":in:" + parent


def members_prefix(level: Level) -> bytes:
    return rows_key(level) + b":in:"


def by_prefix(level: Level, fk: ForeignKey) -> bytes:
    """The head of ``level``'s SETs of kept rows per value of the foreign key ``fk``."""
    return rows_key(level) + b":by:" + ",".join(fk.columns).encode() + b":"


def others(level: Level) -> list[ForeignKey]:
    """The foreign keys of a nested level, besides its nesting, whose rule InnoDB may run
    without logging the rows it changes: its kept rows are filed by their values too."""
    if level.nest is None:
        return []
    lay = level.layout
    mine = tuple(lay.select[i] for i in level.by)
    return [fk for fk in lay.resolved.schema.foreign_keys
            if fk.unlogged_rules and not (fk.parent == level.nest.parent
                                          and tuple(fk.columns) == mine)]  # fmt: skip


@dataclass
class Other:
    """A foreign key of ``others``: where its values sit in the level's rows, and its SETs."""

    fk: ForeignKey
    pos: tuple[int, ...]
    prefix: bytes

    def key(self, row: Row) -> bytes | None:
        """The SET of the rows holding this row's values (None: a NULL, it references none)."""
        values = tuple(row[i] for i in self.pos)
        return None if None in values else self.prefix + encode_row(values)


@dataclass
class Side:
    """How one level's rows are filed: its primary key's positions, and (a nested level) the
    positions of its foreign key's columns in the parent's primary-key order."""

    level: Level
    pk: tuple[int, ...]
    up: tuple[int, ...]  # () for the top
    by: list[Other]  # the foreign keys its kept rows are filed by besides (``others``)

    def key(self, row: Row) -> bytes:
        return encode_row(tuple(row[i] for i in self.pk))

    def parent(self, row: Row) -> bytes | None:
        """The encoded key of the parent ``row`` names (None: a NULL in it)."""
        values = tuple(row[i] for i in self.up)
        return None if None in values else encode_row(values)


def sides(top: Level) -> dict[str, Side]:
    """Each table of the tree's ``Side``; raises MigratorError when a foreign key does not
    point at its parent's primary key (its rows could not be filed under their parent)."""
    out: dict[str, Side] = {}

    def visit(level: Level, parent: Level | None) -> None:
        lay = level.layout
        pk = tuple(lay.pos[c] for c in lay.resolved.primary_key)
        up: tuple[int, ...] = ()
        if parent is not None:
            ppos = [parent.layout.pos[c] for c in parent.layout.resolved.primary_key]
            if sorted(level.refs) != sorted(ppos):
                raise MigratorError(
                    f"tables.{level.name}.nest: sync follows a nested table whose foreign key "
                    f"points at its parent's primary key; {level.name}'s points at other "
                    f"columns of {parent.name}",
                    "point the foreign key at the parent's primary key, or keep these documents "
                    "current with migrate --replace and verify --fix",
                )
            up = tuple(level.by[level.refs.index(p)] for p in ppos)
        by = [Other(fk, tuple(lay.pos[c] for c in fk.columns), by_prefix(level, fk))
              for fk in others(level) if all(c in lay.pos for c in fk.columns)]  # fmt: skip
        out[level.name] = Side(level, pk, up, by)
        for child in level.children:
            visit(child, level)

    visit(top, None)
    return out


def walk(level: Level) -> list[Level]:
    return [level, *(x for c in level.children for x in walk(c))]


def side_commands(
    top: Level, rows: Sequence[Row], groups: Groups, start: Level | None = None
) -> list[Command]:
    """The side structure of ``rows`` (top rows; ``start``: rows of that level of the tree)
    and their descendants in ``groups``: each row's image, and each parent's SET of children
    (removed first, so that a parent holds exactly its children), and the SETs per value of
    its ``others`` foreign keys each row is added to (shared by rows of several pages)."""
    filed = sides(top)
    out: list[Command] = []

    def visit(level: Level, mine: Sequence[Row]) -> None:
        side = filed[level.name]
        if not mine:
            return
        key = rows_key(level)
        out.append((b"HSET", key, *(x for r in mine for x in (side.key(r), encode_row(r)))))
        for other in side.by:
            for r in mine:
                if (held := other.key(r)) is not None:
                    out.append((b"SADD", held, side.key(r)))
        for child in level.children:
            kids = groups.get(id(child), {})
            below: list[Row] = []
            for parent in mine:
                pk = side.key(parent)
                members = members_key(child, pk)
                out.append((b"DEL", members))
                found = kids.get(tuple(parent[i] for i in child.refs), [])
                if found:
                    out.append((b"SADD", members, *(filed[child.name].key(r) for r in found)))
                below += found
            visit(child, below)

    visit(top if start is None else start, list(rows))
    return out


def side_keys(
    tops: dict[str, Level], tables: Sequence[str] | None
) -> tuple[list[bytes], list[bytes]]:
    """The side structure's keys of the trees holding one of ``tables`` (None: all): its
    HASHes, and the prefixes of its SETs (of children, and per foreign-key value). A table's
    keys go with its tree's (a re-load of any table of a tree writes the tree's documents
    again)."""
    hashes: list[bytes] = []
    prefixes: list[bytes] = []
    for top in tops.values():
        levels = walk(top)
        if tables is not None and not {lv.name for lv in levels} & set(tables):
            continue
        hashes += [rows_key(lv) for lv in levels]
        prefixes += [members_prefix(lv) for lv in levels[1:]]
        prefixes += [by_prefix(lv, fk) for lv in levels[1:] for fk in others(lv)]
    return hashes, prefixes
