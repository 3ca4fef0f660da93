"""The owner record of a sharded source (docs/sharding.md#the-owner-hash): which shard each
row Redis holds came from.

A mapping with ``sources:`` (several MySQL servers holding shards of one schema) keeps, per
table, beside the table's own keys (``<m>``: the mapping's name):

* ``migrator:<m>:shard:<table>``: a HASH, the row's primary key (``encode_row`` of its values,
  as the row images of plan/row_images.py) -> the name of the shard that holds the row.

It is one more structure of the table (``Owners``, named ``shard``), present only when the
table was resolved for a shard (``Resolved.shard``): ``migrate`` writes it with the rows (and
claims each row's field first, to find a primary key two shards hold: store/claims.py),
``sync`` keeps it through plan/delta.py's ``h`` entries (``entries``), ``verify`` compares it
and ``--fix`` repairs it; ``migrate --replace`` removes it with the mapping's keys
(store/keys.py), and the stray-key scan leaves it alone (a ``migrator:`` key: plan/keyspace.py).
A ``--replace --shard NAME`` finds the rows of one shard by it.
"""

from __future__ import annotations

from contextvars import ContextVar

from migrator.mapping.resolve import Resolved
from migrator.plan.batch import Batch, Row
from migrator.plan.expiry import decode_row, encode_row
from migrator.plan.layout import TableLayout
from migrator.plan.structures import Structure

#: the structure's name (dry-run's estimate, verify's reports)
NAME = "shard"
#: ``Resolved.shard`` of a table resolved for every shard at once (verify, dry-run): the
#: owner of a row is then the shard being read, ``CURRENT`` (source/shards.py sets it)
UNION = "*"
CURRENT: ContextVar[str] = ContextVar("shard", default="")
#: the reason a row another shard holds (by its primary key or a unique value) is counted
#: under when ``migrate`` leaves it out (store/claims.py)
COLLISION = "a primary key or unique value another shard holds (collision)"
#: the reason a nested child whose parent row is on another shard is counted under: it is in
#: no document (commands/shard_nesting.py)
CROSS_SHARD = "a nested child whose parent is on another shard (in no document)"


def owners_key(mapping_name: str, table: str) -> bytes:
    return f"migrator:{mapping_name}:{NAME}:{table}".encode()


def owner_field(pk: tuple[bytes | None, ...]) -> bytes:
    """The field of a row whose primary-key values (raw text, in the key's order) are ``pk``."""
    return encode_row(pk)


def pk_of(field: bytes) -> tuple[bytes | None, ...]:
    """The primary-key values a field names (``owner_field``'s inverse)."""
    return decode_row(field)


class Owners(Structure):
    """The owner hash of the module docstring, for the rows of the shard ``Resolved.shard``."""

    name = NAME

    def __init__(self, plan: TableLayout) -> None:
        super().__init__(plan)
        r = plan.resolved
        self.key = owners_key(r.mapping_name, r.table.name)
        self.shard = r.shard.encode()
        self.pk = tuple(plan.pos[c] for c in r.primary_key)
        self.by: list[tuple[bytes, tuple[int, ...]]] = []  # (as RowImages: no SETs)
        self.whole = True

    @staticmethod
    def wanted(table: object) -> bool:
        return False  # decided by the resolved table's shard: ``sharded`` below

    def field(self, row: Row) -> bytes:
        return encode_row(tuple(row[i] for i in self.pk))

    def owner(self) -> bytes:
        """The shard a row comes from: the table's, or, for the union, the one being read."""
        return self.shard if self.shard != b"*" else CURRENT.get().encode()

    def entries(self, row: Row) -> list[tuple[str, bytes, bytes, bytes]]:
        """The row's entry: ("h", key, primary key, shard), as plan/delta.py's ``h``; none
        for a row of the union read outside of a shard's batches (its shard unknown)."""
        owner = self.owner()
        return [("h", self.key, self.field(row), owner)] if owner else []

    def add(self, row: Row, batch: Batch) -> None:
        for _, key, field, owner in self.entries(row):
            batch.hset(key, field, owner)

    def patterns(self) -> list[str]:
        return [self.key.decode("utf-8", "replace")]


def sharded(resolved: Resolved) -> bool:
    """Whether the table keeps an owner hash: it was resolved for one shard of ``sources:``
    (a nested table too: its rows are claimed as any table's, so that a child's primary key
    two shards hold is one row in the rows kept beside the documents, never two merged)."""
    return bool(resolved.shard)


def owners_of(plan: object) -> Owners | None:
    """The table's ``Owners`` (a ``TablePlan``'s structure), None if it keeps none."""
    return next((s for s in getattr(plan, "structures", ()) if isinstance(s, Owners)), None)


def literal(value: bytes | None, numeric: bool) -> str:
    """A value as SQL text: a number as it is, text quoted (``'`` doubled), NULL."""
    if value is None:
        return "NULL"
    text = value.decode("utf-8", "replace")
    return text if numeric else "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"


def finder(table: str, columns: list[tuple[str, bytes | None, bool]]) -> str:
    """The SQL that finds the rows holding these values: ``SELECT * FROM t WHERE id = 7``."""
    where = " AND ".join(
        f"`{c}` IS NULL" if v is None else f"`{c}` = {literal(v, n)}" for c, v, n in columns
    )
    return f"SELECT * FROM `{table}` WHERE {where}"
