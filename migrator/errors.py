"""One error root. Every user-facing failure is a MigratorError with an exit code and a hint."""

from __future__ import annotations

import signal
import sys
import threading
from typing import NoReturn

EXIT_OK = 0
EXIT_DIFFERENCE = 1
EXIT_USAGE = 2
EXIT_CONNECT = 3
#: Redis refuses writes for a condition of its own (out of memory under ``maxmemory``, a
#: failed background save, a read-only replica): fixed in Redis, then the command goes on
EXIT_TARGET = 4

#: a Ctrl-C or SIGTERM before any command ran: while the program starts (migrator/__main__.py)
#: or a command imports its libraries (migrator/cli/app.py: importing)
INTERRUPTED_STARTING = "error: interrupted while starting: nothing was done\n"


def deaf() -> None:
    """Ignore Ctrl-C and SIGTERM from now on: the process is saying why it stops, then exits
    (the main thread only: elsewhere signals are not this code's to set)."""
    if threading.current_thread() is not threading.main_thread():
        return
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


#: the exit code once the command's outcome is decided (``decided``); empty before
_outcome: list[int] = []
#: the process is the command's own (migrator/__main__.py), not a test calling the command line
_own: list[bool] = []


def own_process() -> None:
    """Called by the console entry point: signals are this process's to decide on."""
    _own[:] = [True]


def process_owned() -> bool:
    return bool(_own)


def decided(code: int) -> None:
    """The command's outcome is known and is about to be said: deaf from now on, and ``code``
    is the exit whatever comes (a Ctrl-C as the outcome was said, or as the process unwound
    to exit, was a death by SIGINT after the line: migrator/__main__.py). Only in the
    command's own process: a test calling the command line keeps its Ctrl-C."""
    if not _own:
        return
    deaf()
    _outcome[:] = [code]


def outcome() -> int | None:
    """The exit code ``decided`` recorded, or None while the command still runs."""
    return _outcome[0] if _outcome else None


def interrupted_starting(line: str = INTERRUPTED_STARTING) -> NoReturn:
    """Say ``line`` on stderr and exit 130, deaf to a second Ctrl-C or SIGTERM meanwhile (one
    arriving as the line is written was a traceback and a death by SIGINT)."""
    deaf()
    decided(130)
    sys.stderr.write(line)
    sys.stderr.flush()
    sys.exit(130)


#: where the documentation is read once installed (pyproject's [project.urls] Documentation):
#: messages cite its pages by address, never a file of the repository that pip does not install
DOCS = "https://github.com/migrator-dev/migrator/blob/main/docs"


def docs(page: str) -> str:
    """The address of a page of the documentation: ``docs("connections.md")``."""
    return f"{DOCS}/{page}"


class MigratorError(Exception):
    """A failure the user can act on: a message naming the cause and, where known, the fix."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  hint: {self.hint}"

    def __reduce__(self) -> tuple[object, ...]:
        """Pickled whole, hint included (a task on a Dask worker raises it to the caller)."""
        return (_rebuilt, (type(self), self.message, dict(self.__dict__)))


def _rebuilt(cls: type[MigratorError], message: str, state: dict[str, object]) -> MigratorError:
    error = cls.__new__(cls)
    Exception.__init__(error, message)
    error.__dict__.update(state)
    return error


class MappingError(MigratorError):
    """The mapping file is invalid. Carries the file, the YAML line and the path in the mapping."""

    exit_code = EXIT_USAGE

    def __init__(
        self,
        message: str,
        *,
        path: str = "",
        file: str | None = None,
        line: int | None = None,
        column: int | None = None,
        hint: str | None = None,
    ) -> None:
        self.path = path
        self.file = file
        self.line = line
        self.column = column
        where = file or "<mapping>"
        if line is not None:
            where += f":{line}"
            if column is not None:
                where += f":{column}"
        prefix = f"{where}: "
        if path:
            prefix += f"{path}: "
        super().__init__(prefix + message, hint)
        self.detail = message


class MappingErrors(MigratorError):
    """Several mapping problems found at once (validate reports them all)."""

    exit_code = EXIT_USAGE

    def __init__(self, errors: list[MappingError]) -> None:
        self.errors = errors
        super().__init__("\n".join(str(e) for e in errors))


class ConnectError(MigratorError):
    """A server cannot be reached, or refuses us (wrong password, unknown database)."""

    exit_code = EXIT_CONNECT


class SourceError(MigratorError):
    """The source schema does not fit the mapping (missing table, no primary key...)."""

    exit_code = EXIT_USAGE


class TableChanged(SourceError):
    """A table was altered, truncated or swapped in (gh-ost's cut-over) while a snapshot of it
    was read (MySQL error 1412): transient, exit 3 — the same command once the change is done
    reads a snapshot it fits (sync starts its load again by itself)."""

    exit_code = EXIT_CONNECT


class TargetError(MigratorError):
    """Redis refused a write (wrong type at a key, out of memory...)."""

    exit_code = EXIT_DIFFERENCE


class TargetFull(TargetError):
    """Redis refuses writes for a condition of its own, not of the data: out of memory under
    ``maxmemory`` (``OOM``), a failed background save (``MISCONF``), a read-only replica
    (``READONLY``). Nothing of the refused batch or group is applied; once Redis is fixed,
    the same command goes on (migrate ``--resume``; sync from its stored position)."""

    exit_code = EXIT_TARGET


class TargetLost(MigratorError):
    """The target no longer holds what this run wrote (restarted empty, flushed, failed over
    to a replica that lacks writes). migrate reloads what is missing; when it cannot, this
    stops the command with exit 3."""

    exit_code = EXIT_CONNECT


class NothingWritten(KeyboardInterrupt):
    """Ctrl-C or SIGTERM before the command wrote anything (its first connections, its
    checks of the target): exit 130 like any interrupt, with nothing to resume."""


class LoadInterrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM before sync's online first load was done: exit 130 like any
    interrupt; ``hint`` says what Redis holds and the command that resumes the load."""

    def __init__(self, hint: str) -> None:
        super().__init__(hint)
        self.hint = hint
