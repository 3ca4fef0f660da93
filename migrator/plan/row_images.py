"""Row images kept beside the keys of a foreign-key cascade's child (docs/sync.md#cascades).

Where the server runs a foreign key's rule without logging the rows it changes (MariaDB;
MySQL with ``innodb_native_foreign_keys=ON``), ``sync`` applies the rule from the parent's
change, to the child rows Redis holds (plan/cascade.py). A child whose row cannot be read back
from its keys (``as: none``, ``as: columns``, documents, ``formats:``, ``columns:`` leaving
columns out, a row key other than its primary key), or that has no index or reference on
exactly the foreign key's columns, keeps instead, as ``nest:`` keeps its rows (``<m>``: the
mapping's name):

* ``migrator:<m>:rows:<table>``: a HASH, the row's primary key (``encode_row`` of its values)
  -> the row's image (every selected value, ``encode_row``);
* ``migrator:<m>:rows:<table>:by:<columns>:<values>``: a SET per value of a cascading foreign
  key that has no index or reference to find its rows by, of the primary keys (encoded as
  above) of the rows holding it (none for a NULL: it references no row). A text column MySQL
  compares under a collation (case or accent insensitive, PAD SPACE on a VARCHAR:
  mapping/cascades.py ``weighed``) is there by the server's comparison key of its value
  (``WEIGHT_STRING``, read with the row: ``TableLayout.row_names``), so that the SET of a value
  holds every row MySQL's ``=`` matches with it; such a table keeps whole row images.

A table with a row filter (``where:``) that a rule can bring a row into, or whose own rows
change by a rule that reaches a child (mapping/filter_rules.py ``keeps_left_out``), keeps the
whole image of every row, those its filter leaves out as well (``RowImages.left_out``), and
a SET per value of each cascading foreign key: ``migrate`` reads such a table unfiltered and
writes the images alone for the rows left out (plan/planner.py), ``sync`` keeps them for every
logged change (plan/delta.py; under ``expire:`` a left-out row's image has no moment:
plan/expiry_delta.py) and ``verify`` compares them (verify/tables.py). Not over shards
(``sources:``) nor for a nested table: sync refuses those shapes there.

They are one more structure of the table (``RowImages``): ``migrate`` writes them with the
rows, ``sync`` keeps them in the same group (plan/delta.py's ``h`` and ``S`` entries),
``verify`` compares them (verify/rows.py) and ``--fix`` repairs them. Under ``expire:`` they
are shared structures like an index (no TTL of their own): a row's image and members go when
sync's sweep plans the row's removal (store/expiry_sweep.py), and until then the row, found
by a cascade, is removed as the sweep would remove it (plan/expiry_delta.py).
"""

from __future__ import annotations

from migrator.mapping.resolve import Resolved
from migrator.mapping.schema import ForeignKey
from migrator.plan.batch import Batch, Row
from migrator.plan.expiry import encode_row
from migrator.plan.layout import TableLayout
from migrator.plan.structures import Structure


def images_key(resolved: Resolved) -> bytes:
    return f"migrator:{resolved.mapping_name}:rows:{resolved.table.name}".encode()


def by_prefix(resolved: Resolved, columns: tuple[str, ...]) -> bytes:
    """The head of the SETs of rows per value of ``columns`` (a foreign key without index)."""
    return images_key(resolved) + b":by:" + ",".join(columns).encode() + b":"


def unreadable(plan: TableLayout) -> str:
    """Why a row of the table cannot be read back whole from its keys ("" when it can: from
    its row hash, or, ``as: none`` with only primary-key columns, from the members)."""
    r = plan.resolved
    if plan.weighed:  # (TableLayout.row_names)
        return "its foreign key's text is compared under a collation, by a key it does not hold"
    if r.table.kind == "none" and set(plan.select) <= set(r.primary_key):
        return ""
    if r.table.kind != "hash":
        return f"the table is 'as: {r.table.kind}', with no row hash to read it back from"
    if set(r.key.columns) - set(r.primary_key):
        return "the row key is not made of the primary key"
    hashed = {plan.pos[c] for c in r.columns}
    missing = [c for c in plan.select if c not in r.primary_key and plan.pos[c] not in hashed]
    if missing:
        return f"the row hash does not hold every column the mapping uses ({missing[0]})"
    if plan.formatters:
        return "the row hash holds formatted values (formats:), which cannot be read back"
    return ""


