"""Pure planning: (resolved table, rows) -> the Redis commands they need.

A row is a tuple of ``bytes | None`` in the order of ``TablePlan.select`` (primary-key
columns first), each value already the Redis text of SPEC section 3. Each structure a table
maps to is one small class in ``STRUCTURES``; ``TablePlan.plan`` runs them over a batch and
coalesces writes to the same key (one SADD with many members, one HSET with many fields).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from migrator.model import Template
from migrator.resolve import Resolved, column_uses
from migrator.values import score as to_score

Row = Sequence[bytes | None]
Command = tuple[bytes, ...]
KeyFn = Callable[[Row], bytes | None]


@dataclass
class Stats:
    rows: int = 0
    keys: int = 0  # row keys (hashes, column strings) and unique strings written
    entries: int = 0  # members and fields added to index, unique, sorted and tag structures
    skipped: Counter[str] = field(default_factory=Counter)  # not indexed, and why
    rejected: Counter[str] = field(default_factory=Counter)  # rows not written at all, and why

    def add(self, other: Stats) -> None:
        self.rows += other.rows
        self.keys += other.keys
        self.entries += other.entries
        self.skipped.update(other.skipped)
        self.rejected.update(other.rejected)


class Batch:
    """Commands for one batch; writes to one key are coalesced into one command."""

    def __init__(self) -> None:
        self.commands: list[Command] = []
        self.hsets: dict[bytes, list[bytes]] = {}
        self.sadds: dict[bytes, list[bytes]] = {}
        self.zadds: dict[bytes, list[bytes]] = {}
        self.stats = Stats()

    def hset(self, key: bytes, fieldname: bytes, value: bytes) -> None:
        args = self.hsets.get(key)
        if args is None:
            self.hsets[key] = [fieldname, value]
        else:
            args += (fieldname, value)
        self.stats.entries += 1

    def sadd(self, key: bytes, member: bytes) -> None:
        members = self.sadds.get(key)
        if members is None:
            self.sadds[key] = [member]
        else:
            members.append(member)
        self.stats.entries += 1

    def zadd(self, key: bytes, score: bytes, member: bytes) -> None:
        args = self.zadds.get(key)
        if args is None:
            self.zadds[key] = [score, member]
        else:
            args += (score, member)
        self.stats.entries += 1

    def finish(self) -> list[Command]:
        out = self.commands
        out.extend((b"HSET", k, *v) for k, v in self.hsets.items())
        out.extend((b"SADD", k, *v) for k, v in self.sadds.items())
        out.extend((b"ZADD", k, *v) for k, v in self.zadds.items())
        return out


def compile_template(template: Template, pos: dict[str, int]) -> KeyFn:
    """A function row -> rendered key bytes, or None when a value it needs is NULL."""
    parts: list[bytes | int] = [
        p.encode() if isinstance(p, str) else pos[template.columns[p]] for p in template.parts
    ]
    if len(parts) == 2 and isinstance(parts[0], bytes) and isinstance(parts[1], int):
        prefix, i = parts[0], parts[1]

        def prefixed(row: Row) -> bytes | None:
            v = row[i]
            return None if v is None else prefix + v

        return prefixed

    def render(row: Row) -> bytes | None:
        out = []
        for p in parts:
            if isinstance(p, bytes):
                out.append(p)
            else:
                v = row[p]
                if v is None:
                    return None
                out.append(v)
        return b"".join(out)

    return render


def joiner(positions: Sequence[int], sep: bytes) -> KeyFn:
    """Values at ``positions`` joined by the separator; None if any is NULL."""
    if len(positions) == 1:
        i = positions[0]
        return lambda row: row[i]

    def join(row: Row) -> bytes | None:
        values = [row[i] for i in positions]
        return None if None in values else sep.join(values)  # type: ignore[arg-type]

    return join


class Structure:
    """One Redis structure a table maps to; ``add`` puts one row's writes into a batch."""

    name = ""

    def __init__(self, plan: TablePlan) -> None:
        self.plan = plan

    def add(self, row: Row, batch: Batch) -> None:
        raise NotImplementedError

    def patterns(self) -> list[str]:
        """The key patterns this structure writes, for people (dry-run) and SCAN (verify)."""
        return []


class RowHash(Structure):
    name = "hash"

    def __init__(self, plan: TablePlan) -> None:
        super().__init__(plan)
        self.fields = [(c.encode(), plan.pos[c]) for c in plan.resolved.columns]
        self.pk_fields = [(c.encode(), plan.pos[c]) for c in plan.resolved.primary_key]

    def add(self, row: Row, batch: Batch) -> None:
        key = self.plan.row_key(row)
        if key is None:
            batch.stats.rejected["NULL in a row-key column"] += 1
            return
        args: list[bytes] = [b"HSET", key]
        for name, i in self.fields:
            v = row[i]
            if v is not None:
                args += (name, v)
        if len(args) == 2:  # every field NULL: keep the row, keyed by its primary key
            for name, i in self.pk_fields:
                args += (name, row[i] or b"")
        batch.commands.append(tuple(args))
        batch.stats.keys += 1

    def patterns(self) -> list[str]:
        return [self.plan.resolved.key.text]


