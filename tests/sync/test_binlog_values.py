"""The binary log's values, encoded, are the very bytes the snapshot writes (docs/values.md): the
same rows read both ways from a private MariaDB with the row binary log."""

from __future__ import annotations

import pytest

from migrator.commands.session import opened
from migrator.mapping.loader import parse_mapping
from migrator.plan.planner import TablePlan
from migrator.plan.values import converter
from migrator.source.binlog.reader import BinlogPosition, BinlogReader, TableColumns, Transaction
from migrator.source.binlog.values import double_text
from migrator.source.selects import Selector
from tests.sync.helpers import master_position, wkt_of
from tests.test_values_mysql import TYPES

MORE = """
SET SESSION sql_mode = '';
SET SESSION time_zone = '+00:00';
INSERT INTO v (id, d, f, g, dt, dt6, ts, da, t, t3, y, c, st, bin, j) VALUES
 (4, 99999999.99, 3.4028235e38, 1e-5, '2020-00-15 10:11:12', '2021-02-00 00:00:00.5',
  '0000-00-00 00:00:00', '2020-01-00', '-838:59:59', '-00:00:00.001', 0, 'x', 'c,b,a',
  'a', '{"a":1}'),
 (5, -99999999.99, -1e-7, 1234567890123456.7, '9999-12-31 23:59:59', '1000-01-01 00:00:00',
  '2038-01-19 03:14:07.999', '9999-12-31', '00:00:00', '23:59:59.5', 2155, 'é', 'b',
  'ab', '{"k": "é"}'),
 (6, 0, 0, -0.000000000000001, NULL, NULL, NULL, '1000-01-01', '-00:00:01', '00:00:00.000',
  1999, NULL, 'a,b', NULL, NULL);
CREATE TABLE w (id INT PRIMARY KEY, b4 BINARY(4), ch CHAR(5), e ENUM('x','y'),
  lat VARCHAR(10) CHARACTER SET latin1, tb TINYINT(1), mi MEDIUMINT, neg BIGINT,
  dec0 DECIMAL(5,0), dsm DECIMAL(30,20), pt POINT NULL, poly POLYGON NULL,
  u1 TINYINT UNSIGNED, u2 SMALLINT UNSIGNED, u4 INT UNSIGNED, long_s VARCHAR(300), tx TEXT);
INSERT INTO w VALUES
 (1, 'ab', 'q  ', '', 'café', 1, -8388608, -9223372036854775808, 12345,
  -1234567890.12345678901234567890, ST_GeomFromText('POINT(-1.5 2.25)'),
  ST_GeomFromText('POLYGON((0 0,10 0,10 10,0 10,0 0))'), 255, 65535, 4294967295,
  CONCAT(REPEAT('x', 298), 'é'), REPEAT('ab', 400)),
 (2, UNHEX('61620000'), '', 'y', NULL, 0, 8388607, 9223372036854775807, -1,
  0.00000000000000000001, ST_GeomFromText('POINT(0.1 1e20)'), NULL, 0, 0, 0, '', '');
"""


# every row updated (so both images of an UPDATE are decoded), then back
UPDATES = """
UPDATE v SET id = id + 100; UPDATE v SET id = id - 100;
UPDATE w SET id = id + 100; UPDATE w SET id = id - 100;
"""


def _snapshot(url: str, mapping_text: str) -> dict[str, dict[bytes, tuple[bytes | None, ...]]]:
    mapping = parse_mapping(mapping_text)
    out: dict[str, dict[bytes, tuple[bytes | None, ...]]] = {}
    with opened(mapping, url) as (src, resolved):
        for r in resolved:
            plan = TablePlan(r)
            cols = tuple(r.schema.column(n) for n in plan.select)
            sel = Selector(plan.select, cols, tuple(converter(c.kind) for c in cols))
            rows = [row for batch in src.batches(r.name, sel, r.primary_key, 100) for row in batch]
            out[r.name] = {row[0]: tuple(row) for row in rows}  # type: ignore[misc]
    return out


