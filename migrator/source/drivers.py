"""The drivers that read rows raw: asyncmy (the default), or PyMySQL.

Both are used with their type conversion off (``conv`` without result converters,
``use_unicode=False``), so every value is the bytes MySQL prints. asyncmy (compiled, installed
with the tool as wheels; asyncmy_sync.py) reads rows ~3-5x faster than PyMySQL and serves
every URL whose query options it takes; tests/test_drivers.py proves both yield identical
bytes for every type, tests/test_reader_parity.py that asyncmy connects, fails and reports as
PyMySQL does. Either way the connection arguments are those SQLAlchemy derives for PyMySQL from
the URL; the URL's own driver reads the schema.
"""

from __future__ import annotations

import os
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import URL
from sqlalchemy.util import asbool

from migrator.errors import ConnectError, MigratorError
from migrator.source import asyncmy_sync
from migrator.source.connection import connect_error, setup_session

#: forces the driver that reads rows (tests/test_drivers.py uses it)
RAW_DRIVER_ENV = "MIGRATOR_RAW_DRIVER"
RAW_DRIVERS = ("asyncmy", "pymysql")


def raw_driver(url: URL) -> str:
    """The driver that reads rows: $MIGRATOR_RAW_DRIVER if set; else asyncmy when it takes all
    of the URL's query options and is importable (a wheel exists for this platform); else
    PyMySQL, which the options were written for."""
    forced = os.environ.get(RAW_DRIVER_ENV, "").strip().lower()
    if forced:
        if forced not in RAW_DRIVERS:
            raise ConnectError(
                f"{RAW_DRIVER_ENV}={forced} names no supported driver",
                f"set it to one of {', '.join(RAW_DRIVERS)}, or unset it",
            )
        return forced
    if set(url.query) <= asyncmy_sync.OPTIONS and asyncmy_sync.available():
        return "asyncmy"
    return "pymysql"


def raw_connect(url: URL, timeout: int) -> Any:
    driver = raw_driver(url)
    url = url.set(drivername=f"{url.get_backend_name()}+pymysql")
    cargs, kwargs = sa.create_engine(url).dialect.create_connect_args(url)
    kwargs.update(connect_timeout=timeout, charset="utf8mb4")
    if "ssl_disabled" in kwargs:  # text in the URL: "false" would be true to PyMySQL
        kwargs["ssl_disabled"] = url_flag("ssl_disabled", kwargs["ssl_disabled"])
    try:
        if driver == "asyncmy":
            conn: Any = asyncmy_sync.connect(kwargs)
        else:
            import pymysql
            from pymysql.converters import conversions

            kwargs.pop("client_flag", None)
            encoders = {k: v for k, v in conversions.items() if not isinstance(k, int)}
            conn = pymysql.connect(*cargs, **kwargs, conv=encoders, use_unicode=False)
    except Exception as e:
        raise connect_error(url, e) from None
    setup_session(conn, None)
    return conn


def url_flag(name: str, value: Any) -> bool:
    """A true/false query option of the source URL (SQLAlchemy passes it on as text)."""
    try:
        return bool(asbool(value))
    except ValueError:
        raise MigratorError(
            f"{name}={value} in the source URL is neither true nor false",
            f"write ?{name}=true or ?{name}=false",
        ) from None


def driver_of(conn: Any) -> str:
    """Which driver a connection of ``raw_connect`` is: "asyncmy" or "pymysql"."""
    return "asyncmy" if isinstance(conn, asyncmy_sync.Connection) else "pymysql"


def unbuffered_cursor(conn: Any) -> Any:
    if isinstance(conn, asyncmy_sync.Connection):
        import asyncmy.cursors

        return asyncmy.cursors.SSCursor
    import pymysql.cursors

    return pymysql.cursors.SSCursor


def let_go(cursor: Any) -> None:
    """Forget an unbuffered cursor whose connection was lost mid-result, without closing it:
    closing reads the rest of the result. PyMySQL's cursor and result do that by themselves
    when collected (``__del__``) and fail on the dead connection, which Python prints as
    "Exception ignored in ..." with a traceback, after the command's one-line error; both
    are marked done here. (asyncmy's do nothing when collected.)"""
    import pymysql.cursors

    if not isinstance(cursor, pymysql.cursors.SSCursor):
        return
    result = cursor._result
    if result is not None:
        result.unbuffered_active = False
    cursor.connection = None
