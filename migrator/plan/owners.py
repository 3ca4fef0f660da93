"""The owner record of a sharded source (docs/sharding.md#the-owner-hash): which shard each
row Redis holds came from.

A mapping with ``sources:`` (several MySQL servers holding shards of one schema) keeps, per
table, beside the table's own keys (``<m>``: the mapping's name):

* ``migrator:<m>:shard:<table>``: a HASH, the row's primary key (``encode_row`` of its values,
  as the row images of plan/row_images.py) -> the name of the shard that holds the row.

It is one more structure of the table (``Owners``, named ``shard``), present only when the
table was resolved for a shard (``Resolved.shard``): ``migrate`` writes it with the rows (and
claims each row's field first, to find a primary key two shards hold: commands/shards.py),
``sync`` keeps it through plan/delta.py's ``h`` entries (``entries``), ``verify`` compares it
and ``--fix`` repairs it; ``migrate --replace`` removes it with the mapping's keys
(store/keys.py), and the stray-key scan leaves it alone (a ``migrator:`` key: plan/keyspace.py).
A ``--replace --shard NAME`` finds the rows of one shard by it.
"""

from __future__ import annotations

from migrator.mapping.resolve import Resolved
from migrator.plan.batch import Batch, Row
from migrator.plan.expiry import decode_row, encode_row
from migrator.plan.layout import TableLayout
from migrator.plan.structures import Structure

#: the structure's name (dry-run's estimate, verify's reports)
NAME = "shard"


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

    def entries(self, row: Row) -> list[tuple[str, bytes, bytes, bytes]]:
        """The row's entry: ("h", key, primary key, shard), as plan/delta.py's ``h``."""
        return [("h", self.key, self.field(row), self.shard)]

    def add(self, row: Row, batch: Batch) -> None:
        batch.hset(self.key, self.field(row), self.shard)

    def patterns(self) -> list[str]:
        return [self.key.decode("utf-8", "replace")]


def sharded(resolved: Resolved) -> bool:
    """Whether the table keeps an owner hash: it was resolved for one shard of ``sources:``
    (a nested table's rows live in their parent's documents: it keeps none)."""
    return bool(resolved.shard) and resolved.table.nest is None


def owners_of(plan: object) -> Owners | None:
    """The table's ``Owners`` (a ``TablePlan``'s structure), None if it keeps none."""
    return next((s for s in getattr(plan, "structures", ()) if isinstance(s, Owners)), None)
