"""How much memory a load will take in Redis, computed from the commands it sends.

The model follows Redis 7.0 with jemalloc on 64-bit Linux (what ``used_memory`` counts:
the usable size of every allocation), for a target database that starts empty:

* **Every key** costs a main-dict entry (``dictEntry``, 24 bytes -> 32), the key as an sds
  string (header 1/3/5/9 bytes for lengths <32/<256/<64K/more, plus the bytes and a NUL),
  the value's ``robj`` (16 bytes) and the value itself; no expires entry (nothing has a TTL).
  The main dict's bucket array adds 8 bytes per slot, slots = the next power of two >= keys.
* **Strings**: a canonical integer is a shared object below 10,000 (no value memory) and is
  stored in the ``robj`` otherwise; text up to 44 bytes is ``embstr`` (robj and sds in one
  allocation of 20 + length); longer text is a robj plus an sds.
* **Hashes** stay a listpack while they have <= ``hash-max-listpack-entries`` (512) fields
  and no field or value longer than ``hash-max-listpack-value`` (64) bytes; otherwise a
  hashtable: dict (56 -> 64), bucket array, per field a dictEntry and two sds strings.
* **Sets** of integers up to ``set-max-intset-entries`` (512) are an intset (8 + n x 2/4/8
  bytes); other sets are hashtables (dict, buckets, dictEntry + sds per member). Redis 7.2+
  also keeps small non-integer sets as listpacks: set ``Limits.set_max_listpack_entries``.
* **Sorted sets** up to ``zset-max-listpack-entries`` (128) members of <= 64 bytes are a
  listpack of member/score pairs; larger ones a skiplist (header node of 32 levels, a node
  of 24 + 16 x level bytes per member with the expected level mix of p = 1/4, a dictEntry and
  an sds per member) plus a dict.
* **Vector sets** (Redis 8, ``VADD``): per element about 690 bytes of HNSW node and links
  (``M`` 16) and 16 more per link pair above that, the element and its attributes as sds
  strings, and the vector: 4 bytes a float unquantized, 1 (and 8 more) under Q8, a bit under
  BIN (rounded to 8 bytes). Measured with ``MEMORY USAGE`` on Redis 8.0.2 (dimensions 4-768,
  100 and 2,000 elements: within 2%).
* **Lists** (latest) are a quicklist (48) with one node (48) per 8 KB listpack.
* **Listpack** sizes are exact: 6 header + 1 end byte, and per entry its encoding (integers
  as 1-9 bytes by range, strings as 1/2/5 + length) plus its back-length (1-5 bytes).
* Every allocation is rounded up to its jemalloc size class (16-byte steps up to 128, then
  four classes per power of two).

Other servers (``target_limits``, from ``INFO server``): Redis 7.2+ and 8 keep small sets of
text as listpacks (``Limits.set_max_listpack_entries`` 128); Valkey 8 (which reports
``redis_version:7.2.4``) does too, and keeps each key inside its value's object, 16 bytes less
per key (``Limits.key_overhead``).

Calibrated against the real ``used_memory`` growth after ``migrate`` (tests/test_dryrun.py
asserts ±30% on Sakila and on the employees sample, on each target of the test matrix). Not
modelled: a hashtable caught in the middle of an incremental rehash (briefly both bucket
arrays), allocator fragmentation (``used_memory_rss``), keys that already exist in the target,
and Redis Cluster's slot map.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from migrator.plan.estimate_json import json_value_size

Command = tuple[bytes, ...]

DICT_ENTRY = 32  # 24-byte dictEntry, jemalloc class 32
ROBJ = 16
DICT = 64  # struct dict (56 bytes) in class 64
SHARED_INTEGERS = 10_000
EMBSTR_MAX = 44
INTSET_HEADER = 8
LP_HEADER = 7  # 4 bytes total size + 2 bytes count + 1 end byte
QUICKLIST = 48
QUICKLIST_NODE = 48
QUICKLIST_NODE_BYTES = 8192  # list-max-listpack-size -2
ZSKIPLIST = 32
ZSKIPLIST_HEADER = 640  # node with 32 levels: 24 + 32 * 16 = 536 -> 640
ZSET = 16
_INT = re.compile(rb"-?[1-9][0-9]{0,19}|0")
_INT64 = (-(2**63), 2**63 - 1)


@dataclass(frozen=True)
class Limits:
    """Encoding thresholds of the target (Redis 7 defaults; ``CONFIG GET *max*`` shows them)
    and its bytes per key beside Redis 7.0's (``target_limits`` picks them from INFO)."""

    hash_max_listpack_entries: int = 512
    hash_max_listpack_value: int = 64
    set_max_intset_entries: int = 512
    set_max_listpack_entries: int = 0  # Redis 7.0 has no listpack sets; 7.2+: 128
    set_max_listpack_value: int = 64
    zset_max_listpack_entries: int = 128
    zset_max_listpack_value: int = 64
    key_overhead: int = 0  # Valkey 8 keeps the key inside the value's object: -16


