"""docs/values.md on a real server: each value of every type lands as MySQL prints it."""

from __future__ import annotations

import pytest
import redis

from migrator.commands import migrate
from migrator.mapping.loader import parse_mapping

# outcome decided by migrate's worker count: again in CI with MIGRATOR_WORKERS=4
pytestmark = pytest.mark.workers

TYPES = """
CREATE TABLE v (
  id INT PRIMARY KEY,
  i BIGINT UNSIGNED, b BIT(10), d DECIMAL(10,2), f FLOAT, g DOUBLE,
  dt DATETIME, dt6 DATETIME(6), ts TIMESTAMP(3) NULL, da DATE, t TIME, t3 TIME(3), y YEAR,
  c CHAR(10), s VARCHAR(40), e ENUM('small','large'), st SET('a','b','c'),
  bin VARBINARY(16), bl BLOB, j JSON, geo GEOMETRY NULL
) CHARACTER SET utf8mb4;
SET SESSION sql_mode = '';
SET SESSION time_zone = '+05:00';
INSERT INTO v (id, i, b, d, f, g, dt, dt6, ts, da, t, t3, y, c, s, e, st, bin, bl, j, geo) VALUES
 (1, 18446744073709551615, b'1111111111', 1234.5, 1.2345678, 0.1,
  '2020-01-02 03:04:05', '2020-01-02 03:04:05.123456', '2020-06-01 12:00:00.5', '2020-01-02',
  '-12:30:00', '838:59:58.999', 2021, 'pad  ', 'héllo wörld 漢字', 'large', 'a,c',
  UNHEX('00FF0A0D'), UNHEX('89504E470D0A1A0A00'), '{"k": [1, 2.5, "x"]}',
  ST_GeomFromText('POINT(1 2)')),
 (2, 0, b'0', -0.5, -2.5, 1e300,
  '0000-00-00 00:00:00', '1000-01-01 00:00:00.000001', '1970-01-01 05:00:01', '0000-00-00',
  '100:00:00', '-00:00:01.500', 1901, '', '', 'small', '',
  '', '', '[]', ST_GeomFromText('LINESTRING(0 0,1 1.5)')),
 (3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
  NULL, NULL, NULL, NULL, NULL);
"""

EXPECTED = {
    1: {
        b"i": b"18446744073709551615",
        b"b": b"1023",
        b"d": b"1234.50",
        b"f": b"1.2345678",
        b"g": b"0.1",
        b"dt": b"2020-01-02 03:04:05",
        b"dt6": b"2020-01-02 03:04:05.123456",
        b"ts": b"2020-06-01 07:00:00.500",
        b"da": b"2020-01-02",
        b"t": b"-12:30:00",
        b"t3": b"838:59:58.999",
        b"y": b"2021",
        b"c": b"pad",
        b"s": "héllo wörld 漢字".encode(),
        b"e": b"large",
        b"st": b"a,c",
        b"bin": b"\x00\xff\n\r",
        b"bl": b"\x89PNG\r\n\x1a\n\x00",
        b"j": b'{"k": [1, 2.5, "x"]}',
        b"geo": b"POINT(1 2)",
    },
    2: {
        b"i": b"0",
        b"b": b"0",
        b"d": b"-0.50",
        b"f": b"-2.5",
        b"g": b"1e300",
        b"dt": b"0000-00-00 00:00:00",
        b"dt6": b"1000-01-01 00:00:00.000001",
        b"ts": b"1970-01-01 00:00:01.000",
        b"da": b"0000-00-00",
        b"t": b"100:00:00",
        b"t3": b"-00:00:01.500",
        b"y": b"1901",
        b"c": b"",
        b"s": b"",
        b"e": b"small",
        b"st": b"",
        b"bin": b"",
        b"bl": b"",
        b"j": b"[]",
        b"geo": b"LINESTRING(0 0,1 1.5)",
    },
    3: {b"id": b"3"},  # every column NULL: the row is kept, keyed by its primary key
}


@pytest.fixture
def loaded(mysql_db, redis_url: str, redis_client: redis.Redis) -> redis.Redis:  # type: ignore[no-untyped-def]
    mysql_db.run(TYPES)
    mapping = parse_mapping("version: 1\ntables:\n  v:\n    counter: false\n")
    report = migrate(mapping, source=mysql_db.url, target=redis_url)
    assert report.rows == 3 and report.exit_code == 0
    return redis_client


@pytest.mark.parametrize("row", [1, 2, 3])
def test_row_is_what_mysql_prints(loaded: redis.Redis, row: int) -> None:
    assert loaded.hgetall(f"v:{row}") == EXPECTED[row]


def test_time_sub_second_as_declared(loaded: redis.Redis) -> None:
    # TIME(3) keeps three fraction digits; TIME keeps none
    assert loaded.hget("v:1", "t3") == b"838:59:58.999"
    assert loaded.hget("v:1", "t") == b"-12:30:00"
