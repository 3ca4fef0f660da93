"""Value encoding (docs/values.md) pure parts: FLOAT text, scores, type classification."""

from __future__ import annotations

import struct

import pytest

from migrator.mapping.kinds import Kind, kind_of
from migrator.plan.values import float32_text, score, unix_seconds


@pytest.mark.parametrize(
    ("stored", "text"),
    [
        (1.2345678, b"1.2345678"),
        (0.1, b"0.1"),
        (3.4028234663852886e38, b"3.4028235e38"),
        (1e-7, b"1e-7"),
        (-2.5, b"-2.5"),
        (100.0, b"100"),
        (123456.0, b"123456"),
        (0.000123, b"0.000123"),
        (1e20, b"1e20"),
        (0.0, b"0"),
    ],
)
def test_float32_shortest_text_reads_back(stored: float, text: bytes) -> None:
    as_float32 = struct.unpack("f", struct.pack("f", stored))[0]
    out = float32_text(repr(as_float32).encode())
    assert out == text
    back = struct.unpack("f", struct.pack("f", float(out.replace(b"e", b"e"))))[0]
    assert back == as_float32


def test_scores() -> None:
    assert score(b"1234.50", Kind.DECIMAL) == b"1234.50"
    assert score(b"-7", Kind.INTEGER) == b"-7"
    assert score(b"2011-01-01", Kind.DATE) == b"1293840000"
    assert score(b"2011-01-01 00:00:01.250", Kind.DATETIME) == b"1293840001.25"
    assert score(b"1970-01-01 00:00:00.000", Kind.TIMESTAMP) == b"0"
    assert score(b"0000-00-00 00:00:00", Kind.DATETIME) is None
    assert score(b"abc", Kind.TEXT) is None


def test_unix_seconds_before_1970() -> None:
    assert unix_seconds(b"1969-12-31 23:59:59") == b"-1"
    assert float(unix_seconds(b"1969-12-31 23:59:59.5") or b"") == -0.5


@pytest.mark.parametrize(
    ("data_type", "charset", "kind"),
    [
        ("int", None, Kind.INTEGER), ("bigint", None, Kind.INTEGER), ("bit", None, Kind.BIT),
        ("decimal", None, Kind.DECIMAL), ("float", None, Kind.FLOAT),
        ("double", None, Kind.DOUBLE), ("datetime", None, Kind.DATETIME),
        ("timestamp", None, Kind.TIMESTAMP), ("time", None, Kind.TIME), ("year", None, Kind.YEAR),
        ("varchar", "utf8mb4", Kind.TEXT), ("enum", "utf8mb4", Kind.TEXT),
        ("blob", None, Kind.BINARY), ("varbinary", None, Kind.BINARY),
        ("longtext", "binary", Kind.BINARY), ("json", None, Kind.JSON),
        ("point", None, Kind.GEOMETRY), ("geometry", None, Kind.GEOMETRY),
    ],
)  # fmt: skip
def test_kind_of(data_type: str, charset: str | None, kind: Kind) -> None:
    assert kind_of(data_type, charset) is kind


def test_scorable_kinds() -> None:
    assert Kind.DECIMAL.scorable and Kind.DATE.scorable and Kind.YEAR.scorable
    assert not Kind.TEXT.scorable and not Kind.TIME.scorable and not Kind.BINARY.scorable
