"""Field names, value formats and lower() in key templates (docs/mapping.md#fields-and-formats):
what ``validate`` checks of them against the live schema."""

from __future__ import annotations

import re
from typing import Literal

from migrator.mapping.kinds import Kind
from migrator.mapping.model import DOCUMENTS, Table, Template
from migrator.mapping.schema import Column, TableSchema

Found = tuple[Literal["error", "warning"], str, str, str | None]  # level, path, message, hint

_TEMPORAL = (Kind.DATE, Kind.DATETIME, Kind.TIMESTAMP)
_EXACT = (Kind.INTEGER, Kind.DECIMAL, Kind.BIT, Kind.YEAR)


def check(table: Table, ts: TableSchema) -> list[Found]:
    """Every problem of the table's fields, formats and lower() placeholders."""
    p = f"tables.{table.name}"
    known = set(ts.column_names)
    written = (
        table.columns
        if table.columns is not None
        else tuple(c for c in ts.column_names if c not in (table.primary_key or ts.primary_key))
    )
    pk = table.primary_key or ts.row_identity() or ()
    held = set(written) | set(pk)
    out: list[Found] = []
    for key, pairs in (("fields", table.fields), ("formats", table.formats)):
        for column, _ in pairs:
            if column in known and column not in held:
                out.append(("error", f"{p}.{key}.{column}",
                            f"'{column}' is not written in the row's hash or strings",
                            f"add it to tables.{table.name}.columns"))  # fmt: skip
    names = [dict(table.fields).get(c, c) for c in dict.fromkeys((*pk, *written))]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        out.append(("error", f"{p}.fields",
                    f"two columns would be written as the field '{twice[0]}'",
                    "give each column a field name of its own"))  # fmt: skip
    for column, fmt in table.formats:
        if column in known:
            problem = _format_problem(ts.column(column), fmt)
            if problem is not None:
                out.append(("error", f"{p}.formats.{column}", problem, None))
            elif table.kind in DOCUMENTS and fmt == "number":
                out += _json_number(ts.column(column), f"{p}.formats.{column}")
    for path, template in _templates(table, p):
        for i, column in enumerate(template.columns):
            if column not in known or not template.is_lowered(i):
                continue
            col = ts.column(column)
            if col.kind is not Kind.TEXT or not _insensitive(col):
                out.append(("error", path,
                            f"lower({column}): '{column}' ({col.column_type}, "
                            f"{col.collation or 'no collation'}) is not case-insensitive text, "
                            "so values MySQL keeps apart ('Ken', 'ken') would share a key",
                            f"write {{{column}}} instead"))  # fmt: skip
    for i, u in enumerate(table.unique):
        if u.key is None:
            continue
        for n, column in enumerate(u.key.columns):
            if column not in known or u.key.is_lowered(n):
                continue
            col = ts.column(column)
            if col.kind is Kind.TEXT and _insensitive(col):
                out.append(("warning", f"{p}.unique[{i}].key",
                            f"'{column}' has the case-insensitive collation {col.collation}: "
                            "MySQL keeps 'Ken' and 'ken' as one value, but they are two keys",
                            f"write {{lower({column})}} so that a look-up by either "
                            "spelling finds the row"))  # fmt: skip
    return out


def _templates(table: Table, p: str) -> list[tuple[str, Template]]:
    out: list[tuple[str, Template]] = []
    if table.key is not None:
        out.append((f"{p}.key", table.key))
    out += [(f"{p}.unique[{i}].key", u.key) for i, u in enumerate(table.unique) if u.key]
    out += [(f"{p}.sorted[{i}].key", s.key) for i, s in enumerate(table.sorted)]
    for i, s in enumerate(table.sets):
        out += [(f"{p}.sets[{i}].key", s.key), (f"{p}.sets[{i}].member", s.member)]
    return out


def _insensitive(col: Column) -> bool:
    return "_ci" in (col.collation or "").lower()


#: significant digits a 64-bit float holds exactly (DBL_DIG): a JSON number with more is
#: rounded by RedisJSON and by most readers
FLOAT_DIGITS = 15
_PRECISION = re.compile(r"\w+\((\d+)")


def _json_number(col: Column, path: str) -> list[Found]:
    """A DECIMAL written as a JSON number (``number`` in a document) must fit a 64-bit float."""
    m = _PRECISION.match(col.column_type)
    if col.kind is not Kind.DECIMAL or m is None or int(m.group(1)) <= FLOAT_DIGITS:
        return []
    problem = (
        f"'{col.name}' ({col.column_type}) has more than {FLOAT_DIGITS} digits: as a JSON "
        "number it would be rounded (RedisJSON and most readers hold 64-bit floats)"
    )
    fix = "leave out the number format: a DECIMAL is written exactly, as a JSON string"
    return [("error", path, problem, fix)]


def _format_problem(col: Column, fmt: str) -> str | None:
    kind = col.kind
    if fmt in ("epoch", "epoch_ms", "iso8601") and kind not in _TEMPORAL:
        return f"'{col.name}' ({col.column_type}) is not a DATE, DATETIME or TIMESTAMP: no {fmt}"
    if fmt == "boolean":
        base = col.column_type.lower().replace(" unsigned", "").replace(" zerofill", "")
        if base not in ("tinyint(1)", "bit(1)"):
            return f"'{col.name}' ({col.column_type}) is not TINYINT(1) or BIT(1): no boolean"
    if fmt == "number" and kind not in _EXACT:
        return (
            f"'{col.name}' ({col.column_type}) is not an exact number (integer, DECIMAL, BIT, "
            "YEAR): no number format"
        )
    return None