class RowColumns(Structure):
    """``as: columns``: one STRING per column, ``{row key}{sep}{column}`` -> value."""

    name = "columns"

    def __init__(self, plan: TablePlan) -> None:
        super().__init__(plan)
        sep = plan.sep
        self.fields = [(sep + c.encode(), plan.pos[c]) for c in plan.resolved.columns]
        self.pk_fields = [(sep + c.encode(), plan.pos[c]) for c in plan.resolved.primary_key]

    def add(self, row: Row, batch: Batch) -> None:
        key = self.plan.row_key(row)
        if key is None:
            batch.stats.rejected["NULL in a row-key column"] += 1
            return
        written = 0
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
        return [f"{self.plan.resolved.key.text}{sep}{c}" for c in self.plan.resolved.columns]


class UniqueHashes(Structure):
    """``Tab:uniques:c1[:c2]`` HASH {"v1[:v2]" -> pk} for each HASH-style unique index."""

    name = "unique"

    def __init__(self, plan: TablePlan) -> None:
        super().__init__(plan)
        self.items = [
            (plan.unique_hash_key(u.columns), joiner([plan.pos[c] for c in u.columns], plan.sep))
            for u in plan.table.unique
            if u.key is None
        ]

    def add(self, row: Row, batch: Batch) -> None:
        pk = self.plan.pk_text(row)
        for key, value_of in self.items:
            v = value_of(row)
            if v is None:
                batch.stats.skipped["NULL unique value (not indexed)"] += 1
            else:
                batch.hset(key, v, pk)  # type: ignore[arg-type]

    def patterns(self) -> list[str]:
        return [k.decode("utf-8", "replace") for k, _ in self.items]


class UniqueStrings(Structure):
    """A STRING per unique value, named by the template (``login:{name}:id`` -> pk)."""

    name = "unique-string"

    def __init__(self, plan: TablePlan) -> None:
        super().__init__(plan)
        self.items = [
            (u.key.text, compile_template(u.key, plan.pos))
            for u in plan.table.unique
            if u.key is not None
        ]

    def add(self, row: Row, batch: Batch) -> None:
        pk = self.plan.pk_text(row)
        for _, key_of in self.items:
            key = key_of(row)
            if key is None:
                batch.stats.skipped["NULL unique value (not indexed)"] += 1
            else:
                batch.commands.append((b"SET", key, pk))  # type: ignore[arg-type]
                batch.stats.entries += 1

    def patterns(self) -> list[str]:
        return [text for text, _ in self.items]


class IndexSets(Structure):
    """``Tab:indices:c1:v1[:c2:v2]`` SET {pk...} per non-unique index and foreign key."""

    name = "index"

    def __init__(self, plan: TablePlan) -> None:
        super().__init__(plan)
        self.templates = [plan.index_template(ix.columns) for ix in plan.resolved.index_sets()]
        self.items = [compile_template(t, plan.pos) for t in self.templates]

    def add(self, row: Row, batch: Batch) -> None:
        pk = self.plan.pk_text(row)
        for key_of in self.items:
            key = key_of(row)
            if key is None:
                batch.stats.skipped["NULL index value (not indexed)"] += 1
            else:
                batch.sadd(key, pk)  # type: ignore[arg-type]

    def patterns(self) -> list[str]:
        return [t.text for t in self.templates]


class SortedSets(Structure):
    """ZADD key score pk; scores per SPEC 3 (numbers; dates as Unix seconds)."""

    name = "sorted"

    def __init__(self, plan: TablePlan) -> None:
        super().__init__(plan)
        self.items = [
            (
                s.key.text,
                compile_template(s.key, plan.pos),
                plan.pos[s.score],
                plan.resolved.schema.column(s.score).kind,
            )
            for s in plan.table.sorted
        ]

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

    def __init__(self, plan: TablePlan) -> None:
        super().__init__(plan)
        self.items = [
            (s.key.text, compile_template(s.key, plan.pos), compile_template(s.member, plan.pos))
            for s in plan.table.sets
        ]

    def add(self, row: Row, batch: Batch) -> None:
        for _, key_of, member_of in self.items:
            key, member = key_of(row), member_of(row)
            if key is None or member is None:
                batch.stats.skipped["NULL in a set key or member (not in set)"] += 1
            else:
                batch.sadd(key, member)

    def patterns(self) -> list[str]:
        return [text for text, *_ in self.items]


#: the registry: which structure classes a table gets, by its mapping
STRUCTURES: dict[str, type[Structure]] = {
    "hash": RowHash,
    "columns": RowColumns,
    "unique": UniqueHashes,
    "unique-string": UniqueStrings,
    "index": IndexSets,
    "sorted": SortedSets,
    "set": TagSets,
}


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
        self.structures = [cls(self) for name, cls in STRUCTURES.items() if self._uses(name)]
        self._packer: Any = None

    def _uses(self, name: str) -> bool:
        t = self.table
        return {
            "hash": t.kind == "hash",
            "columns": t.kind == "columns",
            "unique": any(u.key is None for u in t.unique),
            "unique-string": any(u.key is not None for u in t.unique),
            "index": bool(t.indexes or t.references),
            "sorted": bool(t.sorted),
            "set": bool(t.sets),
        }[name]

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
            from migrator.packer import Packer

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
