"""The binary-log reader in a process of its own, so that decoding does not share the
interpreter lock with planning and applying (both cores used).

``ReaderProcess`` is iterated like ``BinlogReader`` and yields the same events in the same
order: it starts ``python -m migrator.source.binlog.process``, hands it the reader's settings
on its standard input (pickled: the URL with its password goes through the pipe, never on a
command line), and reads back frames of pickled events from its standard output. The child
runs a ``BinlogReader`` and sends what it has decoded before it reads the socket when the
socket has nothing waiting (it would wait for the source), and every ``BATCH`` events
(``BATCH_ROWS`` row changes) in a backlog: a transaction reaches the parent as soon as the
source has sent nothing more after it, and a backlog goes in frames of ~1,000 row changes.
An error of the child's reader is sent as the last frame and raised by ``ReaderProcess`` in
the parent, as the thread reader would raise it (a lost connection stays ``SourceLost``, a
purged log stays PyMySQL's 1236).

The child dies with the thread that started it (Linux ``PR_SET_PDEATHSIG``; elsewhere at its
next write, within a heartbeat): a ``kill -9`` of sync leaves no reader behind. It ignores
SIGINT and SIGTERM, which a terminal's Ctrl-C and a service manager send the whole group:
sync stops after the transaction in hand, then ``close()`` kills it; nothing it held needs a
clean end (it only reads).
"""

from __future__ import annotations

import signal

if __name__ == "__main__":  # the child: see main(); before the imports below take their time
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)

import os
import pickle
import select
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import suppress
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy.engine import URL

from migrator.errors import MigratorError, SourceError
from migrator.source.binlog.reader import (
    BinlogPosition,
    BinlogReader,
    Event,
    TableColumns,
    Transaction,
)
from migrator.source.binlog.reconnect import SourceLost, lost_reason, surfaced

BATCH = 512  # events sent in one frame at most
BATCH_ROWS = 1000  # or row changes: the parent decodes one frame while the next is read
PIPE_BYTES = 1 << 20  # the pipe's capacity asked for (Linux; 64 KiB otherwise)
_LENGTH = 4  # a frame: its length (4 bytes, little-endian), then the pickled list


@dataclass
class Settings:
    """What the child builds its ``BinlogReader`` from."""

    url: URL
    server_id: int
    database: str
    tables: dict[str, TableColumns]
    start: BinlogPosition
    heartbeat: float
    parent: int  # the parent's pid: the child ends if it is no longer its parent


@dataclass
class _Raised:
    """The last frame: the reader's error, or None when its iteration ended (after a
    statement it cannot follow past: the parent's reader ends there too)."""

    error: BaseException | None


def wkt_function(src: Any) -> Callable[[bytes], bytes]:
    """GEOMETRY from the log (SRID + WKB) -> the WKT the snapshot selects, asked of the server
    so the text is byte-for-byte ``ST_AsText``'s. ``src``: a ``Source``."""

    def ask(raw: bytes) -> bytes:
        cursor = src.raw_connection().cursor()
        try:
            srid = int.from_bytes(raw[:4], "little")
            cursor.execute("SELECT ST_AsText(ST_GeomFromWKB(UNHEX(%s), %s))", (raw[4:].hex(), srid))
            value = cursor.fetchone()[0]
        finally:
            cursor.close()
        return bytes(value)

    def wkt(raw: bytes) -> bytes:
        return surfaced(lambda: ask(raw), "turning GEOMETRY into text", src.close)

    return wkt


#: ``MIGRATOR_SYNC_READER=thread`` decodes in a thread of sync's own process instead (one core)
READER_ENV = "MIGRATOR_SYNC_READER"


def reader_kind() -> str:
    """``process`` or ``thread``, as ``MIGRATOR_SYNC_READER`` says (``process`` unset);
    anything else is refused (exit 2) before sync does anything."""
    how = os.environ.get(READER_ENV, "").strip().lower() or "process"
    if how not in ("process", "thread"):
        raise MigratorError(
            f"{READER_ENV}={how!r} is not a way sync knows to read the binary log",
            f"set {READER_ENV} to 'process' (the default) or 'thread', or unset it",
        )
    return how


def reader_for(
    url: URL,
    *,
    server_id: int,
    database: str,
    tables: dict[str, TableColumns],
    start: BinlogPosition,
    stop: threading.Event,
    heartbeat: float,
    ctl: Any,
) -> BinlogReader | ReaderProcess:
    """sync's reader: in a process of its own unless ``MIGRATOR_SYNC_READER=thread`` (or the
    machine has one core, or no interpreter to start is known); ``ctl`` (a ``Source``) turns
    GEOMETRY into text for a thread reader."""
    how = reader_kind()
    if how == "thread" or (os.cpu_count() or 1) < 2 or not sys.executable:
        return BinlogReader(
            url, server_id=server_id, database=database, tables=tables, start=start,
            stop=stop, heartbeat=heartbeat, wkt=wkt_function(ctl),
        )  # fmt: skip
    tables = {name: replace(t, encoders=()) for name, t in tables.items()}  # made there
    settings = Settings(url, server_id, database, tables, start, heartbeat, os.getpid())
    return ReaderProcess(settings, stop)


