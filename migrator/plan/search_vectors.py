"""A search index's vector fields (docs/mapping.md, "Vector fields"): what follows ``VECTOR``
in ``FT.CREATE`` for a column of float32 values (4 bytes each, little-endian) -- a MySQL 9
VECTOR, whose dimension its type gives, or a BLOB/VARBINARY/BINARY with the mapping's ``dim`` --
and the mapping errors for a column that cannot be one."""

from __future__ import annotations

from migrator.errors import MappingError, docs
from migrator.mapping.kinds import Kind
from migrator.mapping.model import VectorField
from migrator.mapping.schema import Column


def vector_args(table: str, col: Column, vec: VectorField, path: str, own: bool) -> tuple[str, ...]:
    """FT.CREATE's words after ``VECTOR`` for ``col`` of ``table``: the algorithm, the count
    of the words that follow, ``TYPE FLOAT32 DIM n DISTANCE_METRIC m`` and the algorithm's
    parameters. MappingError when the column holds no float32 vector of a known dimension
    (a nested child's, ``own`` False: a VECTOR column only)."""
    dim = col.dimension
    if dim is not None:
        if vec.dim is not None and vec.dim != dim:
            raise MappingError(
                f"column {col.name} of table {table} is {col.column_type}: {dim} dimensions, "
                f"but the mapping says dim: {vec.dim}",
                path=path, hint=f"write dim: {dim}, or leave dim out (it is taken from the type)",
            )  # fmt: skip
    elif col.kind is Kind.BINARY and own:
        if vec.dim is None:
            raise MappingError(
                f"column {col.name} ({col.column_type}) of table {table} is no VECTOR column, "
                "so its dimension is unknown",
                path=path,
                hint="declare how many float32 (4 bytes each, little-endian) each value "
                "packs: dim: 32",
            )
        dim = vec.dim
        size = _declared_bytes(col.column_type)
        fixed = col.column_type.lower().startswith("binary")
        if size is not None and (size != 4 * dim if fixed else size < 4 * dim):
            raise MappingError(
                f"column {col.name} ({col.column_type}) of table {table} cannot hold {dim} "
                f"float32 ({4 * dim} bytes)",
                path=path,
                hint=f"write the dim its values pack ({'exactly' if fixed else 'at most'} "
                f"{size // 4}: 4 bytes each)",
            )  # fmt: skip
    else:
        what = "a VECTOR column" + ("" if not own else ", or a BLOB/VARBINARY of packed float32")
        raise MappingError(
            f"column {col.name} ({col.column_type}) of table {table} is not a vector: a vector "
            f"field needs {what}",
            path=path,
            hint="name a VECTOR column"
            + ("" if not own else ", or a BLOB/VARBINARY column with dim: n")
            + (f" (a nested child's BLOB cannot be one: {docs('mapping.md#vector-fields')})"
               if not own and col.kind is Kind.BINARY else ""),
        )  # fmt: skip
    words = ["TYPE", "FLOAT32", "DIM", str(dim), "DISTANCE_METRIC", vec.metric]
    for name, value in vec.params:
        words += [name.upper(), str(value)]
    return (vec.algorithm, str(len(words)), *words)


def _declared_bytes(column_type: str) -> int | None:
    """``varbinary(128)`` / ``binary(128)``: 128; a BLOB: None (its length is not declared)."""
    head, _, rest = column_type.lower().partition("(")
    if head.strip() not in ("binary", "varbinary"):
        return None
    digits = rest.split(")")[0].strip()
    return int(digits) if digits.isdigit() else None
