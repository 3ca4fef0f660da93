"""The entries a structure contributes for a row where the generated code (plan/delta_code.py)
does not inline it: ``as: columns`` strings, a row hash with formatted fields, documents,
STRING-style uniques and tag sets; each a *collector* that adds a row's entries (the types of
plan/delta.py's docstring) to a dict grouped per key."""

from __future__ import annotations

from migrator.plan.batch import Row
from migrator.plan.delta_code import Collect, Entries
from migrator.plan.owners import Owners
from migrator.plan.planner import TablePlan
from migrator.plan.row_images import RowImages
from migrator.plan.structures import (
    IndexSets,
    RowColumns,
    RowDocument,
    RowHash,
    SortedSets,
    TagSets,
    UniqueHashes,
    UniqueStrings,
)
from migrator.plan.vector_sets import VectorSets, pack


def _row_columns(plan: TablePlan, structure: RowColumns) -> Collect:
    """``as: columns``: one STRING per column (``s``, the column name appended to the row
    key); the primary-key columns when every value is NULL."""
    fields, pk_fields, row_key = structure.fields, structure.pk_fields, plan.row_key
    formats = structure.formats

    def value(row: Row, i: int) -> bytes | None:
        v = row[i]
        return formats[i](v) if v is not None and i in formats else v

    def row_columns(row: Row, out: Entries) -> None:
        key = row_key(row)
        if key is None:
            return
        chosen = [(name, row[i]) for name, i in fields if row[i] is not None]
        if not chosen:
            chosen = [(name, row[i] or b"") for name, i in pk_fields]
        for name, v in chosen:
            out["s", key + name] = {b"": v}  # type: ignore[dict-item]

    def formatted(row: Row, out: Entries) -> None:  # formats: (as RowColumns.add writes)
        key = row_key(row)
        if key is None:
            return
        chosen = [(name, v) for name, i in fields if (v := value(row, i)) is not None]
        if not chosen:
            chosen = [(name, value(row, i) or b"") for name, i in pk_fields]
        for name, v in chosen:
            out["s", key + name] = {b"": v}

    if formats:
        return formatted
    return row_columns


def _row_hash(plan: TablePlan, structure: RowHash) -> Collect:
    """A row hash with formatted fields (formats:): the fields as ``RowHash.add`` writes
    them (``H``)."""
    fields, pk_fields, formats, row_key = (
        structure.fields,
        structure.pk_fields,
        structure.formats,
        plan.row_key,
    )

    def value(row: Row, i: int) -> bytes | None:
        v = row[i]
        return formats[i](v) if v is not None and i in formats else v

    def row_hash(row: Row, out: Entries) -> None:
        key = row_key(row)
        if key is None:
            return
        h = {name: v for name, i in fields if (v := value(row, i)) is not None}
        if not h:
            h = {name: value(row, i) or b"" for name, i in pk_fields}
        got = out.get(("H", key))
        if got is None:
            out["H", key] = h
        else:
            got.update(h)

    return row_hash


def collector(plan: TablePlan, structure: object) -> Collect | None:
    """The entries a structure the generated code does not inline contributes for a row
    (see plan/delta.py's module docstring); None for those it inlines (plan/delta_code.py)."""
    if isinstance(structure, RowHash) and structure.formats:
        return _row_hash(plan, structure)
    if isinstance(structure, (RowHash, UniqueHashes, IndexSets, SortedSets)):
        return None
    pk_text = plan.pk_text
    if isinstance(structure, RowColumns):
        return _row_columns(plan, structure)
    if isinstance(structure, (RowImages, Owners)):  # (plan/owners.py: ``h`` entries too)
        images = structure.entries

        def row_images(row: Row, out: Entries) -> None:
            for kind, key, sub, value in images(row):
                got = out.get((kind, key))
                if got is None:
                    out[kind, key] = {sub: value}
                else:
                    got[sub] = value

        return row_images
    if isinstance(structure, RowDocument):
        document, row_key = structure.document, plan.row_key
        kind = "j" if structure.redisjson else "s"

        def row_document(row: Row, out: Entries) -> None:
            key = row_key(row)
            if key is not None:
                out[kind, key] = {b"": document(row)}

        return row_document
    if isinstance(structure, UniqueStrings):
        sitems = structure.items

        def unique_string(row: Row, out: Entries) -> None:
            pk = pk_text(row)
            if pk is None:
                return
            for _, key_of in sitems:
                key = key_of(row)
                if key is not None:
                    out["s", key] = {b"": pk}

        return unique_string
    if isinstance(structure, TagSets):
        titems = structure.items

        def tag_sets(row: Row, out: Entries) -> None:
            for _, key_of, member_of in titems:
                key, member = key_of(row), member_of(row)
                if key is None or member is None:
                    continue
                got = out.get(("S", key))
                if got is None:
                    out["S", key] = {member: b""}
                else:
                    got[member] = b""

        return tag_sets
    if isinstance(structure, VectorSets):
        return _vector_sets(structure)
    raise TypeError(f"no delta planning for the structure {type(structure).__name__}")


def _vector_sets(structure: VectorSets) -> Collect:
    """A row's element in each vector set (``v``: key, primary key -> packed VADD's values,
    plan/vector_sets.py)."""
    items, element = structure.items, structure.element

    def vector_sets(row: Row, out: Entries) -> None:
        for item in items:
            got = element(item, row)
            if isinstance(got, str):
                continue
            key, pk = got
            group = out.get(("v", key))
            if group is None:
                out["v", key] = {pk: pack(item, row)}
            else:
                group[pk] = pack(item, row)

    return vector_sets
