"""The building blocks of a plan: row and command types, key templates compiled to functions
of a row, and ``Batch``, which collects one batch's commands and coalesces writes to a key.

The structures (``migrator.plan.structures``) write into a ``Batch``; the packer
(``migrator.plan.packer``) produces the same bytes without one. Both share the reasons below, so a
row skipped or rejected is counted under one name whichever path planned it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from hashlib import blake2b

from migrator.mapping.model import Template

Row = Sequence[bytes | None]
Command = tuple[bytes, ...]
KeyFn = Callable[[Row], bytes | None]

NULL_KEY = "NULL in a row-key column"
NULL_UNIQUE = "NULL unique value (not indexed)"
NULL_INDEX = "NULL index value (not indexed)"
#: rows listed by name in a table's reject report (the count is always exact)
MAX_LISTED = 1000


@dataclass(frozen=True)
class Reject:
    """A row not written: its primary-key values (as text) and the column to blame."""

    pk: tuple[str, ...]
    column: str
    reason: str

    def as_dict(self) -> dict[str, object]:
        return {"primary_key": list(self.pk), "column": self.column, "reason": self.reason}


def key_id(key: bytes) -> int:
    """A 64-bit id of a key, the same in every process, to count distinct keys cheaply."""
    return int.from_bytes(blake2b(key, digest_size=8).digest(), "little")


@dataclass
class Stats:
    rows: int = 0
    keys: int = 0  # keys written whole by one command: row hashes and strings, unique strings
    entries: int = 0  # members and fields added to index, unique, sorted and tag structures
    skipped: Counter[str] = field(default_factory=Counter)  # not indexed, and why
    rejected: Counter[str] = field(default_factory=Counter)  # rows not written at all, and why
    # ids (key_id) of the keys rows add to: unique HASHes, index, sorted and tag sets; a set
    # so that a key written by several batches or workers counts once (memory: one int per key)
    shared: set[int] = field(default_factory=set)
    rejects: list[Reject] = field(default_factory=list)  # the first MAX_LISTED of them, named
    # rows per driver that read them from MySQL ("asyncmy", "pymysql"): counted by the reader
    readers: Counter[str] = field(default_factory=Counter)

    @property
    def all_keys(self) -> int:
        """Every distinct key written (before the table's counter and latest lists)."""
        return self.keys + len(self.shared)

    def add(self, other: Stats) -> None:
        self.rows += other.rows
        self.keys += other.keys
        self.entries += other.entries
        self.shared |= other.shared
        self.skipped.update(other.skipped)
        self.rejected.update(other.rejected)
        self.readers.update(other.readers)
        self.rejects += other.rejects[: max(0, MAX_LISTED - len(self.rejects))]

    def reject(self, reason: str, pk: tuple[str, ...], column: str) -> None:
        self.rejected[reason] += 1
        if len(self.rejects) < MAX_LISTED:
            self.rejects.append(Reject(pk, column, reason))


class Batch:
    """Commands for one batch; writes to one key are coalesced into one command."""

    def __init__(self) -> None:
        self.commands: list[Command] = []
        self.hsets: dict[bytes, list[bytes]] = {}
        self.sadds: dict[bytes, list[bytes]] = {}
        self.zadds: dict[bytes, list[bytes]] = {}
        self.stats = Stats()

    # hset and sadd run once per row and index (verify, dry-run): kept inline for speed
    def hset(self, key: bytes, fieldname: bytes, value: bytes) -> None:
        got = self.hsets.get(key)
        if got is None:
            self.hsets[key] = [fieldname, value]
        else:
            got += (fieldname, value)
        self.stats.entries += 1

    def sadd(self, key: bytes, member: bytes) -> None:
        got = self.sadds.get(key)
        if got is None:
            self.sadds[key] = [member]
        else:
            got.append(member)
        self.stats.entries += 1

    def zadd(self, key: bytes, score: bytes, member: bytes) -> None:
        _append(self.zadds, key, score, member)
        self.stats.entries += 1

    def note_shared(self) -> None:
        """Count the keys of the coalesced writes (structures that many rows add to)."""
        for coalesced in (self.hsets, self.sadds, self.zadds):
            self.stats.shared.update(map(key_id, coalesced))

    def finish(self) -> list[Command]:
        self.note_shared()
        out = self.commands
        out.extend((b"HSET", k, *v) for k, v in self.hsets.items())
        out.extend((b"SADD", k, *v) for k, v in self.sadds.items())
        out.extend((b"ZADD", k, *v) for k, v in self.zadds.items())
        return out


def _append(coalesced: dict[bytes, list[bytes]], key: bytes, *args: bytes) -> None:
    """Add ``args`` to the one command that writes ``key``."""
    got = coalesced.get(key)
    if got is None:
        coalesced[key] = list(args)
    else:
        got += args


def template_parts(template: Template, pos: dict[str, int]) -> list[bytes | int]:
    """A key template as constant bytes and row positions, in order."""
    return [p.encode() if isinstance(p, str) else pos[template.columns[p]] for p in template.parts]


Escape = Callable[[bytes], bytes]


def compile_template(
    template: Template,
    pos: dict[str, int],
    esc: Escape | None = None,
    escaped: Collection[int] = (),
) -> KeyFn:
    """A function row -> rendered key bytes, or None when a value it needs is NULL; the
    values at the ``escaped`` positions go through ``esc`` (``escape: backslash``)."""
    parts = template_parts(template, pos)
    if template.lowered:
        return _lowering(template, pos, esc, escaped)
    if esc is not None and any(p in escaped for p in parts if isinstance(p, int)):
        return _escaping(parts, esc, escaped)
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


def lower(value: bytes) -> bytes:
    """A key template's ``{lower(column)}``: the text in lower case (Python's ``str.lower``,
    Unicode's case mapping), its bytes otherwise kept."""
    return value.decode("utf-8", "surrogateescape").lower().encode("utf-8", "surrogateescape")


def _lowering(
    template: Template, pos: dict[str, int], esc: Escape | None, escaped: Collection[int]
) -> KeyFn:
    """A template with ``{lower(column)}``: each such value lowered, then escaped."""
    marks: list[bytes | tuple[int, bool, bool]] = []
    for p in template.parts:
        if isinstance(p, str):
            marks.append(p.encode())
        else:
            i = pos[template.columns[p]]
            marks.append((i, template.is_lowered(p), esc is not None and i in escaped))

    def render(row: Row) -> bytes | None:
        out = []
        for m in marks:
            if isinstance(m, bytes):
                out.append(m)
                continue
            i, low, e = m
            v = row[i]
            if v is None:
                return None
            if low:
                v = lower(v)
            out.append(esc(v) if e else v)  # type: ignore[misc]
        return b"".join(out)

    return render


def _escaping(parts: list[bytes | int], esc: Escape, escaped: Collection[int]) -> KeyFn:
    def render(row: Row) -> bytes | None:
        out = []
        for p in parts:
            if isinstance(p, bytes):
                out.append(p)
            else:
                v = row[p]
                if v is None:
                    return None
                out.append(esc(v) if p in escaped else v)
        return b"".join(out)

    return render


def joiner(
    positions: Sequence[int], sep: bytes, esc: Escape | None = None, escaped: Collection[int] = ()
) -> KeyFn:
    """Values at ``positions`` joined by the separator; None if any is NULL. With ``esc``,
    the values at ``escaped`` positions are escaped (a composite under ``escape: backslash``)."""
    if len(positions) == 1:
        i = positions[0]
        return lambda row: row[i]
    if esc is not None and any(i in escaped for i in positions):
        marks = [(i, i in escaped) for i in positions]

        def join_escaped(row: Row) -> bytes | None:
            values = []
            for i, e in marks:
                v = row[i]
                if v is None:
                    return None
                values.append(esc(v) if e else v)
            return sep.join(values)

        return join_escaped

    def join(row: Row) -> bytes | None:
        values = [row[i] for i in positions]
        return None if None in values else sep.join(values)  # type: ignore[arg-type]

    return join
