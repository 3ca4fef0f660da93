"""Verify, vector sets (``vector_sets:``, plan/vector_sets.py): per row and set, ``VEMB`` and
``VGETATTR`` of the row's element.

A vector set keeps each vector normalized with its length, so ``VEMB`` gives back the floats
MySQL holds only to within float32 rounding of that product: a float counts as different when
it is more than ``TOLERANCE`` of the vector's length away (a change smaller than that is not
seen). Under ``quant: q8`` or ``bin`` the floats are not compared at all (the set keeps
approximations by design): membership and attributes are. Attributes are compared as text,
byte for byte. Each set's size (``VCARD``) is then compared with the elements the rows give,
and extra elements are named (verify/members.py, which lists a set's elements with
``VRANDMEMBER``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from migrator.plan.batch import Batch, Command, Row
from migrator.plan.vector_sets import VectorSets, attributes_of
from migrator.verify import report as vr

TOLERANCE = 1e-6


def close(floats: Sequence[Any], vector: bytes) -> bool:
    """VEMB's reply equals the float32 ``vector`` within TOLERANCE of its length."""
    want = memoryview(vector).cast("f")
    if len(floats) != len(want):
        return False
    got = [float(x) for x in floats]
    limit = TOLERANCE * math.sqrt(sum(x * x for x in want))
    return all(abs(a - b) <= limit for a, b in zip(got, want))


class VectorCheck:
    """The vector-set reads of a batch and their judgement."""

    def __init__(self, structure: VectorSets, checks: Any) -> None:
        self.structure, self.checks = structure, checks

    @classmethod
    def of(cls, checks: Any) -> VectorCheck | None:
        """The check of a RowChecks (verify/rows.py) whose table has vector sets, else None."""
        structure = checks.structures.get("vector")
        return None if structure is None else cls(structure, checks)

    def reads(self, rows: Sequence[Row]) -> tuple[list[Command], list[Command]]:
        """(the reads: VEMB and VGETATTR per element, the VADDs migrate would send)."""
        b = Batch()
        for row in rows:
            self.structure.add(row, b)
        vadds = b.commands
        reads: list[Command] = []
        for c in vadds:
            reads += [(b"VEMB", c[1], c[4]), (b"VGETATTR", c[1], c[4])]
        return reads, vadds

    def check(self, replies: list[Any], vadds: list[Command]) -> None:
        checks = self.checks
        counts, found = checks.expected["vector"], checks.found
        for n, c in enumerate(vadds):
            key, vector, element, attributes = c[1], c[3], c[4], attributes_of(c)
            emb, got = replies[2 * n], replies[2 * n + 1]
            counts[key] = counts.get(key, 0) + 1
            if isinstance(emb, Exception):
                repair = [*checks._retype(key, b"vectorset"), c]
                found(vr.WRONG_TYPE, key, None, "a vector set", str(emb), repair)
            elif emb is None:
                checks._lacks(key)
                found(vr.MISSING_VECTOR, key, element, f"{len(vector) // 4} floats", None, [c])
            elif c[5] == b"NOQUANT" and not close(emb, vector):
                mysql = _shown(memoryview(vector).cast("f"))
                found(vr.WRONG_VECTOR, key, element, mysql, _shown(emb), [c])
            elif (got or b"") != attributes:
                found(vr.WRONG_VECTOR, key, element, attributes, got, [c])


def _shown(floats: Sequence[Any]) -> str:
    head = ", ".join(f"{float(x):.9g}" for x in floats[:4])
    return f"[{head}{', ...' if len(floats) > 4 else ''}] ({len(floats)} floats)"
