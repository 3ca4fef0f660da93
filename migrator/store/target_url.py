"""The target URL's database number and query options, checked before Redis is contacted.

redis-py reads a database path that is not a number as database 0 (``redis://host/abc``), and
hands a query option it does not know to its connection class, whose TypeError ended the
command as an unexpected error (exit 1). Here each is a usage error (exit 2) naming what is
wrong (docs/connections.md).
"""

from __future__ import annotations

import difflib
import functools
import inspect
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from migrator.errors import MigratorError, docs
from migrator.urls import mask

#: constructor arguments that are Python objects or internals, never text from a URL
NOT_OPTIONS = frozenset({"self", "kwargs", "connection_kwargs", "connection_class"})


@functools.cache
def options(tls: bool) -> frozenset[str]:
    """The query options redis-py takes for a redis:// (or, with ``tls``, rediss://) URL."""
    import redis.connection as rc

    classes: list[Any] = [rc.AbstractConnection, rc.Connection, rc.ConnectionPool]
    classes += [rc.SSLConnection] if tls else []
    inits = [c.__init__ for c in classes]
    names = {p for init in inits for p in inspect.signature(init).parameters}
    return frozenset(names | set(rc.URL_QUERY_ARGUMENT_PARSERS)) - NOT_OPTIONS


def check_target_url(url: str) -> None:
    """Stop (exit 2) on a database path that is not a number and on a query option redis-py
    does not take (named without its value: it may be a secret)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("redis", "rediss"):
        return  # unix:// and the cluster form are read elsewhere
    db = parts.path.strip("/")
    if db and not db.isdigit():
        raise MigratorError(
            f"the target URL {mask(url)} ends with '/{db}', which is not a database number",
            "end it with the database's number, e.g. redis://host:6379/0",
        )
    known = options(scheme == "rediss")
    for name, _ in parse_qsl(parts.query, keep_blank_values=True):
        if name in known:
            continue
        if scheme == "redis" and name in options(True):
            raise MigratorError(
                f"the target URL has the TLS option '{name}' but starts with redis://,"
                " which talks plain text",
                f"write it as rediss://... to use TLS ({docs('connections.md')})",
            )
        close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.75)
        hint = f"did you mean '{close[0]}'? " if close else ""
        raise MigratorError(
            f"the target URL has the option '{name}', which Redis' client (redis-py) does not take",
            f"{hint}the options are redis-py's: ssl_ca_certs, ssl_certfile, ssl_keyfile,"
            f" socket_timeout... ({docs('connections.md')})",
        )
