"""The memory of a RedisJSON document (``JSON.SET key $ doc``), for plan/estimate.py.

RedisJSON 2.8 keeps a document as a tree (ijson). ``JSON.DEBUG MEMORY`` of documents built to
isolate each part gave, in bytes (Valkey 8.1 + RedisJSON 2.8, x86-64):

* the root: 8; ``null``, booleans, integers within 16 bits, ``{}`` and ``[]``: nothing more;
* an integer within 32 bits: 4; any other number: 16;
* a string or an object's key: its UTF-8 length;
* an object of n members: 16 + 24 x capacity + 8 x n; an array of n items: 16 + 8 x capacity
  + 8 x n; capacity: the next power of two >= n, at least 4.

``used_memory`` grows by more than that sum (allocations are rounded up to size classes):
``ALLOCATION`` is the ratio measured on 3,000 documents of a table with text, numbers, a
nested object and an array (``tests/test_documents.py``: the estimate within 30%).
"""

from __future__ import annotations

import json
from typing import Any

#: ``used_memory`` growth per byte of ``JSON.DEBUG MEMORY`` (measured: 700 / 519)
ALLOCATION = 1.35


def json_value_size(text: bytes) -> int:
    """The memory RedisJSON gives the document ``text`` (its key not included)."""
    try:
        value = json.loads(text)
    except ValueError:
        return len(text)
    return int((8 + _size(value)) * ALLOCATION)


def _capacity(n: int) -> int:
    return max(4, 1 << (n - 1).bit_length())


def _size(value: Any) -> int:
    if isinstance(value, dict):
        if not value:
            return 0
        n = len(value)
        own = 16 + 24 * _capacity(n) + 8 * n
        return own + sum(len(k.encode()) + _size(v) for k, v in value.items())
    if isinstance(value, list):
        if not value:
            return 0
        n = len(value)
        return 16 + 8 * _capacity(n) + 8 * n + sum(_size(v) for v in value)
    if isinstance(value, str):
        return len(value.encode())
    if isinstance(value, bool) or value is None:
        return 0
    if isinstance(value, int):
        return 0 if -(2**15) <= value < 2**15 else 4 if -(2**31) <= value < 2**31 else 16
    return 16  # a float
