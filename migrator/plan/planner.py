"""Pure planning: (resolved table, rows) -> the Redis commands they need.

A row is a tuple of ``bytes | None`` in the order of ``TablePlan.select`` (primary-key
columns first), each value already the Redis text of docs/values.md. Each structure a table
maps to is one small class in ``migrator.plan.structures.STRUCTURES``; ``TablePlan.plan`` runs
them over a batch, whose ``Batch`` (``migrator.plan.batch``) coalesces writes to the same key
(one SADD with many members, one HSET with many fields). ``TablePlan.pack`` is the same
plan packed straight to Redis protocol bytes (``migrator.plan.packer``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from migrator.mapping.model import Template
from migrator.mapping.resolve import Resolved
from migrator.plan.batch import Batch, Command, KeyFn, Row, Stats, compile_template, joiner
from migrator.plan.expiry import RowExpiry
from migrator.plan.layout import TableLayout
from migrator.plan.owners import Owners, owners_of, sharded
from migrator.plan.packer import Packer
from migrator.plan.resp import resp
from migrator.plan.row_images import RowImages
from migrator.plan.row_images import wanted as images_wanted
from migrator.plan.structures import STRUCTURES as BASE
from migrator.plan.structures import Structure
from migrator.plan.vector_sets import VectorSets
from migrator.plan.where import row_test

#: every structure a table may get, in the order their commands go out
STRUCTURES: dict[str, type[Structure]] = {**BASE, VectorSets.name: VectorSets}

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


class TablePlan(TableLayout):
    """Everything needed to turn rows of one table into Redis commands."""

    def __init__(self, resolved: Resolved) -> None:
        super().__init__(resolved)
        self.structures = [cls(self) for cls in STRUCTURES.values() if cls.wanted(self.table)]
        #: the images of the rows the filter leaves out, kept too (plan/row_images.py): the
        #: filter as a test of a row, rows read unfiltered (source/where.py ``read_clause``)
        self.keeps: Callable[[Row], bool] | None = None
        self.left_out_images: RowImages | None = None
        if images_wanted(self):  # what sync's cascades read (plan/row_images.py)
            images = RowImages(self)
            self.structures.append(images)
            if images.left_out and self.table.where is not None:
                self.keeps = row_test(self.table.where, self.pos, resolved.schema)
                self.left_out_images = images
        if sharded(self.resolved):  # which shard each row came from (plan/owners.py)
            self.structures.append(Owners(self))
        self._packer: Packer | None = None
        rule = self.table.expire
        #: the table's expiry (expire:): TTLs of the row's own keys and its schedule
        self.expiry = None if rule is None else RowExpiry(self, rule)

    # -- planning --------------------------------------------------------------------------
    def plan(self, rows: Iterable[Row]) -> tuple[list[Command], Stats]:
        """The commands for a batch of rows, and what they amount to."""
        if self.keeps is not None:
            kept, left_out = self.split(rows)
            commands, stats = self._plan(kept)
            return commands + self.left_out_commands(left_out), stats
        return self._plan(rows)

    def split(self, rows: Iterable[Row]) -> tuple[list[Row], list[Row]]:
        """A batch read unfiltered: (the rows the filter keeps, those it leaves out)."""
        keeps = self.keeps
        assert keeps is not None
        kept: list[Row] = []
        left_out: list[Row] = []
        for row in rows:
            (kept if keeps(row) else left_out).append(row)
        return kept, left_out

    def left_out_commands(self, rows: Sequence[Row]) -> list[Command]:
        """The row images of rows the filter leaves out: nothing else of theirs is written."""
        images = self.left_out_images
        if not rows or images is None:
            return []
        batch = Batch()
        for row in rows:
            images.add(row, batch)
        return batch.finish()

    def _plan(self, rows: Iterable[Row]) -> tuple[list[Command], Stats]:
        batch = Batch()
        adders = [s.add for s in self.structures]
        checked = bool(self.guards)
        if self.expiry is not None:
            return self._plan_expiring(rows, batch, adders, checked)
        n = 0
        for row in rows:
            n += 1
            if checked and (column := self.ambiguous(row)) is not None:
                self.reject(row, column, batch.stats)  # a separator in a composite's value
                continue
            for add in adders:
                add(row, batch)
        batch.stats.rows = n
        return batch.finish(), batch.stats

    def _plan_expiring(
        self, rows: Iterable[Row], batch: Batch, adders: list, checked: bool
    ) -> tuple[list[Command], Stats]:
        """``plan`` for a table with ``expire:``: a row already past its moment is left out;
        each other row's own keys (the commands its structures write whole) get their
        PEXPIREAT right after them, and the row its schedule entry (plan/expiry.py)."""
        expiry = self.expiry
        assert expiry is not None
        now = expiry.now_ms()
        n = 0
        out = batch.commands
        owners = owners_of(self)
        owner = b"" if owners is None else owners.owner()
        for row in rows:
            moment = expiry.moment(row, now)
            if moment is not None and moment <= now:
                if owners is not None and owner:  # claimed (store/claims.py), then past its
                    out.append((b"HDEL", owners.key, owners.field(row)))  # moment: no owner
                continue  # expired: absent from Redis, as the read's condition leaves it
            n += 1
            if checked and (column := self.ambiguous(row)) is not None:
                self.reject(row, column, batch.stats)
                continue
            start = len(out)
            for add in adders:
                add(row, batch)
            # its own keys' PEXPIREAT; the schedule entry even without any (as: none): the
            # sweep removes the members the row holds
            out += expiry.commands(row, [c[1] for c in out[start:]], moment)
        batch.stats.rows = n
        return batch.finish(), batch.stats

    def written(self, rows: Iterable[Row]) -> list[Row]:
        """The rows of a batch that ``plan`` writes: not rejected (a separator in a composite's
        value), not past their expiry, kept by the filter where the rows are read unfiltered
        (``keeps``; the first load's snapshot entries, plan/stream.py)."""
        if self.keeps is not None:
            rows = self.split(rows)[0]
        expiry, checked = self.expiry, bool(self.guards)
        if expiry is None and not checked:
            return list(rows)
        now = 0 if expiry is None else expiry.now_ms()
        out = []
        for row in rows:
            moment = None if expiry is None else expiry.moment(row, now)
            if moment is not None and moment <= now:
                continue  # expired: absent from Redis
            if checked and self.ambiguous(row) is not None:
                continue
            out.append(row)
        return out

    def pack(self, rows: Sequence[Row]) -> tuple[bytes, int, Stats]:
        """The hot path: (RESP bytes of ``plan(rows)``'s commands, their number, stats)."""
        if self.expiry is not None:  # the general path: PEXPIREAT after each row's keys
            commands, stats = self.plan(rows)
            return resp(commands), len(commands), stats
        if self.keeps is not None:
            kept, left_out = self.split(rows)
            payload, count, stats = self._pack(kept)
            extra = self.left_out_commands(left_out)
            return payload + resp(extra), count + len(extra), stats
        return self._pack(rows)

    def _pack(self, rows: Sequence[Row]) -> tuple[bytes, int, Stats]:
        if self._packer is None:
            self._packer = Packer(self, self.structures, self._plan)
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
