"""The DBAPI drivers that read rows raw: pymysql, or mysqlclient (MySQLdb, extra ``fast``).

Both are used with their type conversion off (``conv`` without result converters,
``use_unicode=False``), so every value is the bytes MySQL prints. mysqlclient reads ~6x
faster; when it is importable it also serves URLs naming pymysql (the default), as
tests/test_drivers.py proves both drivers yield identical bytes for every type.
"""

from __future__ import annotations

import functools
import os
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import URL

from migrator.errors import ConnectError
from migrator.source.connection import connect_error, setup_session

#: forces the driver that reads rows: "pymysql" or "mysqldb" (tests/test_drivers.py uses it)
RAW_DRIVER_ENV = "MIGRATOR_RAW_DRIVER"
RAW_DRIVERS = ("pymysql", "mysqldb")


@functools.cache
def mysqldb_available() -> bool:
    """Whether mysqlclient (the C driver, ``pip install migrator[fast]``) can be imported."""
    try:
        import MySQLdb  # noqa: F401
    except Exception:  # not installed, or its C library is missing
        return False
    return True


def raw_driver(url: URL) -> str:
    """The driver that reads rows: $MIGRATOR_RAW_DRIVER if set; else mysqlclient when the URL
    names pymysql (the default) without query options and mysqlclient is importable, as it
    reads rows ~6x faster and yields the very same bytes (tests/test_drivers.py); else the
    URL's own driver."""
    forced = os.environ.get(RAW_DRIVER_ENV, "").strip().lower()
    if forced:
        if forced not in RAW_DRIVERS:
            raise ConnectError(
                f"{RAW_DRIVER_ENV}={forced} names no supported driver",
                f"set it to one of {', '.join(RAW_DRIVERS)}, or unset it",
            )
        return forced
    driver = url.get_driver_name()
    if driver == "pymysql" and not url.query and mysqldb_available():
        return "mysqldb"  # (query options were written for pymysql: they keep it)
    return driver


def raw_connect(url: URL, timeout: int) -> Any:
    driver = raw_driver(url)
    if driver != url.get_driver_name():
        url = url.set(drivername=f"{url.get_backend_name()}+{driver}")
    try:
        dialect = sa.create_engine(url).dialect
    except Exception as e:  # the driver named by the URL is not installed
        raise ConnectError(
            f"cannot load the MySQL driver '{driver}': {e}",
            "use mysql+pymysql:// (default) or install mysqlclient: pip install migrator[fast]",
        ) from None
    cargs, kwargs = dialect.create_connect_args(url)
    kwargs.update(connect_timeout=timeout, charset="utf8mb4")
    try:
        if driver == "pymysql":
            import pymysql
            from pymysql.converters import conversions

            kwargs.pop("client_flag", None)
            encoders = {k: v for k, v in conversions.items() if not isinstance(k, int)}
            conn = pymysql.connect(*cargs, **kwargs, conv=encoders, use_unicode=False)
        elif driver == "mysqldb":
            import MySQLdb
            from MySQLdb.converters import conversions as mconv

            encoders = {k: v for k, v in mconv.items() if not isinstance(k, int)}
            conn = MySQLdb.connect(*cargs, **kwargs, conv=encoders, use_unicode=False)
        else:
            raise ConnectError(
                f"the MySQL driver '{driver}' is not supported for reading rows",
                "use mysql+pymysql:// (default) or mysql+mysqldb:// (mysqlclient)",
            )
    except ConnectError:
        raise
    except Exception as e:
        raise connect_error(url, e) from None
    setup_session(conn, None)
    return conn


def unbuffered_cursor(conn: Any) -> Any:
    module = type(conn).__module__
    if module.startswith("pymysql"):
        import pymysql.cursors

        return pymysql.cursors.SSCursor
    import MySQLdb.cursors

    return MySQLdb.cursors.SSCursor
