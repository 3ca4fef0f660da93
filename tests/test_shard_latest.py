"""The sort keys of latest lists over shards (source/order.py, used by sync/shard_latest.py and
source/shards.py alike): byte order is the values' order (MySQL's ORDER BY) for
every kind, as migrate and verify order the shards' newest rows (numbers by value, the rest
byte for byte), and a key of several columns compares column by column, so the merge
script's string comparison picks the newest N of the union (live: tests/sync/
test_sync_shards.py)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from migrator.mapping.kinds import Kind
from migrator.source.order import order_key


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
