"""Changes the binary log does not carry as rows, as the schema shows them.

* ``ON DELETE/UPDATE CASCADE`` and ``SET NULL`` (and ``SET DEFAULT``) of a foreign key are
  executed inside InnoDB: the log holds the parent's row change only, never the child rows the
  rule deletes or changes. ``sync`` applies them from the parent's change where it can do so
  exactly, and refuses the table at start otherwise (``migrator.plan.cascade``).
* Transaction-precise system versioning (ROW START/END as ``BIGINT UNSIGNED`` transaction
  ids): MariaDB logs every change of such a table as a statement, even with
  ``binlog_format = ROW``; ``sync`` refuses the table.

``validate`` warns of each table ``sync`` refuses and ``init`` writes a comment above it.
``migrate`` and ``verify`` read the rows themselves and are not affected. Pure: works on the
schema it is handed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from migrator.mapping.kinds import Kind
from migrator.mapping.schema import TableSchema

TRX_WHY = "MariaDB writes its changes to the binary log as statements, never as rows"
TRX_FIX = (
    "version the table by time (ROW START/END as TIMESTAMP(6), which sync follows), or leave "
    "it out of the mapping for sync (migrate and verify are not affected)"
)


@dataclass(frozen=True)
class Unlogged:
    table: str
    what: str  # "foreign key fk_a (a_id) -> a ON DELETE CASCADE"
    why: str
    fix: str

    def __str__(self) -> str:
        return f"{self.table}: {self.what}"


def trx_versioned(tables: Iterable[TableSchema]) -> list[Unlogged]:
    """Tables with transaction-precise system versioning."""
    out = []
    for ts in tables:
        end = ts.row_end
        if end is not None and end in ts.column_names and ts.column(end).kind is Kind.INTEGER:
            what = f"transaction-precise system versioning (ROW END {end} is a transaction id)"
            out.append(Unlogged(ts.name, what, TRX_WHY, TRX_FIX))
    return out


def cascade_notes(ts: TableSchema) -> list[str]:
    """What ``init`` writes above a table: how sync treats its cascading foreign keys (with
    the defaults init drafts: a reference set per foreign key, every column in the hash)."""
    out = [f"sync refuses it: {u.what} ({u.why})" for u in trx_versioned([ts])]
    pk_ints = all(ts.column(c).kind is Kind.INTEGER for c in ts.primary_key)
    for fk in ts.foreign_keys:
        if not fk.unlogged_rules:
            continue
        rules, cols = ", ".join(fk.unlogged_rules), ", ".join(fk.columns)
        ints = pk_ints and all(ts.column(c).kind is Kind.INTEGER for c in fk.columns)
        if ints and not any(r.endswith("SET DEFAULT") for r in fk.unlogged_rules):
            out.append(
                f"sync applies {fk.name or 'the foreign key'}'s {rules} (not in the binary "
                f"log) from the parent's change: keep the reference on ({cols}), every column "
                f"in the hash, and map {fk.parent}"
            )
        else:
            out.append(
                f"sync refuses it: {fk.name or 'a foreign key'} has {rules} (not in the binary "
                "log), which sync applies only on integer key columns"
            )
    return out
