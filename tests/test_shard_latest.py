"""The sort keys of latest lists over shards (source/order.py, used by sync/shard_latest.py and
source/shards.py alike): byte order is the values' order (MySQL's ORDER BY) for
every kind, as migrate and verify order the shards' newest rows (numbers by value, the rest
byte for byte), and a key of several columns compares column by column, so the merge
script's string comparison picks the newest N of the union (live: tests/sync/
test_sync_shards.py); and the candidates' names hash to the list's Redis Cluster slot."""

from __future__ import annotations

from decimal import Decimal
from itertools import product

import pytest
from redis.crc import key_slot

from migrator.mapping.kinds import Kind
from migrator.source.order import order_key, padded
from migrator.sync.shard_latest import candidates_key, hashed, old_candidates_key


@pytest.mark.parametrize(
    ("kind", "texts", "value"),
    [
        (Kind.INTEGER, [b"-9223372036854775808", b"-5", b"-1", b"0", b"7", b"10", b"99",
                        b"18446744073709551615"], int),
        (Kind.BIT, [b"0", b"1", b"9", b"10", b"255", b"18446744073709551615"], int),
        (Kind.DECIMAL, [b"-100.50", b"-9.99", b"-0.01", b"0.00", b"0.10", b"2.00", b"10.00"],
         Decimal),
        (Kind.DOUBLE, [b"-1e300", b"-2.5", b"-1e-300", b"0", b"1e-300", b"0.5", b"3", b"1e300"],
         float),
        (Kind.DATETIME, [b"0000-00-00 00:00:00.000", b"1999-12-31 23:59:59.999",
                         b"2000-01-01 00:00:00.000", b"2026-11-29 13:00:00.500"], bytes),
        (Kind.TEXT, [b"", b"A", b"a", b"a\x00", b"a\x00b", b"ab", b"b"], bytes),
    ],
)  # fmt: skip
def test_byte_order_is_the_values_order(kind: Kind, texts: list[bytes], value: type) -> None:
    if kind.numeric:  # fixed width
        assert len({len(order_key(t, kind)) for t in texts}) == 1
    by_value = sorted(texts, key=lambda t: t if value is bytes else value(t.decode()))
    assert sorted(texts, key=lambda t: order_key(t, kind)) == by_value == texts
    pairs = [(a, b) for a in texts for b in texts]  # (a, b) keys: the first column decides
    joined = sorted(pairs, key=lambda p: order_key(p[0], kind) + order_key(p[1], kind))
    assert joined == sorted(pairs, key=lambda p: (texts.index(p[0]), texts.index(p[1])))


@pytest.mark.parametrize(
    "list_key",
    [b"item:latest", b"{item}:latest", b"item:{t}:latest", b"{t}}", b"a{b", b"{"],
)
def test_the_candidates_hash_to_the_lists_slot(list_key: bytes) -> None:
    """The merge script reads the list and every shard's candidates: one slot on a Cluster."""
    keys = {candidates_key("shop", s, list_key) for s in ("east", "west")}
    assert len(keys) == 2 and all(k.startswith(b"migrator:shop:latest:") for k in keys)
    assert {key_slot(k) for k in keys} == {key_slot(list_key)}, keys
    assert {hashed(k) for k in keys} == {hashed(list_key)}


def test_a_brace_that_keeps_the_candidates_out_of_the_slot_is_found() -> None:
    """``}`` outside a hash tag, or a mapping name with a brace: ``refuse`` says so on a
    Cluster (live: tests/sync/test_sync_shard_faults.py)."""
    for key in (b"a}b", b"a{}b", b"{}x{y}"):  # (an empty tag is none: the whole key)
        assert hashed(candidates_key("shop", "east", key)) != hashed(key) == key
    assert hashed(candidates_key("s{p}", "east", b"item:latest")) != hashed(b"item:latest")
    assert old_candidates_key("shop", "east", b"item:latest") == (
        b"migrator:shop:latest:east:item:latest"
    )


def test_padded_keys_order_as_pad_space_compares() -> None:
    """``padded`` (source/order.py): comparison keys of text under a PAD SPACE collation, as the
    server gives them (units of the space's width), ordered as the collation compares the
    values — the shorter as if padded with spaces, so a unit below the space's after a common
    part (a tab) comes first and trailing spaces do not count — checked against that padding
    over every sequence of up to four units of a tab, the space and a letter (live:
    tests/sync/test_sync_shard_collation.py)."""
    space = b"\x02\x09"
    units = [b"\x02\x01", space, b"\x0e\x33"]  # a tab's, the space's, 'a''s (unicode_ci)
    keys = [b"".join(p) for n in range(5) for p in product(units, repeat=n)]

    def by_padding(a: bytes, b: bytes) -> int:
        width = max(len(a), len(b))
        a, b = a + space * ((width - len(a)) // 2), b + space * ((width - len(b)) // 2)
        return (a > b) - (a < b)

    for a in keys:
        for b in keys:
            got = (padded(a, space) > padded(b, space)) - (padded(a, space) < padded(b, space))
            assert got == by_padding(a, b), (a, b)
    assert padded(b"\x0e\x33" + space * 2, space) == padded(b"\x0e\x33", space)
