"""sync/shard_latest.py's sort keys: byte order is the values' order (MySQL's ORDER BY) for
every kind a latest list over shards may be ordered by, so the merge script's string
comparison picks the newest N of the union (the live test: tests/sync/test_sync_shards.py)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from migrator.mapping.kinds import Kind
from migrator.mapping.schema import Column
from migrator.sync.shard_latest import _encode


def _column(kind: Kind) -> Column:
    return Column("c", kind, True, kind.value)


@pytest.mark.parametrize(
    ("kind", "texts", "value"),
    [
        (Kind.INTEGER, [b"-9223372036854775808", b"-5", b"-1", b"0", b"7", b"10", b"99",
                        b"18446744073709551615"], int),
        (Kind.DECIMAL, [b"-100.50", b"-9.99", b"-0.01", b"0.00", b"0.10", b"2.00", b"10.00"],
         Decimal),
        (Kind.DOUBLE, [b"-1e300", b"-2.5", b"-1e-300", b"0", b"1e-300", b"0.5", b"3", b"1e300"],
         float),
        (Kind.DATETIME, [b"0000-00-00 00:00:00.000", b"1999-12-31 23:59:59.999",
                         b"2000-01-01 00:00:00.000", b"2026-11-29 13:00:00.500"], str),
    ],
)  # fmt: skip
def test_byte_order_is_the_values_order(kind: Kind, texts: list[bytes], value: type) -> None:
    column = _column(kind)
    encoded = [_encode(t, column) for t in texts]
    assert len({len(e) for e in encoded}) == 1  # fixed width: a key of several columns joins
    by_value = sorted(texts, key=lambda t: value(t.decode()))
    assert sorted(texts, key=lambda t: _encode(t, column)) == by_value == texts
