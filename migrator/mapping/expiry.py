"""A table's expiry (``expire:``): how long each row's own keys live in Redis.

Two rules (docs/mapping.md#expire):

* a fixed time-to-live: ``expire: 1h`` (or ``expire: {ttl: 1h}``): every write of the row
  (migrate's load, each change ``sync`` applies) sets its keys to expire that long after it;
* a moment taken from a column: ``expire: {column: ends_at, offset: 1d}``: a DATE, DATETIME or
  TIMESTAMP (UTC), or a number of seconds since the epoch (``unit: ms`` for milliseconds),
  plus ``offset`` (may be negative). A NULL there: the row never expires.

Durations are a number of seconds or a number with a unit: ``ms``, ``s``, ``m``, ``h``, ``d``
(``90s``, ``1.5h``, ``-10m`` for an offset). Parsed here; the column's type is checked by
``check`` against the schema (validate).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from migrator.mapping.schema import TableSchema

UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
EPOCH_UNITS = ("s", "ms")
_DURATION = re.compile(r"\s*([+-]?\d+(?:\.\d+)?)\s*([a-z]*)\s*$")


class ExpirySyntaxError(ValueError):
    """An ``expire:`` the loader refuses: the message names the cause and the fix."""


@dataclass(frozen=True)
class Expiry:
    """``ttl`` seconds after each write, or the moment in ``column`` (+ ``offset`` seconds;
    a number column counts ``unit`` since the epoch)."""

    ttl: float | None = None
    column: str | None = None
    offset: float = 0.0
    unit: str = "s"

    @property
    def text(self) -> str:
        """One line for people and the mapping's fingerprint."""
        if self.ttl is not None:
            return f"ttl {_seconds(self.ttl)}"
        extra = f" {'+' if self.offset >= 0 else '-'} {_seconds(abs(self.offset))}"
        unit = f" (unit {self.unit})" if self.unit != "s" else ""  # a DATETIME has none
        return f"{self.column}{extra if self.offset else ''}{unit}"

    @property
    def columns(self) -> tuple[str, ...]:
        return () if self.column is None else (self.column,)


def _seconds(value: float) -> str:
    return f"{value:g}s"


def duration(value: Any, what: str, negative: bool = False) -> float:
    """Seconds from ``90``, ``"90s"``, ``"1.5h"``; refuses an unknown unit, and a value
    below zero unless ``negative`` (an offset)."""
    if isinstance(value, bool):
        raise ExpirySyntaxError(f"{what} must be a duration such as 3600 or 1h, not {value}")
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str) and (m := _DURATION.match(value)):
        unit = m.group(2) or "s"
        if unit not in UNITS:
            raise ExpirySyntaxError(
                f"{what}: unknown unit {unit!r} in {value!r}; use one of "
                f"{', '.join(UNITS)} (e.g. 30m)"
            )
        seconds = float(m.group(1)) * UNITS[unit]
    else:
        raise ExpirySyntaxError(f"{what} must be a duration such as 3600 or 1h, not {value!r}")
    if seconds < 0 and not negative:
        raise ExpirySyntaxError(f"{what} must not be negative (got {value!r})")
    return seconds


def parse(value: Any) -> Expiry:
    """``expire:``'s value -> an Expiry (ExpirySyntaxError names what is wrong)."""
    if not isinstance(value, dict):
        value = {"ttl": value}
    unknown = sorted(set(value) - {"ttl", "column", "offset", "unit"})
    if unknown:
        raise ExpirySyntaxError(
            f"unknown key {unknown[0]!r} in expire:; it takes ttl, or column with offset and unit"
        )
    if ("ttl" in value) == ("column" in value):
        raise ExpirySyntaxError("expire: takes either ttl (a duration) or column, not both")
    if "ttl" in value:
        if "offset" in value or "unit" in value:
            raise ExpirySyntaxError("offset and unit go with column, not with ttl")
        ttl = duration(value["ttl"], "expire.ttl")
        if ttl <= 0:
            raise ExpirySyntaxError("expire.ttl must be above zero (a row that lives 0 s is none)")
        return Expiry(ttl=ttl)
    column = value["column"]
    if not isinstance(column, str) or not column:
        raise ExpirySyntaxError("expire.column names a column of the table")
    unit = value.get("unit", "s")
    if unit not in EPOCH_UNITS:
        raise ExpirySyntaxError(f"expire.unit is s or ms (the epoch's unit), not {unit!r}")
    offset = duration(value.get("offset", 0), "expire.offset", negative=True)
    return Expiry(column=column, offset=offset, unit=unit)


def check(e: Expiry, ts: TableSchema, latest: bool = False) -> list[tuple[str, str]]:
    """(message, hint) for each problem ``validate`` reports; ``latest``: the table has
    latest lists (rebuilt from MySQL, which cannot tell which rows a fixed ttl ended)."""
    if e.column is None:
        if latest:
            return [
                (
                    "expire: a fixed ttl with latest: lists: a list is rebuilt from MySQL's "
                    "newest rows, and MySQL cannot tell whose ttl has passed",
                    "take the moment from a column (expire: {column: ...}), or drop latest:",
                )
            ]
        return []
    col = ts.column(e.column)
    if not (col.kind.temporal or col.kind.numeric):
        return [
            (
                f"expire.column {e.column} is {col.kind.value}: an expiry moment is a DATE, "
                "DATETIME, TIMESTAMP or a number of seconds (unit: ms for milliseconds) "
                "since the epoch",
                "name a temporal or numeric column, or use a fixed ttl",
            )
        ]
    return []
