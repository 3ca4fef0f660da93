"""The registry of Redis structures a table maps to, one small class each (STYLE habit 4).

A structure is built once per ``TableLayout``; ``add`` puts one row's writes into a ``Batch``
and ``patterns`` names the keys it writes, for people (dry-run) and SCAN (verify).
``wanted`` says, from the table's mapping alone, whether the table gets that structure.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from migrator.mapping.kinds import Kind
from migrator.mapping.model import DOCUMENTS, Table
from migrator.mapping.schema import Column
from migrator.plan.batch import (
    NULL_INDEX,
    NULL_KEY,
    NULL_UNIQUE,
    Batch,
    Command,
    Row,
)
from migrator.plan.documents import document_function
from migrator.plan.layout import TableLayout
from migrator.plan.values import score as to_score


class Structure:
    """One Redis structure a table maps to; ``add`` puts one row's writes into a batch."""

    name = ""

    def __init__(self, plan: TableLayout) -> None:
        self.plan = plan

    @staticmethod
    def wanted(table: Table) -> bool:
        """Whether a table mapped like this one writes this structure."""
        raise NotImplementedError

    def add(self, row: Row, batch: Batch) -> None:
        raise NotImplementedError

    def patterns(self) -> list[str]:
        """The key patterns this structure writes, for people (dry-run) and SCAN (verify)."""
        return []


class RowHash(Structure):
    name = "hash"

    def __init__(self, plan: TableLayout) -> None:
        super().__init__(plan)
        self.fields = [(plan.field(c), plan.pos[c]) for c in plan.resolved.columns]
        self.pk_fields = [(plan.field(c), plan.pos[c]) for c in plan.resolved.primary_key]
        #: per field position, its format (formats:); none: the value as it is
        self.formats = plan.formatters
        self.full = _full_row_command(plan, self.fields) if not self.formats else _never

    @staticmethod
    def wanted(table: Table) -> bool:
        return table.kind == "hash"

    def add(self, row: Row, batch: Batch) -> None:
        command = self.full(row)
        if command is not None:  # the common case: no NULL anywhere
            batch.commands.append(command)
            batch.stats.keys += 1
            return
        key = self.plan.row_key(row)
        if key is None:
            batch.stats.rejected[NULL_KEY] += 1
            return
        args: list[bytes] = [b"HSET", key]
        if self.formats:
            value = self.value
            args += [x for name, i in self.fields if (v := value(row, i)) is not None
                     for x in (name, v)]  # fmt: skip
            if len(args) == 2:  # every field NULL: keep the row, keyed by its primary key
                args += [x for name, i in self.pk_fields for x in (name, value(row, i) or b"")]
            batch.commands.append(tuple(args))
            batch.stats.keys += 1
            return
        for name, i in self.fields:
            v = row[i]
            if v is not None:
                args += (name, v)
        if len(args) == 2:  # every field NULL: keep the row, keyed by its primary key
            for name, i in self.pk_fields:
                args += (name, row[i] or b"")
        batch.commands.append(tuple(args))
        batch.stats.keys += 1

    def value(self, row: Row, i: int) -> bytes | None:
        """The value at ``i`` as the row hash writes it (its format, formats:)."""
        v = row[i]
        return self.formats[i](v) if v is not None and i in self.formats else v

    def patterns(self) -> list[str]:
        return [self.plan.resolved.key.text]


def _never(row: Row) -> None:
    return None


def _full_row_command(
    plan: TableLayout, fields: list[tuple[bytes, int]]
) -> Callable[[Row], Command | None]:
    """Generated code for a row whose key and fields are all non-NULL: its HSET as one tuple
    (None otherwise, for ``RowHash.add``'s general path). Only positions go into the code;
    field names and the key function stay in its namespace."""
    if not fields:
        return lambda row: None
    names = ", ".join(f"_{i}" for i in range(len(plan.row_names)))
    checks = " and ".join(f"_{i} is not None" for _, i in fields)
    args = ", ".join(f"F{k}, _{i}" for k, (_, i) in enumerate(fields))
    code = (
        "def full(row):\n"
        f"    {names}, = row\n"
        f"    if {checks}:\n"
        "        key = ROW_KEY(row)\n"
        "        if key is not None:\n"
        f"            return (HSET, key, {args})\n"
        "    return None\n"
    )
    namespace: dict[str, Any] = {"HSET": b"HSET", "ROW_KEY": plan.row_key}
    namespace.update({f"F{k}": name for k, (name, _) in enumerate(fields)})
    exec(compile(code, f"<full_row {plan.table.name}>", "exec"), namespace)
    full: Callable[[Row], Command | None] = namespace["full"]
    return full