def _binlog(db, start: BinlogPosition, mapping_text: str, fast: bool):  # type: ignore[no-untyped-def]
    """Every row image in the log (inserts' and both of each update's), by table."""
    mapping = parse_mapping(mapping_text)
    out: dict[str, list[tuple[bytes | None, ...]]] = {}
    with opened(mapping, db.url) as (src, resolved):
        tables = {}
        for r in resolved:
            plan = TablePlan(r)
            tables[r.name] = TableColumns(
                plan.select, tuple(r.schema.column(n) for n in plan.select)
            )
        reader = BinlogReader(
            src.url, server_id=7001, database=db.name, tables=tables, start=start,
            blocking=False, wkt=wkt_of(src), fast=fast,
        )  # fmt: skip
        try:
            for event in reader:
                if isinstance(event, Transaction):
                    for change in event.changes:
                        for image in (change.before, change.after):
                            if image is not None:
                                out.setdefault(change.table, []).append(image)
        finally:
            reader.close()
    return out


MAPPING = "version: 1\ntables:\n  v:\n    counter: false\n  w:\n    counter: false\n"


@pytest.mark.parametrize("fast", [True, False], ids=["binlog_rows", "library"])
def test_every_type_as_the_snapshot_writes_it(binlog_db, fast: bool) -> None:  # type: ignore[no-untyped-def]
    start = master_position(binlog_db)
    binlog_db.run(TYPES + MORE + UPDATES)
    snap = _snapshot(binlog_db.url, MAPPING)
    logged = _binlog(binlog_db, start, MAPPING, fast)
    assert set(logged) == {"v", "w"}
    for table, rows in snap.items():
        assert len(logged[table]) == 5 * len(rows)  # insert, 2 images x 2 updates
        for image in logged[table]:
            pk = b"%d" % (int(image[0] or b"0") % 100)  # the updates move ids by 100 and back
            assert image[1:] == rows[pk][1:], (table, pk)


WIDE = """
CREATE TABLE x (id INT PRIMARY KEY, u16 VARCHAR(10) CHARACTER SET utf16,
  u16le VARCHAR(10) CHARACTER SET utf16le, u32 VARCHAR(300) CHARACTER SET utf32,
  u2 CHAR(4) CHARACTER SET ucs2, t16 TEXT CHARACTER SET utf16);
INSERT INTO x VALUES (1, 'Aé€😀', 'Aé€😀', CONCAT(REPEAT('z', 70), 'é'), 'ab€', 'öéx'),
  (2, 'abc', 'abc', 'abc', 'a', ''), (3, NULL, NULL, NULL, NULL, NULL);
UPDATE x SET id = id + 100; UPDATE x SET id = id - 100;
"""


@pytest.mark.parametrize("fast", [True, False], ids=["binlog_rows", "library"])
def test_wide_charsets_as_the_snapshot_writes_them(binlog_db, fast: bool) -> None:  # type: ignore[no-untyped-def]
    """MySQL's utf16, ucs2 and utf32 are big-endian in the row images; utf16le is not."""
    start = master_position(binlog_db)
    binlog_db.run(WIDE)
    mapping = "version: 1\ntables:\n  x:\n    counter: false\n"
    snap = _snapshot(binlog_db.url, mapping)["x"]
    assert snap[b"1"][1] == "Aé€😀".encode()  # the snapshot: UTF-8 from the server
    logged = _binlog(binlog_db, start, mapping, fast)["x"]
    assert len(logged) == 5 * len(snap)
    for image in logged:
        assert image[1:] == snap[b"%d" % (int(image[0] or b"0") % 100)][1:]


@pytest.mark.parametrize(
    "value, text",
    [(0.1, b"0.1"), (1e300, b"1e300"), (1e-5, b"0.00001"), (1e15, b"1e15"), (1e14,
     b"100000000000000"), (1234567890123456.7, b"1234567890123456.8"), (1e-15,
     b"0.000000000000001"), (9.99e-16, b"9.99e-16"), (-0.0, b"0"), (-2.5, b"-2.5")],
)  # fmt: skip
def test_double_as_mariadb_prints_it(value: float, text: bytes) -> None:
    assert double_text(value) == text


