"""A deterministic sample of products with embeddings (issue 38), and the exact nearest
neighbours computed from rows read back from MySQL: what the query engine's KNN answers are
compared with (tests/test_search_vectors.py, docs/mapping.md "Vector fields").

``products(n, dim, seed)``: rows ``(id, name, category, in_stock, price, embedding)`` where the
embedding is ``dim`` float32, packed little-endian (the bytes MySQL's VECTOR holds), drawn
around one of a few cluster centres so that neighbours mean something; every 97th product
repeats an earlier one's embedding exactly, so that answers have ties. ``exact(...)``: the
``k`` nearest of the rows that pass a filter, by the query engine's distances: COSINE
``1 - cos``, IP ``1 - a.b``, L2 the *squared* Euclidean distance.
"""

from __future__ import annotations

import math
import operator
import random
import struct
from collections.abc import Callable, Iterable, Sequence
from typing import Any

CATEGORIES = ("book", "garden", "kitchen", "toys", "tools")
PRODUCT_COLUMNS = "id, name, category, in_stock, price, embedding"


def pack(values: Sequence[float]) -> bytes:
    return struct.pack(f"<{len(values)}f", *values)


def unpack(raw: bytes) -> tuple[float, ...]:
    return struct.unpack(f"<{len(raw) // 4}f", raw)


def products(n: int, dim: int, seed: int = 38, start: int = 1) -> list[tuple[Any, ...]]:
    rnd = random.Random(seed)
    centres = [[rnd.gauss(0, 1) for _ in range(dim)] for _ in range(8)]
    out: list[tuple[Any, ...]] = []
    for i in range(start, start + n):
        if out and i % 97 == 0:
            vector = out[rnd.randrange(len(out))][5]  # the same embedding: a tie
        else:
            c = rnd.choice(centres)
            vector = pack([x + rnd.gauss(0, 0.6) for x in c])
        price = round(rnd.uniform(1, 120), 2)
        out.append((
            i, f"product {i}", rnd.choice(CATEGORIES), rnd.choice(("yes", "no")), price, vector,
        ))  # fmt: skip
    return out


def distance(metric: str) -> Callable[[Sequence[float], Sequence[float]], float]:
    """The query engine's distance ``metric`` between two vectors, in 64-bit floats."""

    def dot(a: Sequence[float], b: Sequence[float]) -> float:
        return sum(map(operator.mul, a, b))

    if metric == "L2":
        return lambda a, b: sum(d * d for d in map(operator.sub, a, b))
    if metric == "IP":
        return lambda a, b: 1 - dot(a, b)
    return lambda a, b: 1 - dot(a, b) / math.sqrt(dot(a, a) * dot(b, b))


def exact(
    rows: Iterable[tuple[int, bytes]], query: bytes, k: int, metric: str
) -> list[tuple[float, int]]:
    """The ``k`` nearest (distance, id) of ``rows`` ((id, packed float32)), nearest first."""
    d = distance(metric)
    q = unpack(query)
    return sorted((d(q, unpack(v)), i) for i, v in rows)[:k]


def same_answer(
    got: list[tuple[float, int]],
    want: list[tuple[float, int]],
    every: dict[int, float],
    tolerance: float = 1e-4,
) -> str | None:
    """Why the engine's ``got`` (distance, id) is not the exact ``want``, or None: as many
    answers, each id's distance the exact one (``every``: id -> exact distance), and the
    distances those of the exact k nearest -- so that among ties (equal within the
    tolerance) any of the tied ids may be returned."""
    if len(got) != len(want):
        return f"{len(got)} answers, exact: {len(want)}"
    for dist, i in got:
        if i not in every:
            return f"id {i} is not among the rows that pass the filter"
        if abs(every[i] - dist) > tolerance:
            return f"id {i}: distance {dist}, exact {every[i]}"
    for (a, _), (b, _) in zip(sorted(got), want, strict=True):
        if abs(a - b) > tolerance:
            return f"distances {[g for g, _ in sorted(got)]} != exact {[w for w, _ in want]}"
    return None
