"""``migrator validate``: the loader's checks, then, given a source, checks against the live
schema. Every problem is collected (not only the first) and names the mapping path and the
YAML line; errors make the exit code 2, warnings do not."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from migrator.errors import EXIT_OK, EXIT_USAGE, MappingError, MappingErrors
from migrator.mapping import vector_sets
from migrator.mapping.expiry import check as check_expiry
from migrator.mapping.model import Mapping, Table
from migrator.mapping.resolve import column_uses, default_key, resolve
from migrator.mapping.schema import Schema, TableSchema
from migrator.mapping.shape import suggest
from migrator.mapping.transforms import check as check_transforms
from migrator.mapping.where import check as check_filter

Level = Literal["error", "warning"]


@dataclass(frozen=True)
class Problem:
    level: Level
    message: str
    path: str = ""
    file: str | None = None
    line: int | None = None
    hint: str | None = None
    #: the one-line form of a problem that concerns ``sync`` only (migrate and verify are not
    #: affected): validate prints it so unless asked for the whole (``--sync``)
    brief: str | None = None

    def __str__(self) -> str:
        where = self.file or "<mapping>"
        if self.line is not None:
            where += f":{self.line}"
        text = f"{where}: {self.path}: {self.message}" if self.path else f"{where}: {self.message}"
        return text if not self.hint else f"{text} ({self.hint})"

    def as_dict(self) -> dict[str, Any]:
        return {
            "level": self.level,
            "file": self.file,
            "line": self.line,
            "path": self.path,
            "message": self.message,
            "hint": self.hint,
            "brief": self.brief,
        }


@dataclass
class ValidateReport:
    file: str
    tables: int = 0
    source: str | None = None  # masked; None when only the file was checked
    problems: list[Problem] = field(default_factory=list)

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.level == "error"]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.problems if p.level == "warning"]

    @property
    def exit_code(self) -> int:
        return EXIT_USAGE if self.errors else EXIT_OK

    def summary(self) -> str:
        """``mappings/emp.yaml: OK, 3 tables`` or ``...: 2 errors, 1 warning``."""
        counts = []
        if self.errors:
            counts.append(plural(len(self.errors), "error"))
        if self.warnings:
            counts.append(plural(len(self.warnings), "warning"))
        if not self.errors:
            counts.insert(0, "OK")
            counts.insert(1, plural(self.tables, "table"))
        text = f"{self.file}: " + ", ".join(counts)
        if self.source is None and not self.errors:
            text += " (file only: no source given; pass --source URL to check the live schema)"
        elif self.source is not None:
            text += f" (checked against {self.source})"
        return text

    def as_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "tables": self.tables,
            "source": self.source,
            "ok": not self.errors,
            "problems": [p.as_dict() for p in self.problems],
        }


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def problem_from(e: MappingError, level: Level = "error") -> Problem:
    return Problem(level, e.detail, e.path, e.file, e.line, e.hint)


def check_schema(mapping: Mapping, schema: Schema) -> list[Problem]:
    """Every problem of the mapping against the live schema, in file order."""
    problems: list[Problem] = []
    for table in mapping.tables:
        problems += _check_table(mapping, table, schema)
    problems.sort(key=lambda p: (p.line or 0, p.path))
    return problems


def _check_table(mapping: Mapping, table: Table, schema: Schema) -> list[Problem]:
    path = f"tables.{table.name}"

    def problem(level: Level, where: str, message: str, hint: str | None = None) -> Problem:
        return Problem(level, message, where, mapping.file, mapping.line_of(where), hint)

    ts = schema.tables.get(table.name)
    if ts is None:
        what = "is a view" if table.name in schema.views else "no such table"
        msg = f"{what} '{table.name}' in database '{schema.database}'"
        if table.name in schema.views:
            return [problem("error", path, f"'{table.name}' is a view; only base tables migrate")]
        return [problem("error", path, msg, suggest(table.name, schema.tables))]
    known = ts.column_names
    unknown = [
        problem("error", use, f"unknown column '{col}' in table {table.name}", suggest(col, known))
        for use, col in column_uses(table)
        if col not in known
    ]
    out = unknown + _check_references(table, schema, problem)
    out += _check_columns(table, ts, problem)
    out += _check_key(mapping, table, ts, problem)
    out += [problem(level, where, message, hint)
            for level, where, message, hint in check_transforms(table, ts)]  # fmt: skip
    if table.where is not None:
        out += [
            problem("error", f"{path}.where", message, hint)
            for message, hint in check_filter(table.where, ts)
        ]
    out += [problem("error", where, message, hint)
            for where, message, hint in vector_sets.check(table, ts)]  # fmt: skip
    if table.expire is not None and not unknown:
        out += [
            problem("error", f"{path}.expire", message, hint)
            for message, hint in check_expiry(table.expire, ts, bool(table.latest))
        ]
    if unknown:
        return out
    try:
        resolve(mapping, schema, [table.name])
    except (MappingError, MappingErrors) as e:
        found = {(p.path, p.message) for p in out}
        errors = e.errors if isinstance(e, MappingErrors) else [e]
        out += [problem_from(x) for x in errors if (x.path, x.detail) not in found]
    return out


def _check_key(mapping: Mapping, table: Table, ts: TableSchema, problem: Any) -> list[Problem]:
    """The row key must name a row: contain the declared primary key (trusted, with a warning
    from ``_check_columns`` when MySQL does not enforce it), else a key MySQL enforces."""
    path = f"tables.{table.name}"
    if table.kind == "none":
        return []
    pk = table.primary_key or ts.row_identity()
    if not pk:
        return [
            problem(
                "error",
                path,
                f"table '{table.name}' has no primary key and no NOT NULL unique index to "
                "key its rows",
                "declare the columns that identify a row, e.g. primary_key: [col] with "
                f'key: "{table.name}:{{col}}" (MySQL will not enforce it; migrate and '
                "verify report rows that share a key)",
            )
        ]
    key = table.key or default_key(table.name, pk, mapping.options.separator)
    where = f"{path}.key" if table.key is not None else path
    example = mapping.options.separator.join([table.name, *(f"{{{c}}}" for c in pk)])
    if table.primary_key is not None:
        if set(pk) <= set(key.columns):
            return []
        return [
            problem(
                "error",
                where,
                f"the row key '{key.text}' does not contain the declared primary key "
                f"{list(pk)}: rows would overwrite each other",
                f"put every primary_key column in the key, e.g. {example}",
            )
        ]
    if any(set(k) <= set(key.columns) for k in _enforced_keys(ts)):
        return []
    return [
        problem(
            "error",
            where,
            f"the row key '{key.text}' does not contain the primary key {list(pk)} or a "
            "NOT NULL unique key: rows would overwrite each other",
            f"put every primary-key column in the key, e.g. {example}",
        )
    ]


def _check_columns(table: Table, ts: TableSchema, problem: Any) -> list[Problem]:
    """Scores that cannot be scores, uniqueness MySQL does not enforce (known columns only)."""
    path = f"tables.{table.name}"
    known = set(ts.column_names)
    out = []
    pk = table.primary_key
    if pk is not None and set(pk) <= known and not ts.is_unique(pk):
        out.append(
            problem(
                "warning",
                f"{path}.primary_key",
                f"MySQL does not enforce {list(pk)} as unique: rows with the "
                "same values would overwrite each other",
                "migrate and verify report rows that share a key; a UNIQUE index in MySQL "
                "would guarantee there are none",
            )
        )
    for i, s in enumerate(table.sorted):
        if s.score not in known:
            continue
        col = ts.column(s.score)
        if not col.kind.scorable:
            out.append(
                problem(
                    "error",
                    f"{path}.sorted[{i}].score",
                    f"column '{s.score}' ({col.column_type}) is neither numeric nor a date, "
                    "so it cannot be a sorted-set score",
                    "score by a numeric, DATE, DATETIME or TIMESTAMP column",
                )
            )
    for i, u in enumerate(table.unique):
        if set(u.columns) <= known and not ts.is_unique(u.columns):
            out.append(
                problem(
                    "warning",
                    f"{path}.unique[{i}]",
                    f"MySQL does not enforce {list(u.columns)} as unique in {table.name}: "
                    "a value several rows hold gets one entry, naming one of them; migrate "
                    "and verify count such values as differences (exit 1), and sync keeps the "
                    "entry while any row holds the value",
                    "use 'indexes' for a non-unique column, or add a UNIQUE index in MySQL; "
                    "migrate and verify print the SQL that lists the rows",
                )
            )
    return out


def _enforced_keys(ts: TableSchema) -> list[tuple[str, ...]]:
    """Column sets MySQL guarantees identify one row: the primary key, NOT NULL uniques."""
    keys = [ts.primary_key] if ts.primary_key else []
    keys += [
        ix.columns
        for ix in ts.indexes
        if ix.unique and all(not ts.column(c).nullable for c in ix.columns)
    ]
    return keys


def _check_references(table: Table, schema: Schema, problem: Any) -> list[Problem]:
    out = []
    for i, ref in enumerate(table.references):
        where = f"tables.{table.name}.references[{i}]"
        parent = schema.tables.get(ref.table)
        if parent is None:
            out.append(
                problem(
                    "error",
                    f"{where}.table",
                    f"the parent table '{ref.table}' does not exist in '{schema.database}'",
                    suggest(ref.table, schema.tables),
                )
            )
            continue
        for col in ref.parent_columns or ():
            if col not in parent.column_names:
                out.append(
                    problem(
                        "error",
                        f"{where}.parent_columns",
                        f"unknown column '{col}' in parent table {ref.table}",
                        suggest(col, parent.column_names),
                    )
                )
    return out