#: Valkey 8's key embedded in its robj: no sds allocation of its own (measured: 16 B less per
#: key of every type than Redis 7.0 and 8.0)
VALKEY8_KEY_SAVING = 16


def _version(text: object) -> tuple[int, ...]:
    """``'7.2.4'`` -> (7, 2, 4); anything unreadable -> ()."""
    parts = []
    for part in str(text or "").split("."):
        if not part.isdigit():
            break
        parts.append(int(part))
    return tuple(parts)


def target_limits(server: dict[str, Any]) -> Limits:
    """The layout of the server whose ``INFO server`` this is. Redis 7.2+ keeps small sets of
    text as listpacks (128 members); Valkey reports ``redis_version:7.2.4`` (the Redis it is
    compatible with) beside ``server_name:valkey`` and its own ``valkey_version``, and from 8.0
    stores each key inside its value's object. Nothing readable (INFO refused): Redis 7.0."""
    name = str(server.get("server_name") or "redis").lower()
    compatible = _version(server.get("redis_version"))
    listpack_sets = 128 if compatible >= (7, 2) else 0
    overhead = 0
    if name == "valkey" and _version(server.get("valkey_version")) >= (8,):
        overhead = -VALKEY8_KEY_SAVING
    return Limits(set_max_listpack_entries=listpack_sets, key_overhead=overhead)


def jemalloc(n: int) -> int:
    """The jemalloc size class an allocation of ``n`` bytes lands in (x86-64, 16-byte quantum)."""
    if n <= 8:
        return 8
    if n <= 128:
        return (n + 15) & ~15
    step = 1 << ((n - 1).bit_length() - 3)
    return (n + step - 1) // step * step


def sds(length: int) -> int:
    """An sds string of ``length`` bytes: header + bytes + NUL, in its size class."""
    header = 1 if length < 32 else 3 if length < 256 else 5 if length < 65536 else 9
    return jemalloc(header + length + 1)


def as_int(value: bytes) -> int | None:
    """The integer Redis would store ``value`` as (strict canonical form, 64-bit), else None."""
    if len(value) > 20 or not _INT.fullmatch(value):
        return None
    n = int(value)
    return n if _INT64[0] <= n <= _INT64[1] else None


def lp_entry(value: bytes) -> int:
    """Bytes of one listpack entry: encoding + data + back-length."""
    n = as_int(value)
    if n is not None:
        if 0 <= n <= 127:
            size = 1
        elif -4096 <= n <= 4095:
            size = 2
        elif -32768 <= n <= 32767:
            size = 3
        elif -8388608 <= n <= 8388607:
            size = 4
        elif -(2**31) <= n < 2**31:
            size = 5
        else:
            size = 9
    else:
        length = len(value)
        size = length + (1 if length < 64 else 2 if length < 4096 else 5)
    back = 1 if size <= 127 else 2 if size < 16383 else 3 if size < 2097151 else 4
    return size + back