FIXED = """
CREATE TABLE z (id INT PRIMARY KEY, d108 DOUBLE(12,8), d52 DOUBLE(5,2) UNSIGNED,
  r73 REAL(7,3), f74 FLOAT(7,4), d DOUBLE);
INSERT INTO z VALUES (1, 206.9816391, 2, -1234.5, 1.5, 206.9816391),
  (2, 0.000000005, 999.994, 0.0005, -0.00004, 2), (3, -0.001, 0, -0.0004, 0, -0.001),
  (4, NULL, NULL, NULL, NULL, NULL), (5, 1.125, 0.125, 1.0005, 3.14159, 1e-5);
UPDATE z SET id = id + 100; UPDATE z SET id = id - 100;
"""


@pytest.mark.parametrize("fast", [True, False], ids=["binlog_rows", "library"])
def test_double_with_a_scale_as_the_snapshot_writes_it(binlog_db, fast: bool) -> None:  # type: ignore[no-untyped-def]
    """DOUBLE(M,D) is printed by the server with D digits (``2.00000000``), and so by sync."""
    start = master_position(binlog_db)
    binlog_db.run(FIXED)
    mapping = "version: 1\ntables:\n  z:\n    counter: false\n"
    snap = _snapshot(binlog_db.url, mapping)["z"]
    assert snap[b"1"][1:3] == (b"206.98163910", b"2.00")  # the server's own fixed-scale text
    logged = _binlog(binlog_db, start, mapping, fast)["z"]
    assert len(logged) == 5 * len(snap)
    for image in logged:
        assert image[1:] == snap[b"%d" % (int(image[0] or b"0") % 100)][1:], image


@pytest.mark.parametrize(
    "value, text",
    [(1e20, "1e20"), (3.0, "3.0"), (0.5, "0.5"), (1e-7, "0.0000001"), (1e15, "1e15"),
     (1e14, "100000000000000.0"), (1.2345678901234567e19, "1.2345678901234567e19"),
     (-0.0, "-0.0"), (100.0, "100.0"), (2.5e-5, "0.000025")],
)  # fmt: skip
def test_a_json_double_as_mysql_prints_it(value: float, text: str) -> None:
    """What MySQL 9.7 printed for SELECT JSON_ARRAY(...) of each (Python's repr gave 1e+20)."""
    from migrator.source.binlog.values import json_double

    assert json_double(value) == text


VECTORS = """
CREATE TABLE vec (id INT PRIMARY KEY, v VECTOR(3), t VARCHAR(10) CHARACTER SET latin1,
  u VARCHAR(10) CHARACTER SET utf16, j JSON);
INSERT INTO vec VALUES (1, STRING_TO_VECTOR('[1.5, -2, 3.25]'), 'é', '€', '[1e20, 3.0]'),
  (2, NULL, 'ü', '😀', NULL);
UPDATE vec SET id = id + 100; UPDATE vec SET id = id - 100;
"""


@pytest.mark.engine("mysql", why="VECTOR is MySQL 9's type")
@pytest.mark.parametrize("fast", [True, False], ids=["binlog_rows", "library"])
def test_a_vector_column_and_the_columns_after_it(binlog_db, fast: bool) -> None:  # type: ignore[no-untyped-def]
    """The library skipped VECTOR's metadata byte and failed on its optional metadata field
    (13), and its binary charset shifted every later column's."""
    start = master_position(binlog_db)
    binlog_db.run(VECTORS)
    mapping = "version: 1\ntables:\n  vec:\n    counter: false\n"
    snap = _snapshot(binlog_db.url, mapping)["vec"]
    assert snap[b"1"][2:] == ("é".encode(), "€".encode(), b"[1e20, 3.0]")
    logged = _binlog(binlog_db, start, mapping, fast)["vec"]
    assert len(logged) == 5 * len(snap)
    for image in logged:
        assert image[1:] == snap[b"%d" % (int(image[0] or b"0") % 100)][1:], image