def _read(fd: int, size: int) -> bytes | bytearray | None:
    """``size`` bytes from ``fd``, or None at its end (a read may give part of them)."""
    first = os.read(fd, size)
    if len(first) == size:
        return first
    buf = bytearray(first)
    while len(buf) < size:
        chunk = os.read(fd, size - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


class ReaderProcess:
    """``BinlogReader``'s events, decoded in a child process (see the module doc)."""

    def __init__(self, settings: Settings, stop: threading.Event) -> None:
        self.settings, self.stop = settings, stop
        self.proc: subprocess.Popen[bytes] | None = None

    def __iter__(self) -> Iterator[Event]:
        for frame in self.frames():
            yield from frame

    def frames(self) -> Iterator[list[Event]]:
        """The events as the child sent them, a frame (a list, never empty) at a time."""
        proc = self.proc = subprocess.Popen(
            [sys.executable, "-m", "migrator.source.binlog.process"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, close_fds=True,
        )  # fmt: skip
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(pickle.dumps(self.settings, pickle.HIGHEST_PROTOCOL))
            proc.stdin.close()
        except OSError:
            pass  # it ended at once: its exit is reported below
        fd, loads, stop = proc.stdout.fileno(), pickle.loads, self.stop
        try:
            while True:
                head = _read(fd, _LENGTH)
                if head is None:
                    raise self._ended()
                size = int.from_bytes(head, "little")
                data = _read(fd, size)
                if data is None:
                    raise self._ended()
                frame = loads(data)
                last = frame[-1]
                if type(last) is _Raised:  # the child's last frame
                    if len(frame) > 1:
                        yield frame[:-1]
                    if last.error is not None:
                        raise last.error
                    return
                yield frame
                if stop.is_set():
                    return
        finally:  # closed by the thread that reads it: never a number reused under its read
            proc.stdout.close()

    def _ended(self) -> Exception:
        """The child's output ended without an error of its reader: it was killed or died."""
        assert self.proc is not None
        code = self.proc.wait()
        if code < 0:  # killed (out of memory?) or crashed: retried as a lost connection is
            return SourceLost(f"the binary log reader's process was killed ({_signal(-code)})")
        return SourceError(  # its own error, before it could read: starting again repeats it
            f"the binary log reader's process ended with exit code {code}",
            "its error is printed above; once it is fixed, sync resumes from the last whole "
            "transaction applied",
        )

    def close(self) -> None:
        """Kill the child (the reading thread then sees its output end and closes it)."""
        proc = self.proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def _signal(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


# -- the child ------------------------------------------------------------------------------


def _die_with_parent(parent: int) -> None:
    """Be killed when the thread that started this process ends (Linux), and end now if that
    already happened."""
    if sys.platform.startswith("linux"):
        import ctypes

        PR_SET_PDEATHSIG = 1
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(0)


def _portable(error: BaseException) -> BaseException:
    """``error`` if it survives pickling as itself, else one that says the same."""
    try:
        back = pickle.loads(pickle.dumps(error, pickle.HIGHEST_PROTOCOL))
        if type(back) is type(error) and str(back) == str(error):
            return error
    except Exception:  # an error that does not pickle is described below
        pass
    reason = lost_reason(error)
    if reason is not None:
        return SourceLost(reason)
    return SourceError(f"reading the binary log failed: {type(error).__name__}: {error}")


def _widen(fd: int) -> None:
    """A larger pipe, so that a frame is written while the parent still decodes the last."""
    with suppress(ImportError, OSError, AttributeError):  # not Linux: the pipe's own size
        import fcntl

        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)


def _send(fd: int, batch: list[Any]) -> None:
    """One frame, written whole to ``fd`` (a write may take part of it: the rest follows). A
    frame that cannot be written whole (the parent is gone) ends the process: the parent, if
    there, sees its output end."""
    try:
        data = pickle.dumps(batch, pickle.HIGHEST_PROTOCOL)
        frame = memoryview(len(data).to_bytes(_LENGTH, "little") + data)
        while frame:
            frame = frame[os.write(fd, frame) :]
    except BaseException:
        os._exit(1)
    batch.clear()


def main() -> None:
    # Ctrl-C in a terminal and a service manager's SIGTERM reach every process of the group:
    # sync stops after the transaction in hand and then ends this one (close, or its death)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    settings: Settings = pickle.load(sys.stdin.buffer)
    _die_with_parent(settings.parent)
    out = os.dup(1)
    os.dup2(2, 1)  # nothing but frames goes to the parent: a stray print goes to stderr
    _widen(out)
    batch: list[Any] = []
    rows = 0

    def flush() -> None:
        nonlocal rows
        if batch:
            _send(out, batch)
            rows = 0

    try:
        reader = _reader(settings)
        stream = reader.stream

        def before_read() -> None:  # sent before a wait, not while more is there to read
            if batch and not _readable(stream.conn):
                flush()

        stream.before_read = before_read
        for event in reader:
            batch.append(event)
            if type(event) is Transaction:
                rows += len(event.changes)
            if rows >= BATCH_ROWS or len(batch) >= BATCH:
                flush()
        batch.append(_Raised(None))
    except BaseException as e:
        batch.append(_Raised(_portable(e)))
    _send(out, batch)
    os._exit(0)  # nothing to clean up: it only read


def _readable(conn: Any) -> bool:
    """Whether the source's socket has bytes to read now."""
    sock = getattr(conn, "_sock", None)
    return sock is not None and bool(select.select([sock], [], [], 0)[0])


def _reader(settings: Settings) -> BinlogReader:
    from migrator.source.mysql import Source

    url = settings.url
    ctl = Source(str(url.render_as_string(hide_password=False)))
    return BinlogReader(
        url, server_id=settings.server_id, database=settings.database, tables=settings.tables,
        start=settings.start, heartbeat=settings.heartbeat, wkt=wkt_function(ctl),
    )  # fmt: skip


if __name__ == "__main__":  # run as -m: the module's own classes, not __main__'s, are sent
    from migrator.source.binlog.process import main as run

    run()
