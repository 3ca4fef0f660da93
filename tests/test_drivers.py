"""The raw row drivers: asyncmy (the default) and PyMySQL yield the very same bytes.

migrate reads rows through asyncmy unless the source URL has query options only PyMySQL takes
(source.raw_driver), so every value check of tests/test_values_mysql.py runs here through each
driver, and asyncmy's raw reads are compared with PyMySQL's value by value, keyset pagination
over string, binary and composite keys included.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis
from sqlalchemy.engine import make_url

from migrator.commands import migrate
from migrator.errors import ConnectError
from migrator.mapping.loader import parse_mapping
from migrator.source import asyncmy_sync
from migrator.source.drivers import RAW_DRIVER_ENV, raw_driver
from migrator.source.mysql import Source
from migrator.source.selects import RawRow
from tests.test_values_mysql import EXPECTED, TYPES

DRIVERS = ["asyncmy", "pymysql"]
MODULES = {"asyncmy": "migrator.source.asyncmy_sync", "pymysql": "pymysql"}

KEYS = r"""
CREATE TABLE ks (code VARCHAR(20) PRIMARY KEY, n INT NULL) CHARACTER SET utf8mb4;
INSERT INTO ks VALUES ('a''b', 1), ('c\\d', 2), ('50%', 3), ('%s', 4), ('ünï', 5),
  ('漢字', 6), ('', 7), ('z', NULL), ('%(x)s', 9), ('a b', 10);
CREATE TABLE kb (id VARBINARY(8) PRIMARY KEY, v BLOB NULL);
INSERT INTO kb VALUES (UNHEX('00'), UNHEX('FF00')), (UNHEX('27'), NULL), (UNHEX('5C'), ''),
  (UNHEX('FF'), UNHEX('0D0A')), (UNHEX('2527'), 'x'), (UNHEX('C3A9'), UNHEX('00'));
CREATE TABLE kc (a INT, b VARCHAR(10), t TEXT NULL, PRIMARY KEY (a, b)) CHARACTER SET utf8mb4;
INSERT INTO kc VALUES (1, 'x', 'one'), (1, 'y''', NULL), (1, 'ß', 'two'), (2, '', 'three'),
  (2, 'a', '四'), (3, '\\', 'five'), (3, 'é', NULL);
"""


@pytest.fixture
def driver_env(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    driver: str = request.param
    monkeypatch.setenv(RAW_DRIVER_ENV, driver)
    return driver


@pytest.fixture
def types_db(mysql_db):  # type: ignore[no-untyped-def]
    mysql_db.run(TYPES)
    mysql_db.run(KEYS)
    return mysql_db


@pytest.mark.parametrize("driver_env", DRIVERS, indirect=True)
def test_values_as_mysql_prints_them(
    driver_env: str, types_db: Any, redis_url: str, redis_client: redis.Redis
) -> None:
    with Source(types_db.url) as src:  # the env var really picks the driver
        assert type(src.raw_connection()).__module__.startswith(MODULES[driver_env])
    mapping = parse_mapping("version: 1\ntables:\n  v:\n    counter: false\n")
    report = migrate(mapping, source=types_db.url, target=redis_url)
    assert report.rows == 3 and report.exit_code == 0
    for row, fields in EXPECTED.items():
        assert redis_client.hgetall(f"v:{row}") == fields, (driver_env, row)


def _read_all(url: str, driver: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Everything Source reads raw, through one driver: every table in batches of 2 with
    pages of 3 (so keyset parameters of every key type go through the driver), plus
    latest, rows_where, max_of and count."""
    monkeypatch.setenv(RAW_DRIVER_ENV, driver)
    out: dict[str, Any] = {}
    with Source(url) as src:
        assert type(src.raw_connection()).__module__.startswith(MODULES[driver])
        schema = src.schema()
        for name, ts in sorted(schema.tables.items()):
            pk = list(ts.primary_key)
            names = pk + [c.name for c in ts.columns if c.name not in pk]
            sel = src.selector(name, names)
            batches = list(src.batches(name, sel, pk, 2, page_size=3))
            assert all(len(b) <= 2 for b in batches)
            rows: list[RawRow] = [r for b in batches for r in b]
            assert len(rows) == src.count(name)
            out[name] = rows
            pk_cols = [ts.column(c) for c in pk]
            out[name + ".latest"] = src.latest(name, pk_cols, ts.column(names[-1]), 4)
            out[name + ".max"] = src.max_of(name, ts.column(names[-1]))
            keys = [r[0] for r in rows[::2]]
            out[name + ".where"] = sorted(
                src.rows_where(name, sel, [pk[0]], keys), key=lambda r: repr(r)
            )
    return out


def test_drivers_read_identical_bytes(types_db: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    by_pymysql = _read_all(types_db.url, "pymysql", monkeypatch)
    by_asyncmy = _read_all(types_db.url, "asyncmy", monkeypatch)
    assert set(by_pymysql) == set(by_asyncmy)
    for what, rows in by_pymysql.items():
        assert by_asyncmy[what] == rows, what
    for what, rows in by_pymysql.items():  # values really are raw bytes, not converted
        values = rows if isinstance(rows, list) else [(rows,)]
        for row in values:
            assert all(v is None or isinstance(v, bytes) for v in row), what
    assert len(by_pymysql["ks"]) == 10 and len(by_pymysql["kb"]) == 6 and len(by_pymysql["kc"]) == 7
    assert by_pymysql["v"][0][0] == b"1"


@pytest.fixture
def no_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv(RAW_DRIVER_ENV, raising=False)
    yield


def test_raw_driver_default(no_env: None) -> None:
    """A plain install reads rows with asyncmy; the options PyMySQL alone takes keep it."""
    assert asyncmy_sync.available()  # a dependency of the tool, wheels for every platform
    url = make_url("mysql+pymysql://root@127.0.0.1:3306/x")
    assert raw_driver(url) == "asyncmy"
    assert raw_driver(make_url("mysql+mysqldb://root@127.0.0.1/x")) == "asyncmy"  # rows, not schema
    tls = "mysql+pymysql://root@h/x?ssl_ca=/ca.pem&ssl_cert=/c.crt&ssl_key=/c.key"
    assert raw_driver(make_url(tls + "&ssl_check_hostname=false")) == "asyncmy"
    assert raw_driver(make_url("mysql+pymysql://root@h/x?read_timeout=30")) == "asyncmy"
    assert raw_driver(make_url("mysql+pymysql://root@h/x?ssl_disabled=true")) == "asyncmy"
    assert raw_driver(make_url("mysql+pymysql://root@h/x?write_timeout=30")) == "pymysql"
    assert raw_driver(make_url(tls + "&local_infile=0")) == "pymysql"


def test_raw_driver_forced(monkeypatch: pytest.MonkeyPatch) -> None:
    url = make_url("mysql+mysqldb://root@127.0.0.1:3306/x")
    monkeypatch.setenv(RAW_DRIVER_ENV, "PyMySQL")
    assert raw_driver(url) == "pymysql"
    monkeypatch.setenv(RAW_DRIVER_ENV, "mysqldb")  # mysqlclient: no longer a row reader
    with pytest.raises(ConnectError, match=RAW_DRIVER_ENV):
        raw_driver(url)


def test_without_asyncmy_rows_are_read_by_pymysql(
    no_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where no asyncmy wheel exists and it was not installed, PyMySQL reads the rows."""
    monkeypatch.setattr(asyncmy_sync, "available", lambda: False)
    assert raw_driver(make_url("mysql+pymysql://root@127.0.0.1:3306/x")) == "pymysql"
