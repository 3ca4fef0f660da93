"""A table's expiry (``expire:``, mapping/expiry.py) as commands: the moment a row expires,
the ``PEXPIREAT`` of every key the row owns alone (its hash or column strings, its
string-style unique keys), and the table's expiry schedule.

The schedule is two keys migrator keeps of its own, without a TTL:

* ``migrator:<mapping>:expiry:<table>``: a sorted set, member the row's primary key (as its
  key writes it), score the moment it expires (Unix milliseconds);
* ``migrator:<mapping>:expiry:<table>:memo``: a hash, the same member -> the row's image
  (every selected value, ``encode_row``), written with the row.

Redis expires the row's own keys by itself; the shared structures (unique hashes, index,
reference and tag sets, sorted sets, latest lists) are cleaned by a *sweep* that reads the
members whose moment has passed and their memos, and plans each like a DELETE of that row
(store/expiry_sweep.py). The memo is needed because by then Redis may have expired the row's
hash already.

"now" is the clock of the machine that runs migrator (``time.time``), in milliseconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from migrator.mapping.expiry import Expiry
from migrator.plan.batch import Command, KeyFn, Row
from migrator.plan.layout import TableLayout
from migrator.plan.values import unix_seconds

Clock = Callable[[], float]
#: a row whose expiry column holds no moment (a zero date) counts as expired: MySQL's
#: ``col > cutoff`` (source/expiry.py) is false for it too
EXPIRED = 0


def schedule_key(mapping_name: str, table: str) -> bytes:
    return f"migrator:{mapping_name}:expiry:{table}".encode()


def memo_key(mapping_name: str, table: str) -> bytes:
    return schedule_key(mapping_name, table) + b":memo"


def gone_key(mapping_name: str, table: str) -> bytes:
    """Under a fixed ttl: the rows the sweep removed (score: their moment), until written
    again, so that verify counts them correctly absent (MySQL still holds them)."""
    return schedule_key(mapping_name, table) + b":gone"


class RowExpiry:
    """One table's expiry: ``moment(row)`` in Unix ms (None: never), and the commands."""

    def __init__(self, plan: TableLayout, rule: Expiry, clock: Clock = time.time) -> None:
        self.rule = rule
        self.clock = clock
        self.pk_text: KeyFn = plan.pk_text
        name = plan.resolved.mapping_name
        self.schedule = schedule_key(name, plan.table.name)
        self.memo = memo_key(name, plan.table.name)
        self.gone = gone_key(name, plan.table.name)
        self.position = None if rule.column is None else plan.pos[rule.column]
        kind = None if rule.column is None else plan.resolved.schema.column(rule.column).kind
        self.temporal = kind is not None and kind.temporal
        self.scale = 1.0 if rule.unit == "s" else 0.001
        self.offset_ms = round(rule.offset * 1000)
        self.ttl_ms = None if rule.ttl is None else round(rule.ttl * 1000)

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    def moment(self, row: Row, now_ms: int) -> int | None:
        """When the row's keys expire (Unix ms), or None: never (a NULL in the column)."""
        if self.ttl_ms is not None:
            return now_ms + self.ttl_ms
        raw = row[self.position]  # type: ignore[index]
        if raw is None:
            return None
        text = unix_seconds(raw) if self.temporal else raw
        if text is None:
            return EXPIRED
        try:
            seconds = float(text) * self.scale
        except ValueError:
            return EXPIRED
        return round(seconds * 1000) + self.offset_ms

    def commands(self, row: Row, keys: Sequence[bytes], moment: int | None) -> list[Command]:
        """PEXPIREAT of the row's own keys; with a moment, the row's schedule entry and memo;
        without one (never expires), its removal from the schedule."""
        pk = self.pk_text(row)
        if moment is None:
            out: list[Command] = [(b"PERSIST", k) for k in keys]
            if pk is not None:
                out += [(b"ZREM", self.schedule, pk), (b"HDEL", self.memo, pk)]
            return out
        at = b"%d" % moment
        out = [(b"PEXPIREAT", k, at) for k in keys]
        if pk is not None:
            out += [(b"ZADD", self.schedule, at, pk), (b"HSET", self.memo, pk, encode_row(row))]
            if self.ttl_ms is not None:
                out.append((b"ZREM", self.gone, pk))
        return out


def encode_row(row: Row) -> bytes:
    """A row image for the memo: per value ``-`` for NULL, else ``<length>:<bytes>``."""
    return b"".join(b"-" if v is None else b"%d:%b" % (len(v), v) for v in row)


def decode_row(blob: bytes) -> tuple[bytes | None, ...]:
    out: list[bytes | None] = []
    i = 0
    while i < len(blob):
        if blob[i : i + 1] == b"-":
            out.append(None)
            i += 1
            continue
        colon = blob.index(b":", i)
        n = int(blob[i:colon])
        out.append(blob[colon + 1 : colon + 1 + n])
        i = colon + 1 + n
    return tuple(out)
