"""References whose parent row Redis does not hold, yet MySQL does (verify/tables.py): no
loss, not dangling. The parent's ``where:`` or expiry leaves it out of Redis, or the child's
value is spelt otherwise than the parent's key but equal under their collation (``'KEN'``
references ``'Ken'`` under ``utf8mb4_general_ci``; the reference holds the child's value), or
a FLOAT or DOUBLE ``-0`` (which Oracle MySQL keeps and prints) references ``0``.
Asked of MySQL per batch of missing parents (``Lookups.left_out``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from migrator.mapping.validate import plural
from migrator.source.mysql import Source


@dataclass(frozen=True)
class Parent:
    table: str
    columns: Sequence[str]  # the parent's
    at: tuple[int, ...]  # the child's positions of the referencing columns
    kept: Any  # the parent's row filter (None: every row)
    collations: tuple[str | None, ...]  # per column, where MySQL's = compares under one
    #: a FLOAT or DOUBLE column among them: MySQL keeps -0 and prints it '-0', equal to 0
    signed_zero: bool = False


@dataclass
class HeldParents:
    """Per reference (its columns, joined by ","), the parent to ask about."""

    parents: dict[str, Parent] = field(default_factory=dict)
    rows: int = 0  # child rows whose parent MySQL holds although Redis does not

    def add(self, columns: str, parent: Parent) -> None:
        if parent.kept is not None or any(parent.collations) or parent.signed_zero:
            self.parents[columns] = parent

    def held(self, src: Source, missing: dict[bytes, list[Any]]) -> list[bytes]:
        """Of the parent keys no row of Redis holds (key -> [rows, child key, columns, row]),
        those MySQL holds."""
        out = []
        for cols, p in self.parents.items():
            keys = {k: tuple(v[3][i] for i in p.at) for k, v in missing.items() if v[2] == cols}
            found = src.left_out(p.table, p.columns, sorted(set(keys.values())), p.kept,
                                 p.collations)  # fmt: skip
            out += [k for k, values in keys.items() if values in found]
        self.rows += sum(missing[k][0] for k in out)
        return out

    def note(self, table: str) -> str | None:
        if not self.rows:
            return None
        return (
            f"{plural(self.rows, 'row')} of {table} reference a parent row its table's where: "
            "or expiry leaves out of Redis, or whose key is spelt otherwise (case, accents, "
            "trailing spaces: equal under its collation; -0 for 0; not counted as dangling)"
        )