class RowColumns(Structure):
    """``as: columns``: one STRING per column, ``{row key}{sep}{column}`` -> value."""

    name = "columns"

    def __init__(self, plan: TableLayout) -> None:
        super().__init__(plan)
        sep = plan.sep
        self.fields = [(sep + plan.field(c), plan.pos[c]) for c in plan.resolved.columns]
        self.pk_fields = [(sep + plan.field(c), plan.pos[c]) for c in plan.resolved.primary_key]
        self.formats = plan.formatters

    @staticmethod
    def wanted(table: Table) -> bool:
        return table.kind == "columns"

    def add(self, row: Row, batch: Batch) -> None:
        key = self.plan.row_key(row)
        if key is None:
            batch.stats.rejected[NULL_KEY] += 1
            return
        written = 0
        if self.formats:
            formats = self.formats
            values = [(s, formats[i](row[i]) if row[i] is not None and i in formats else row[i])  # type: ignore[arg-type]
                      for s, i in self.fields]  # fmt: skip
            for suffix, v in values:
                if v is not None:
                    batch.commands.append((b"SET", key + suffix, v))
                    written += 1
            if not written:
                for suffix, i in self.pk_fields:
                    v = row[i]
                    v = formats[i](v) if v is not None and i in formats else v
                    batch.commands.append((b"SET", key + suffix, v or b""))
                    written += 1
            batch.stats.keys += written
            return
        for suffix, i in self.fields:
            v = row[i]
            if v is not None:
                batch.commands.append((b"SET", key + suffix, v))
                written += 1
        if not written:
            for suffix, i in self.pk_fields:
                batch.commands.append((b"SET", key + suffix, row[i]))  # type: ignore[arg-type]
                written += 1
        batch.stats.keys += written

    def patterns(self) -> list[str]:
        sep = self.plan.table_sep
        plan = self.plan
        return [f"{plan.resolved.key.text}{sep}{plan.field_names.get(c, c)}"
                for c in plan.resolved.columns]  # fmt: skip


class RowDocument(Structure):
    """``as: json`` (``JSON.SET key $ doc``) or ``as: json-string`` (``SET key doc``): the
    row as one JSON document (plan/documents.py)."""

    name = "document"

    def __init__(self, plan: TableLayout) -> None:
        super().__init__(plan)
        schema = plan.resolved.schema
        self.fields = [(plan.field(c), plan.pos[c]) for c in plan.resolved.columns]
        self.document = document_function(
            self.fields,
            {plan.pos[c]: document_kind(schema.column(c)) for c in plan.resolved.columns},
            plan.formatters,
            {plan.pos[c]: f for c, f in plan.table.formats},
            vector_positions(plan),
        )
        self.redisjson = plan.table.kind == "json"

    @staticmethod
    def wanted(table: Table) -> bool:
        return table.kind in DOCUMENTS

    def command(self, key: bytes, document: bytes) -> Command:
        """The write of a whole document."""
        return (b"JSON.SET", key, b"$", document) if self.redisjson else (b"SET", key, document)

    def add(self, row: Row, batch: Batch) -> None:
        key = self.plan.row_key(row)
        if key is None:
            batch.stats.rejected[NULL_KEY] += 1
            return
        batch.commands.append(self.command(key, self.document(row)))
        batch.stats.keys += 1

    def patterns(self) -> list[str]:
        return [self.plan.resolved.key.text]


def vector_positions(plan: TableLayout) -> frozenset[int]:
    """The positions of the columns a document holds as arrays of numbers: MySQL's VECTOR
    columns, and the columns the table's ``search.vector`` names (BLOBs of packed float32)."""
    schema = plan.resolved.schema
    named = {v.column for v in plan.table.search.vector} if plan.table.search else set()
    return frozenset(
        plan.pos[c]
        for c in plan.resolved.columns
        if schema.column(c).dimension is not None or c in named
    )


def vector_fields(plan: TableLayout) -> frozenset[str]:
    """The names of the document fields ``vector_positions`` holds (verify compares their
    arrays as float32 bytes)."""
    at = vector_positions(plan)
    return frozenset(plan.field(c).decode() for c in plan.resolved.columns if plan.pos[c] in at)


def document_kind(column: Column) -> Kind:
    """How a column's value is typed in a document: MariaDB's JSON (a checked LONGTEXT) is
    embedded as JSON, as MySQL's is."""
    return Kind.JSON if column.holds_json else column.kind


class UniqueHashes(Structure):
    """``Tab:uniques:c1[:c2]`` HASH {"v1[:v2]" -> pk} for each HASH-style unique index."""

    name = "unique"

    def __init__(self, plan: TableLayout) -> None:
        super().__init__(plan)
        self.items = [
            (plan.unique_hash_key(u.columns), plan.join_fn(u.columns))
            for u in plan.table.unique
            if u.key is None
        ]

    @staticmethod
    def wanted(table: Table) -> bool:
        return any(u.key is None for u in table.unique)

    def add(self, row: Row, batch: Batch) -> None:
        pk = self.plan.pk_text(row)
        for key, value_of in self.items:
            v = value_of(row)
            if v is None:
                batch.stats.skipped[NULL_UNIQUE] += 1
            else:
                batch.hset(key, v, pk)  # type: ignore[arg-type]

    def patterns(self) -> list[str]:
        return [k.decode("utf-8", "replace") for k, _ in self.items]


