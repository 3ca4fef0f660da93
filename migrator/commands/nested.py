"""migrate's nested documents (``nest:``; plan/nesting.py): once the tables are loaded, each
top table's documents are written again whole, with their children and grandchildren, from
one snapshot of their own (source/nesting.py)."""

from __future__ import annotations

from itertools import chain

from migrator.errors import MigratorError
from migrator.mapping.model import Mapping
from migrator.mapping.resolve import Resolved, resolve
from migrator.plan.estimate import Limits, MemoryModel
from migrator.plan.layout import TableLayout
from migrator.plan.nesting import Level, trees
from migrator.plan.nesting_side import by_prefix, others, side_commands, walk
from migrator.progress import Progress
from migrator.retry import Retrying
from migrator.source.mysql import Source
from migrator.source.nesting import all_roots, all_written
from migrator.source.shard_nesting import shard_trees
from migrator.store.cluster_sink import sink_for
from migrator.store.owned import owned
from migrator.store.sink import Client


def nesting_trees(m: Mapping, src: Source, resolved: list[Resolved]) -> dict[str, Level]:
    """The nesting trees that hold one of the ``resolved`` tables (``migrate --tables tag``
    writes the books' documents again); a nesting that cannot be raises MigratorError,
    before anything is written."""
    if not any(t.nest is not None for t in m.tables):
        return {}
    names = {r.name for r in resolved}
    found = trees({r.name: TableLayout(r) for r in every_table(m, src, resolved)})
    return {n: top for n, top in found.items() if names & set(top.tables())}


def every_table(m: Mapping, src: Source, resolved: list[Resolved]) -> list[Resolved]:
    """Every table of the mapping resolved (the parents and children of a nesting, which
    ``--tables`` may leave out), or ``resolved`` when the others cannot be: the tables
    asked for still nest, and index, what they can."""
    if len(resolved) == len(m.tables):
        return resolved
    try:
        return resolve(m, src.schema())
    except MigratorError:
        return resolved


def write_nested(
    src: Source, client: Client, tops: dict[str, Level], size: int, retrying: Retrying,
    progress: Progress,
) -> int:  # fmt: skip
    """Write every document of each top table whole, and the rows' side structure
    (plan/nesting_side.py); the documents written. Over a shard, only the documents of the
    top rows it owns in Redis (store/owned.py)."""
    if not tops:
        return 0
    src.snapshot("starting the snapshot of nested documents on MySQL")
    sink = sink_for(client, retrying)
    written = 0
    for name, top in tops.items():
        progress.note(name, f"writing documents with {', '.join(top.tables()[1:])} nested")
        for cmds in all_written(src, top, size, owned(client, top.layout, retrying)):
            sink.write(cmds)
            written += sum(c[0] in (b"SET", b"JSON.SET") for c in cmds)
    return written


def side_memory(src: Source, top: Level, size: int, limits: Limits) -> tuple[int, int]:
    """The keys and the estimated bytes of the rows kept beside ``top``'s documents
    (plan/nesting_side.py), those in no document included: dry-run reads the tree as migrate
    does and sizes what it would write (each SET of children whole; each table's HASH, and
    each SET per foreign-key value, over every page)."""
    model = MemoryModel(limits)
    shared = tuple(by_prefix(lv, fk) for lv in walk(top) for fk in others(lv))
    pages = (side_commands(top, rows, groups) for rows, groups in shard_trees(src, top, size))
    roots = (side_commands(top, rows, groups, lv) for lv, rows, groups in all_roots(src, top, size))
    for cmds in chain(pages, roots):
        for cmd in cmds:
            model.add(cmd, once=cmd[0] == b"SADD" and not cmd[1].startswith(shared))
    return model.keys, model.bytes