def indexed(resolved: Resolved, fk: ForeignKey) -> bool:
    return any(set(ix.columns) == set(fk.columns) for ix in resolved.index_sets())


def cascading(resolved: Resolved) -> list[ForeignKey]:
    """The table's foreign keys whose rules InnoDB may apply without a trace in the log."""
    return [fk for fk in resolved.schema.foreign_keys if fk.unlogged_rules]


def wanted(plan: TableLayout) -> bool:
    """Whether the table keeps row images: a cascading foreign key, and a row that cannot be
    read back or a foreign key with no index to find its rows by; never for a nested table
    (``nest:``)."""
    r = plan.resolved
    fks = cascading(r)
    if not fks or r.table.nest is not None:
        return False  # a nested table's rows are kept beside its documents (nesting_side.py)
    if r.left_out_images:
        return True
    return bool(unreadable(plan)) or not all(indexed(r, fk) for fk in fks) or bool(plan.weighed)


class RowImages(Structure):
    """The row images and per-value SETs of the module docstring."""

    name = "rows"

    def __init__(self, plan: TableLayout) -> None:
        super().__init__(plan)
        r = plan.resolved
        self.key = images_key(r)
        #: the images of the rows the filter leaves out are kept too (module docstring)
        self.left_out = r.left_out_images
        #: the row images are kept (the row cannot be read back); else only the SETs below
        self.whole = bool(unreadable(plan)) or self.left_out
        self.pk = tuple(plan.pos[c] for c in r.primary_key)
        self.by: list[tuple[bytes, tuple[int, ...]]] = []  # (SET prefix, the key's positions)
        weights = {c: len(plan.select) + k for k, c in enumerate(plan.weighed)}
        for fk in cascading(r):
            cols = tuple(fk.columns)
            prefix = by_prefix(r, cols)
            weighed = any(c in weights for c in cols)
            found = indexed(r, fk) and not weighed and not self.left_out  # by its index
            if found or any(c not in plan.pos for c in cols):
                continue
            if all(p != prefix for p, _ in self.by):  # a weighed column by its comparison key
                self.by.append((prefix, tuple(weights.get(c, plan.pos[c]) for c in cols)))

    @staticmethod
    def wanted(table: object) -> bool:
        return False  # decided from the schema too: ``wanted`` above, by the planner

    def entries(self, row: Row) -> list[tuple[str, bytes, bytes, bytes]]:
        """The row's entries: (type, key, sub, value), as plan/delta.py's ``h`` and ``S``."""
        pk = encode_row(tuple(row[i] for i in self.pk))
        out = [("h", self.key, pk, encode_row(row))] if self.whole else []
        for prefix, positions in self.by:
            values = tuple(row[i] for i in positions)
            if None not in values:
                out.append(("S", prefix + encode_row(values), pk, b""))
        return out

    def add(self, row: Row, batch: Batch) -> None:
        for kind, key, sub, value in self.entries(row):
            if kind == "h":
                batch.hset(key, sub, value)
            else:
                batch.sadd(key, sub)

    def patterns(self) -> list[str]:
        heads = [self.key.decode("utf-8", "replace")] if self.whole else []
        return heads + [p.decode("utf-8", "replace") + "{values}" for p, _ in self.by]


def images_of(plan: object) -> RowImages | None:
    """The table's ``RowImages`` (a ``TablePlan``'s structure), None if it keeps none."""
    return next((s for s in getattr(plan, "structures", ()) if isinstance(s, RowImages)), None)
