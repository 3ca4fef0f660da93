"""Values several rows share where the mapping says they are unique but MySQL does not keep
them so (issue 27 item 5): a ``unique:`` on columns without a UNIQUE index. Redis holds one
entry per value, naming one of the rows (which one is not guaranteed), so migrate, verify and
sync count such values as duplicate primary keys are counted: a difference (exit 1), with the
SQL that lists the rows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from migrator.mapping.resolve import Resolved
from migrator.source.mysql import Source
from migrator.source.selects import quote_name
from migrator.source.where import clause


@dataclass(frozen=True)
class SharedValues:
    """One ``unique:`` of a table: the values several rows hold, and the rows beyond one per
    such value (Redis names one row per value)."""

    table: str
    columns: tuple[str, ...]
    values: int
    rows: int

    @property
    def sql(self) -> str:
        return shared_rows_query(self.table, self.columns)

    def as_dict(self) -> dict[str, Any]:
        return {"columns": list(self.columns), "values": self.values, "rows": self.rows,
                "sql": self.sql}  # fmt: skip


def shared_values(src: Source, r: Resolved) -> list[SharedValues]:
    """Per ``unique:`` of ``r`` that MySQL does not enforce, the values rows share today."""
    out = []
    for u in r.unenforced_uniques:
        columns = [r.schema.column(c) for c in u.columns]
        values, rows = src.shared_keys(r.name, columns, clause(r))  # rows the mapping keeps
        if values:
            out.append(SharedValues(r.name, u.columns, values, rows))
    return out


def shared_rows_query(table: str, columns: tuple[str, ...]) -> str:
    """The SQL a person runs to list the rows that share a value of ``columns``."""
    cols = ", ".join(quote_name(c) for c in columns)
    t = quote_name(table)
    return (
        f"SELECT * FROM {t} WHERE ({cols}) IN (SELECT {cols} FROM {t} GROUP BY {cols} "
        f"HAVING COUNT(*) > 1) ORDER BY {cols}"
    )