class UniqueStrings(Structure):
    """A STRING per unique value, named by the template (``login:{name}:id`` -> pk)."""

    name = "unique-string"

    def __init__(self, plan: TableLayout) -> None:
        super().__init__(plan)
        self.items = [
            (u.key.text, plan.key_fn(u.key)) for u in plan.table.unique if u.key is not None
        ]

    @staticmethod
    def wanted(table: Table) -> bool:
        return any(u.key is not None for u in table.unique)

    def add(self, row: Row, batch: Batch) -> None:
        pk = self.plan.pk_text(row)
        for _, key_of in self.items:
            key = key_of(row)
            if key is None:
                batch.stats.skipped[NULL_UNIQUE] += 1
            else:
                batch.commands.append((b"SET", key, pk))  # type: ignore[arg-type]
                batch.stats.keys += 1
                batch.stats.entries += 1

    def patterns(self) -> list[str]:
        return [text for text, _ in self.items]


class IndexSets(Structure):
    """``Tab:indices:c1:v1[:c2:v2]`` SET {pk...} per non-unique index and foreign key."""

    name = "index"

    def __init__(self, plan: TableLayout) -> None:
        super().__init__(plan)
        self.templates = [plan.index_template(ix.columns) for ix in plan.resolved.index_sets()]
        self.items = [plan.key_fn(t) for t in self.templates]

    @staticmethod
    def wanted(table: Table) -> bool:
        return bool(table.indexes or table.references)

    def add(self, row: Row, batch: Batch) -> None:
        pk = self.plan.pk_text(row)
        for key_of in self.items:
            key = key_of(row)
            if key is None:
                batch.stats.skipped[NULL_INDEX] += 1
            else:
                batch.sadd(key, pk)  # type: ignore[arg-type]

    def patterns(self) -> list[str]:
        return [t.text for t in self.templates]


class SortedSets(Structure):
    """ZADD key score pk; scores per docs/values.md (numbers; dates as Unix seconds)."""

    name = "sorted"

    def __init__(self, plan: TableLayout) -> None:
        super().__init__(plan)
        self.items = [
            (
                s.key.text,
                plan.key_fn(s.key),
                plan.pos[s.score],
                plan.resolved.schema.column(s.score).kind,
            )
            for s in plan.table.sorted
        ]

    @staticmethod
    def wanted(table: Table) -> bool:
        return bool(table.sorted)

    def add(self, row: Row, batch: Batch) -> None:
        for _, key_of, i, kind in self.items:
            raw = row[i]
            key = key_of(row)
            if raw is None or key is None:
                batch.stats.skipped["NULL score (not in sorted set)"] += 1
                continue
            score = to_score(raw, kind)
            if score is None:
                batch.stats.skipped["score not a number or date (not in sorted set)"] += 1
                continue
            batch.zadd(key, score, self.plan.pk_text(row))  # type: ignore[arg-type]

    def patterns(self) -> list[str]:
        return [text for text, *_ in self.items]


class TagSets(Structure):
    """``sets``: SADD rendered-key rendered-member (``tag:{tagname}`` {book ids})."""

    name = "set"

    def __init__(self, plan: TableLayout) -> None:
        super().__init__(plan)
        self.items = [
            (s.key.text, plan.key_fn(s.key), plan.member_fn(s.member)) for s in plan.table.sets
        ]

    @staticmethod
    def wanted(table: Table) -> bool:
        return bool(table.sets)

    def add(self, row: Row, batch: Batch) -> None:
        for _, key_of, member_of in self.items:
            key, member = key_of(row), member_of(row)
            if key is None or member is None:
                batch.stats.skipped["NULL in a set key or member (not in set)"] += 1
            else:
                batch.sadd(key, member)

    def patterns(self) -> list[str]:
        return [text for text, *_ in self.items]


def run_structure(structure: Structure, rows: Sequence[Row]) -> Batch:
    """The writes of ``rows`` for one structure, in a batch of their own (verify's reads)."""
    b = Batch()
    add = structure.add
    for row in rows:
        add(row, b)
    return b


#: the registry: the structure classes a table may get, in the order their commands go out
STRUCTURES: dict[str, type[Structure]] = {
    "hash": RowHash,
    "columns": RowColumns,
    "document": RowDocument,
    "unique": UniqueHashes,
    "unique-string": UniqueStrings,
    "index": IndexSets,
    "sorted": SortedSets,
    "set": TagSets,
}
