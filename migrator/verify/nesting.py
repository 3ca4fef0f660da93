"""Verify of nested documents (``nest:``; plan/nesting.py): each top row's whole document,
rebuilt from MySQL with its children and grandchildren in the pass's snapshot
(source/nesting.py), against what Redis holds, compared as verify/documents.py compares any
document. The row pass leaves these tables' documents to this check (verify/tables.py). The
rows kept beside the documents for sync (plan/nesting_side.py) are compared too
(verify/nesting_side.py)."""

from __future__ import annotations

from typing import Any

from migrator.plan.nesting import Level, commands
from migrator.plan.nesting_side import side_commands
from migrator.source.mysql import Source
from migrator.source.nesting import all_roots
from migrator.source.shard_nesting import shard_trees
from migrator.verify import documents
from migrator.verify.keys import Reader
from migrator.verify.nesting_side import SideCheck
from migrator.verify.repair import Repairer
from migrator.verify.report import TableCheck


def check(
    src: Source, reader: Reader, top: Level, out: TableCheck, size: int, fixer: Repairer | None
) -> int:
    """Compare every document of the ``top`` table; the documents present. ``fixer``: each
    difference's repair (the whole document written again) is queued there."""

    def found(kind: str, key: bytes, fieldname: Any = None, mysql: Any = None,
              redis: Any = None, repair: Any = ()) -> None:  # fmt: skip
        out.add(kind, key, fieldname, mysql, redis)
        if fixer is not None:
            fixer.repair(kind, key, fieldname, repair)

    present = 0
    side = SideCheck(top, reader, found)
    vectors = frozenset(f for level in _levels(top) for f in documents.vectors(level.layout))
    for rows, groups in shard_trees(src, top, size):  # (over shards: each in turn)
        cmds = commands(top, rows, groups)
        present += documents.compare(cmds, reader.read(documents.reads(cmds)), found, vectors)
        side.page(side_commands(top, rows, groups))
    for level, rows, groups in all_roots(src, top, size):  # rows kept in no document
        side.page(side_commands(top, rows, groups, level))
    side.rest()
    if fixer is not None:
        fixer.flush()
    return present


def _levels(level: Level) -> list[Level]:
    return [level, *(x for c in level.children for x in _levels(c))]