def key_cost(key: bytes) -> int:
    """The main-dict entry and the key's own sds (the bucket slot is counted globally)."""
    return DICT_ENTRY + sds(len(key))


def string_value(value: bytes) -> int:
    """The robj and payload of a STRING value."""
    n = as_int(value)
    if n is not None:
        return 0 if 0 <= n < SHARED_INTEGERS else ROBJ
    if len(value) <= EMBSTR_MAX:
        return jemalloc(ROBJ + 3 + len(value) + 1)
    return ROBJ + sds(len(value))


def buckets(n: int) -> int:
    """The bucket array of a dict holding ``n`` entries (size: next power of two, at least 4)."""
    size = 4
    while size < n:
        size <<= 1
    return jemalloc(8 * size)


def keyspace(keys: int) -> int:
    """The main dict's bucket array for ``keys`` keys (0 when there are none)."""
    return buckets(keys) if keys else 0


def listpack(entry_bytes: int) -> int:
    return jemalloc(LP_HEADER + entry_bytes)


def intset(n: int, width: int) -> int:
    return jemalloc(INTSET_HEADER + n * width)


def int_width(low: int, high: int) -> int:
    if low >= -(2**15) and high < 2**15:
        return 2
    if low >= -(2**31) and high < 2**31:
        return 4
    return 8


# expected bytes of a skiplist node: level L has probability 3/4 * (1/4)^(L-1)
SKIPLIST_NODE = sum(0.75 * 0.25 ** (lv - 1) * jemalloc(24 + 16 * lv) for lv in range(1, 33))


