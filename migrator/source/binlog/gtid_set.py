"""MySQL's GTID sets: the executed set a stored position carries, kept up to date per transaction.

MySQL names a transaction ``uuid:n`` (or, from 8.3, ``uuid:tag:n``); a server's position in
GTID terms is the *set* of every transaction it executed, ``@@GLOBAL.gtid_executed``:
``3e11fa47-...:1-17,4a5b...:1-5:audit:1-3`` — per server uuid, ranges of numbers, untagged
first, then per tag. A replica connecting by auto-position sends that set and is sent every
transaction outside it; so sync stores the whole set, never only its last GTID (``uuid:17``
would ask for 1-16 again).

``GtidSet`` parses that text (MySQL's own, with or without the newlines ``SHOW`` puts after
commas), adds one GTID, and renders it in MySQL's order (uuids sorted, ranges merged), which
``GTID_SUBSET`` and ``auto_position`` accept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_UUID = re.compile(r"^[0-9a-fA-F]{8}(-?[0-9a-fA-F]{4}){3}-?[0-9a-fA-F]{12}$")
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")
_TAG = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]{0,31}$")

Key = tuple[str, str]  # (uuid, tag: "" untagged)


def is_set(text: str) -> bool:
    """Whether ``text`` is a MySQL GTID set (a single GTID is one too); "" is not."""
    try:
        return bool(GtidSet.parse(text).ranges)
    except ValueError:
        return False


@dataclass
class GtidSet:
    """Per (uuid, tag), sorted disjoint ranges ``[first, last]``."""

    ranges: dict[Key, list[list[int]]] = field(default_factory=dict)
    # the rendered text of each uuid's part, and the uuids in order (None: to be made again):
    # a transaction changes one uuid's part, so rendering after each costs one small f-string
    _parts: dict[str, str] = field(default_factory=dict, repr=False, compare=False)
    _order: list[str] | None = field(default=None, repr=False, compare=False)

    @classmethod
    def parse(cls, text: str) -> GtidSet:
        out = cls()
        for part in filter(None, (p.strip() for p in text.replace("\n", "").split(","))):
            uuid, *rest = part.split(":")
            if not _UUID.match(uuid) or not rest:
                raise ValueError(f"not a GTID set: {text!r}")
            uuid, tag = uuid.lower(), ""
            for piece in rest:
                m = _RANGE.match(piece)
                if m is None:
                    if not _TAG.match(piece):
                        raise ValueError(f"not a GTID set: {text!r}")
                    tag = piece.lower()
                    continue
                first = int(m.group(1))
                last = int(m.group(2) or first)
                if first < 1 or last < first:
                    raise ValueError(f"not a GTID set: {text!r}")
                out._add_range((uuid, tag), first, last)
        return out

    def _add_range(self, key: Key, first: int, last: int) -> None:
        if key[0] not in self._parts and not any(u == key[0] for u, _ in self.ranges):
            self._order = None
        self._parts.pop(key[0], None)
        ranges = self.ranges.setdefault(key, [])
        ranges.append([first, last])
        ranges.sort()
        merged: list[list[int]] = []
        for r in ranges:
            if merged and r[0] <= merged[-1][1] + 1:
                merged[-1][1] = max(merged[-1][1], r[1])
            else:
                merged.append(r)
        self.ranges[key] = merged

    def add(self, uuid: str, number: int, tag: str = "") -> None:
        """One transaction more (the common case, the next number of the last range, is
        O(1))."""
        key = (uuid.lower(), tag.lower())
        ranges = self.ranges.get(key)
        if ranges and ranges[-1][1] + 1 == number:
            ranges[-1][1] = number
            self._parts.pop(key[0], None)
        elif not ranges or not self.contains(uuid, number, tag):
            self._add_range(key, number, number)

    @property
    def tagged(self) -> bool:
        """Whether the set holds tagged GTIDs (``uuid:tag:n``), which the binlog library can
        neither read in the log nor ask a server to stream after."""
        return any(tag for _, tag in self.ranges)

    def contains(self, uuid: str, number: int, tag: str = "") -> bool:
        return any(a <= number <= b for a, b in self.ranges.get((uuid.lower(), tag.lower()), ()))

    def _part(self, uuid: str) -> str:
        text = uuid
        for tag in sorted(t for u, t in self.ranges if u == uuid):
            spans = ":".join(f"{a}-{b}" if b > a else f"{a}" for a, b in self.ranges[uuid, tag])
            text += f":{tag}:{spans}" if tag else f":{spans}"
        self._parts[uuid] = text
        return text

    def __str__(self) -> str:
        if self._order is None:
            self._order = sorted({u for u, _ in self.ranges})
        parts = self._parts
        return ",".join(parts.get(u) or self._part(u) for u in self._order)


_last: tuple[str, GtidSet] | None = None


def advance(state: str, gtid: str) -> str:
    """The set ``state`` with the transaction ``gtid`` (``uuid:n`` or ``uuid:tag:n``) added.
    The parsed set is kept between calls, so following a log costs one small render per
    transaction, not a parse."""
    global _last
    current = _last[1] if _last is not None and _last[0] is state else GtidSet.parse(state)
    uuid, *tag, number = gtid.split(":")
    current.add(uuid, int(number), tag[0] if tag else "")
    text = str(current)
    _last = (text, current)
    return text
