"""Pure planning: (resolved table, rows) -> the Redis commands they need.

A row is a tuple of ``bytes | None`` in the order of ``TablePlan.select`` (primary-key
columns first), each value already the Redis text of docs/values.md. Each structure a table
maps to is one small class in ``migrator.structures.STRUCTURES``; ``TablePlan.plan`` runs
them over a batch, whose ``Batch`` (``migrator.plan.batch``) coalesces writes to the same key
(one SADD with many members, one HSET with many fields). ``TablePlan.pack`` is the same
plan packed straight to Redis protocol bytes (``migrator.plan.packer``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from migrator.mapping.model import Template
from migrator.mapping.resolve import Resolved, column_uses
from migrator.plan.batch import Batch, Command, KeyFn, Row, Stats, compile_template, joiner
from migrator.plan.packer import Packer
from migrator.plan.structures import STRUCTURES, Structure

__all__ = [
    "STRUCTURES",
    "Batch",
    "Command",
    "KeyFn",
    "Row",
    "Stats",
    "Structure",
    "TablePlan",
    "compile_template",
    "joiner",
]


class TablePlan:
    """Everything needed to turn rows of one table into Redis commands."""

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
        self.structures = [cls(self) for cls in STRUCTURES.values() if cls.wanted(self.table)]
        self._packer: Packer | None = None

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

    # -- planning --------------------------------------------------------------------------
    def plan(self, rows: Iterable[Row]) -> tuple[list[Command], Stats]:
        """The commands for a batch of rows, and what they amount to."""
        batch = Batch()
        adders = [s.add for s in self.structures]
        n = 0
        for row in rows:
            n += 1
            for add in adders:
                add(row, batch)
        batch.stats.rows = n
        return batch.finish(), batch.stats

    def pack(self, rows: Sequence[Row]) -> tuple[bytes, int, Stats]:
        """The hot path: (RESP bytes of ``plan(rows)``'s commands, their number, stats)."""
        if self._packer is None:
            self._packer = Packer(self)
        return self._packer.pack(rows)

    def counter_command(self, max_pk: bytes | None) -> Command | None:
        """``SET Tab:id MAX(pk)`` (0 for an empty table), or None without a counter."""
        counter = self.table.counter
        if not counter:
            return None
        return (b"SET", counter.render({}).encode(), max_pk if max_pk is not None else b"0")

    def latest_commands(self, key: Template, pks: Sequence[bytes]) -> list[Command]:
        """Rebuild a capped list atomically: MULTI, DEL, RPUSH newest..oldest, EXEC."""
        k = key.render({}).encode()
        commands: list[Command] = [(b"MULTI",), (b"DEL", k)]
        if pks:
            commands.append((b"RPUSH", k, *pks))
        commands.append((b"EXEC",))
        return commands

    def patterns(self) -> dict[str, list[str]]:
        """Structure name -> key patterns, including counters and latest lists."""
        out = {s.name: s.patterns() for s in self.structures}
        if self.table.counter:
            out["counter"] = [self.table.counter.text]
        if self.table.latest:
            out["latest"] = [latest.key.text for latest in self.table.latest]
        return {k: v for k, v in out.items() if v}


def _escape(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")
