"""Failures the commands did not turn into a ``MigratorError`` themselves, turned into one
(issue 10 item 7): every failure is one error line, a hint and a documented exit code; the
traceback only with ``--debug``."""

from __future__ import annotations

from types import TracebackType

from migrator.errors import (
    EXIT_DIFFERENCE,
    ConnectError,
    MigratorError,
    NothingWritten,
    TargetError,
)

#: module -> the package that provides it
PACKAGES = {
    "mysql": "mysql-connector-python",
    "MySQLdb": "mysqlclient",
    "pymysql": "PyMySQL",
    "mariadb": "mariadb",
    "asyncmy": "asyncmy",
    "hiredis": "hiredis",
}


class Unexpected(MigratorError):
    """A failure nobody foresaw: exit 1, and a hint to rerun with ``--debug``."""

    exit_code = EXIT_DIFFERENCE


def _first_line(e: BaseException) -> str:
    text = str(e)
    return text.splitlines()[0] if text else type(e).__name__


def explain(e: Exception, resumable: bool = False) -> MigratorError:
    """The ``MigratorError`` for an exception that escaped a command (``resumable``: one that
    continues with ``--resume``, migrate)."""
    import redis

    from migrator.store.failures import ACL_HINT

    if isinstance(e, ImportError):
        name = (e.name or _first_line(e)).split(".")[0]
        package = PACKAGES.get(name, name)
        return MigratorError(
            f"the Python module '{name}' is not installed (a driver named by a URL?)",
            f"install it where migrator runs (pip install {package}), or use the driver "
            "installed with migrator: mysql+pymysql://",
        )
    if isinstance(e, redis.exceptions.NoPermissionError):
        return ConnectError(f"Redis refused this user a command: {_first_line(e)}", ACL_HINT)
    if isinstance(e, (redis.ConnectionError, redis.TimeoutError)):
        return ConnectError(
            f"lost the connection to Redis: {_first_line(e)}",
            "is the server up? 'migrator migrate MAPPING --resume' continues a load"
            if resumable
            else "is the server up? Then run the command again",
        )
    if isinstance(e, redis.RedisError):
        return TargetError(f"Redis refused a command: {_first_line(e)}")
    if isinstance(e, MemoryError):
        return Unexpected(
            "out of memory", "use a smaller --batch-size (e.g. 5000) or fewer --workers"
        )
    return Unexpected(
        f"unexpected error: {type(e).__name__}: {_first_line(e)}",
        "run again with --debug to see where it happened, and report it",
    )


class BeforeWriting:
    """``with BeforeWriting() as first: ...; first.over()``: until ``over()``, the command has
    written nothing, so a failure suggests no ``--resume``: an interrupt becomes
    ``NothingWritten``, and an error no step turned into a ``MigratorError`` is explained here,
    without the resume hint (``explain``)."""

    def __init__(self) -> None:
        self.written = False

    def over(self) -> None:
        self.written = True

    def __enter__(self) -> BeforeWriting:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.written or e is None or isinstance(e, (MigratorError, NothingWritten)):
            return
        if isinstance(e, KeyboardInterrupt):
            raise NothingWritten from None
        if isinstance(e, Exception):
            raise explain(e) from e
