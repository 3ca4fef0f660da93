"""Verify of JSON documents (``as: json`` / ``as: json-string``): each row's document as
migrate writes it (plan/documents.py) against what Redis holds, read with ``JSON.GET`` or
``GET``. Equal bytes are equal; otherwise both are parsed and compared as JSON values, numbers
exactly (``1.50`` is ``1.5``; RedisJSON re-serialises what it stores, in its own key order and
spacing), types strictly (``true`` is not ``1``, ``"1"`` is not ``1``); a vector (an array of
numbers in a field plan/structures.py's ``vector_fields`` names) as its float32 bytes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from migrator.plan.documents import differing, parsed
from migrator.plan.layout import TableLayout
from migrator.plan.structures import vector_fields
from migrator.verify import report as vr

Command = tuple[bytes, ...]
Found = Callable[..., None]


def reads(cmds: Sequence[Command]) -> list[Command]:
    """The read of each document ``cmds`` (migrate's writes) write."""
    return [(b"JSON.GET", c[1]) if c[0] == b"JSON.SET" else (b"GET", c[1]) for c in cmds]


def vectors(layout: TableLayout) -> frozenset[str]:
    """The names of the fields ``compare`` reads as vectors in the documents of ``layout``'s
    table (plan/structures.py)."""
    return vector_fields(layout)


def compare(
    cmds: Sequence[Command],
    replies: Sequence[Any],
    found: Found,
    vectors: frozenset[str] = frozenset(),
) -> int:
    """Report each document that is missing, of another type or different (``found``, with
    the write that repairs it); the number of documents present. ``vectors``: the names of
    fields holding vectors (arrays of numbers compared as float32 bytes)."""
    present = 0
    for cmd, got in zip(cmds, replies):
        key, want = cmd[1], cmd[-1]
        if isinstance(got, Exception):
            what = "a JSON document" if cmd[0] == b"JSON.SET" else "a string"
            found(vr.WRONG_TYPE, key, None, what, str(got), [(b"DEL", key), cmd])
            continue
        if got is None:
            found(vr.MISSING_ROW, key, repair=[cmd])
            continue
        present += 1
        if got == want:
            continue
        try:
            fields = differing(parsed(want), parsed(got), vectors)
        except ValueError:
            fields = ["(not JSON)"]
        if fields:
            found(vr.DIFFERENT_VALUE, key, ", ".join(fields), want, got, [cmd])
    return present