def vector_element(args: Sequence[bytes]) -> int:
    """Bytes of one vector-set element, from ``VADD key``'s arguments (``FP32 vector element
    options... SETATTR attributes``, plan/vector_sets.py)."""
    vector, element, rest = args[1], args[2], [a.upper() for a in args[3:]]
    floats = len(vector) // 4
    if b"Q8" in rest:
        stored = floats + 8
    elif b"BIN" in rest:
        stored = -(-floats // 64) * 8
    else:
        stored = 4 * floats
    m = int(rest[rest.index(b"M") + 1]) if b"M" in rest else 16
    attributes = args[-1] if b"SETATTR" in rest else b""
    return 690 + 17 * (m - 16) + sds(len(element)) + sds(len(attributes)) + stored


class Aggregate:
    """One hash, set or sorted set that is built up over many commands."""

    __slots__ = ("high", "ht", "ints", "kind", "longest", "low", "lp", "n")

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.n = 0
        self.longest = 0
        self.lp = 0  # listpack entry bytes
        self.ht = 0.0  # hashtable / skiplist per-element bytes
        self.low = 0
        self.high = 0
        self.ints = True  # every member an integer (intset candidate)

    def add_pairs(self, args: Sequence[bytes]) -> None:
        """HSET field value ... / ZADD score member ... (for ZADD the member is second)."""
        zset = self.kind == "zset"
        for i in range(0, len(args) - 1, 2):
            a, b = args[i], args[i + 1]
            self.n += 1
            member = b if zset else a
            self.longest = max(self.longest, len(member) if zset else max(len(a), len(b)))
            self.lp += lp_entry(a) + lp_entry(b)
            if zset:
                self.ht += DICT_ENTRY + sds(len(b)) + SKIPLIST_NODE
            else:
                self.ht += DICT_ENTRY + sds(len(a)) + sds(len(b))

    def add_members(self, members: Sequence[bytes]) -> None:
        for m in members:
            self.n += 1
            self.longest = max(self.longest, len(m))
            self.lp += lp_entry(m)
            self.ht += DICT_ENTRY + sds(len(m))
            if self.ints:
                v = as_int(m)
                if v is None:
                    self.ints = False
                elif self.n == 1:
                    self.low = self.high = v
                else:
                    self.low, self.high = min(self.low, v), max(self.high, v)

    def size(self, limits: Limits) -> int:
        """Bytes of the value (robj included), by the encoding Redis would pick."""
        if self.kind == "hash":
            small = self.n <= limits.hash_max_listpack_entries
            if small and self.longest <= limits.hash_max_listpack_value:
                return ROBJ + listpack(self.lp)
            return ROBJ + DICT + buckets(self.n) + round(self.ht)
        if self.kind == "set":
            if self.ints and self.n <= limits.set_max_intset_entries:
                return ROBJ + intset(self.n, int_width(self.low, self.high))
            small = self.n <= limits.set_max_listpack_entries
            if small and self.longest <= limits.set_max_listpack_value:
                return ROBJ + listpack(self.lp)
            return ROBJ + DICT + buckets(self.n) + round(self.ht)
        small = self.n <= limits.zset_max_listpack_entries
        if small and self.longest <= limits.zset_max_listpack_value:
            return ROBJ + listpack(self.lp)
        skiplist = ZSET + ZSKIPLIST + ZSKIPLIST_HEADER
        return ROBJ + skiplist + DICT + buckets(self.n) + round(self.ht)


class MemoryModel:
    """Estimated memory of the keys one structure writes, fed with its commands.

    ``once=True`` means each command writes a whole key that no other command touches (row
    hashes, strings, rebuilt lists): it is sized at once and forgotten, so memory stays flat.
    Otherwise the key is accumulated (unique hashes, index and tag sets, sorted sets): memory
    grows with the number of distinct keys, not rows.
    """

    def __init__(self, limits: Limits | None = None) -> None:
        self.limits = limits or Limits()
        self.keys = 0
        self.fixed = 0
        self.aggregates: dict[bytes, Aggregate] = {}
        self.vector_sets: set[bytes] = set()

    def add(self, command: Command, *, once: bool) -> bool:
        """Account for one write command; True when it creates a key not seen before."""
        name, key, args = command[0].upper(), command[1], command[2:]
        kind = {b"HSET": "hash", b"SADD": "set", b"ZADD": "zset"}.get(name)
        if kind is not None:
            agg = Aggregate(kind) if once else self.aggregates.get(key)
            new = agg is None or once
            if agg is None:
                agg = self.aggregates[key] = Aggregate(kind)
            if kind == "set":
                agg.add_members(args)
            else:
                agg.add_pairs(args)
            if once:
                self.fixed += key_cost(key) + agg.size(self.limits)
            elif new:
                self.fixed += key_cost(key)
        elif name == b"SET":
            self.fixed += key_cost(key) + string_value(args[0])
            new = True
        elif name == b"JSON.SET":  # a RedisJSON document (plan/estimate_json.py)
            self.fixed += key_cost(key) + ROBJ + json_value_size(args[-1])
            new = True
        elif name == b"VADD":
            new = key not in self.vector_sets
            if new:
                self.vector_sets.add(key)
                self.fixed += key_cost(key) + ROBJ
            self.fixed += vector_element(args)
        elif name == b"RPUSH":
            total = sum(lp_entry(a) for a in args)
            nodes = max(1, -(-(LP_HEADER + total) // QUICKLIST_NODE_BYTES))
            per_node = listpack(-(-total // nodes))
            self.fixed += key_cost(key) + ROBJ + QUICKLIST + nodes * (QUICKLIST_NODE + per_node)
            new = True
        else:  # MULTI, DEL, EXEC: no memory of their own
            return False
        self.keys += new
        return new

    @property
    def bytes(self) -> int:
        """Bytes of every key so far, without the main dict's bucket array (see keyspace)."""
        aggregates = sum(a.size(self.limits) for a in self.aggregates.values())
        return self.fixed + self.keys * self.limits.key_overhead + aggregates
