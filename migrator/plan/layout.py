"""A table's row layout: the columns read (primary key first), their positions in a row, and
the key functions built from the mapping's templates. Shared by the planner's structures,
the packed hot path and verify."""

from __future__ import annotations

from migrator.mapping.model import Template
from migrator.mapping.resolve import Resolved, column_uses
from migrator.plan.batch import compile_template, joiner


class TableLayout:
    """Where one table's row values sit (``select``, ``pos``) and the keys they make."""

    def __init__(self, resolved: Resolved) -> None:
        self.resolved = resolved
        self.table = resolved.table
        self.table_sep = resolved.separator
        self.sep = resolved.separator.encode()
        self.select = self._select_columns()
        self.pos = {name: i for i, name in enumerate(self.select)}
        self.row_key = compile_template(self.resolved.key, self.pos)
        key = self.resolved.key
        self.row_key_positions = [self.pos[key.columns[p]] for p in key.parts if isinstance(p, int)]
        self.pk_text = joiner(range(len(self.resolved.primary_key)), self.sep)

    def _select_columns(self) -> tuple[str, ...]:
        names = list(self.resolved.primary_key)
        own_columns = f"tables.{self.table.name}.columns"
        wanted = [
            c for p, c in column_uses(self.table) if self.table.kind != "none" or p != own_columns
        ]
        for c in self.resolved.schema.column_names:  # schema order, for readable SQL
            if c in wanted and c not in names:
                names.append(c)
        return tuple(names)

    # -- key names -------------------------------------------------------------------------
    def unique_hash_key(self, columns: tuple[str, ...]) -> bytes:
        return self.table_sep.join([self.table.name, "uniques", *columns]).encode()

    def index_template(self, columns: tuple[str, ...]) -> Template:
        parts = [_escape(self.table.name), "indices"]
        for c in columns:
            parts += [_escape(c), f"{{{c}}}"]
        return Template.parse(self.table_sep.join(parts))


def _escape(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")
