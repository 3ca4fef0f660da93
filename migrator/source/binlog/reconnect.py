"""sync's side of a lost source connection: every loss surfaces as ``SourceLost``, once.

``sync`` holds several connections to MySQL: the binary-log stream (and the library's own
control connection), the connection that takes the snapshot and rebuilds latest lists, and
one that turns GEOMETRY into WKT. Whichever of them is lost (``KILL``, a restart, a network
blip), the recovery loop (sync/recovery.py) starts them all again from the last applied
position, as ``options.retries`` says. For that:

* ``StreamConnection`` is the replication library's connection class with one change: a lost
  connection raises ``SourceLost`` instead of the ``OperationalError`` on which the library
  reconnects by itself, forever and from the middle of a transaction;
* ``Surface`` is a retry policy for ``Source`` reads that does not retry but hands the failure
  up as ``SourceLost`` (a snapshot read again on a new connection would no longer be the
  snapshot the stored position belongs to);
* ``surfaced`` turns any transient failure of a call into ``SourceLost``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import pymysql

from migrator.errors import ConnectError
from migrator.retry import Retrying
from migrator.source.connection import transient

T = TypeVar("T")


class SourceLost(ConnectError):
    """A connection to the source was lost (exit 3 if it escapes; sync retries it)."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"lost the connection to MySQL: {reason}")
        self.reason = reason


class SourceChanged(SourceLost):
    """A table changed under a snapshot while it was read (a swap's RENAME, a TRUNCATE: MySQL
    error 1412): as after a lost connection, the load starts again from a new snapshot
    (retried as ``options.retries`` says, then exit 3)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.message = reason


class StreamConnection(pymysql.connections.Connection):
    """A PyMySQL connection whose lost reads raise ``SourceLost`` (see the module doc)."""

    def _read_packet(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super()._read_packet(*args, **kwargs)
        except pymysql.err.OperationalError as e:
            reason = transient(e)
            if reason is None:
                raise
            raise SourceLost(f"reading the binary log: {reason}") from None


class Surface(Retrying):
    """A ``Retrying`` that never waits: the first failure is ``SourceLost``."""

    def failed(self, failures: int, reason: str, what: str) -> None:
        raise SourceLost(f"{what}: {reason}")


def lost_reason(e: BaseException) -> str | None:
    """Why ``e`` means a lost source connection, or None."""
    if isinstance(e, SourceLost):
        return e.reason
    return transient(e)


def surfaced(fn: Callable[[], T], what: str, drop: Callable[[], None]) -> T:
    """``fn()``; a transient failure calls ``drop`` (forget the connection) and raises
    ``SourceLost``."""
    try:
        return fn()
    except Exception as e:
        reason = lost_reason(e)
        if reason is None:
            raise
        drop()
        if isinstance(e, SourceLost):
            raise
        raise SourceLost(f"{what}: {reason}") from None
