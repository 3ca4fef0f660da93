"""The source URL's driver and query options, checked before anything is contacted.

SQLAlchemy hands the query options to PyMySQL as keyword arguments, and both readers take
PyMySQL's arguments (drivers.py). An option PyMySQL does not take (``?sslmode=require``), one
that only takes a Python object (``?ssl=true``), or a number or flag that is neither would
otherwise surface as the driver's own TypeError or ValueError, as a failed connection (exit 3)
or an unexpected error (exit 1). Here each is a usage error (exit 2) that names the option and
the ones that exist (docs/connections.md).
"""

from __future__ import annotations

import difflib
import functools
import inspect
import os

from sqlalchemy.engine import URL
from sqlalchemy.util import asbool

from migrator.errors import MigratorError, docs

#: the options connections.md documents, named in the hint
DOCUMENTED = (
    "ssl_ca", "ssl_cert", "ssl_key", "ssl_check_hostname", "ssl_capath", "ssl_cipher",
    "ssl_disabled", "unix_socket", "read_timeout",
)  # fmt: skip
#: options SQLAlchemy turns into PyMySQL's ``ssl`` dict (PyMySQL itself does not take them)
TRANSLATED = frozenset({"ssl_capath", "ssl_cipher", "ssl_check_hostname"})
#: PyMySQL arguments that only take a Python object, never text from a URL
OBJECTS = frozenset({"ssl", "conv", "cursorclass", "auth_plugin_map", "self"})
#: options SQLAlchemy converts to a number or a flag on the way (a bad value: its ValueError)
NUMBERS = frozenset({"connect_timeout", "read_timeout", "write_timeout", "client_flag"})
FLAGS = frozenset({"compress", "local_infile", "use_unicode", "ssl_check_hostname", "ssl_disabled"})
#: options that name a file (or a folder) the driver opens: missing, it said only "[Errno 2]"
FILES = {"ssl_ca": "file", "ssl_cert": "file", "ssl_key": "file", "ssl_capath": "folder"}


@functools.cache
def pymysql_options() -> frozenset[str]:
    """The query options a PyMySQL source URL may carry."""
    import pymysql.connections

    taken = inspect.signature(pymysql.connections.Connection.__init__).parameters
    return frozenset(taken) - OBJECTS | TRANSLATED


def check_driver(parsed: URL) -> None:
    """A driver SQLAlchemy does not know (``mysql+foo``), or an asyncio one
    (``mysql+asyncmy``, which reads the rows anyway), is refused."""
    shown = parsed.drivername
    try:
        dialect = parsed.get_dialect()
    except Exception:
        dialect = None
    if dialect is not None and not getattr(dialect, "is_async", False):
        return
    driver = shown.partition("+")[2] or shown
    why = (
        "an asyncio driver, which migrator does not use for the schema (asyncmy reads the rows"
        " whatever the URL's driver)"
        if dialect is not None
        else "a driver SQLAlchemy does not know"
    )
    raise MigratorError(
        f"the source URL names the driver '{driver}' ({shown}://): {why}",
        "write mysql+pymysql://user:***@host:3306/database, or mysql://"
        f" ({docs('connections.md')})",
    )


def check_options(parsed: URL) -> None:
    """Each query option of a PyMySQL source URL is one PyMySQL takes, with a value of its
    kind; else exit 2 naming it and the documented options."""
    if parsed.get_driver_name() != "pymysql":
        return  # another driver's options are its own (mysqlclient: mysql+mysqldb://)
    known = pymysql_options()
    for name, value in parsed.query.items():
        text = value if isinstance(value, str) else ",".join(value)
        if name not in known:
            raise unknown_option(name, known)
        if name in FILES and not os.path.exists(text):
            raise MigratorError(
                f"{name}={text} in the source URL: no such {FILES[name]}",
                "give the path of the file as the machine running migrator sees it",
            )
        if name in NUMBERS and not text.strip().isdigit():
            raise MigratorError(
                f"{name}={text} in the source URL is not a whole number",
                f"write it in seconds (or as a number), e.g. ?{name}=60",
            )
        if name in FLAGS:
            try:
                asbool(text)
            except ValueError:
                raise MigratorError(
                    f"{name}={text} in the source URL is neither true nor false",
                    f"write ?{name}=true or ?{name}=false",
                ) from None


def unknown_option(name: str, known: frozenset[str]) -> MigratorError:
    """An option PyMySQL does not take, named without its value (it may be a secret)."""
    why = (
        "it takes a Python object, not text"
        if name in OBJECTS
        else "MySQL's driver has no such option"
    )
    tls = "ssl" in name.lower() or "tls" in name.lower()
    close = [] if tls else difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.75)
    hint = f"did you mean '{close[0]}'? " if close else ""
    if tls:
        hint += (
            "TLS is used whenever the server offers it; ssl_ca=FILE checks its certificate,"
            " ssl_disabled=true turns it off. "
        )
    return MigratorError(
        f"the source URL has the option '{name}': {why} (PyMySQL)",
        f"{hint}The options: {', '.join(DOCUMENTED)} ({docs('connections.md')})",
    )
