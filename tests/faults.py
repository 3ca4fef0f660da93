"""Fault injection for the tests (issue 10): servers and processes the test owns, broken on
purpose, always cleaned up.

* ``RedisProcess``: a ``redis-server`` of the test's own on a free port of 127.0.0.1, in a
  temporary directory, started in the foreground (its pid is ours). ``restart(down=...)``
  stops it and starts it again on the same port: empty (no persistence, the default), or
  reloading its append-only file (``appendonly=True``; ``load_delay_us`` slows the load so
  clients meet ``-LOADING``). ``bounce_when(...)`` does that from a thread once a condition
  holds. ``close()`` (also on ``with``) kills it for sure. Every wait is bounded.
* ``kill_connections(db)``: ``KILL`` every connection of the shared MariaDB whose current
  database is the test's own (``mig_t_<hex>``), never anyone else's.
* ``silent_server()``: a TCP port that accepts connections and says nothing (``.port``;
  ``.accepted``: the connections so far), as Redis or a web server does until sent a command.
* ``signal_when(proc, ...)``: send a process a signal once a condition holds, then collect
  its output (bounded; the process is killed if it outlives the bound).
* ``Processes``: the descendants of a pid, read from /proc, and a bounded wait for them to
  be gone (workers must die with their parent).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pymysql
import redis

from migrator.progress import NullProgress
from tests.cluster import free_ports
from tests.reaper import register

START_SECONDS = 15.0
STOP_SECONDS = 10.0


def redis_server_problem() -> str | None:
    return None if shutil.which("redis-server") else "redis-server is not on PATH"


def wait_for(what: str, check: Callable[[], object], seconds: float, every: float = 0.05) -> Any:
    """Poll ``check`` until it returns something true (errors count as not yet); bounded."""
    deadline = time.monotonic() + seconds
    last: object = None
    while True:
        try:
            got = check()
            if got:
                return got
        except (redis.RedisError, OSError, pymysql.MySQLError) as e:
            last = e
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{what} within {seconds:.1f}s (last error: {last}); meanwhile:\n{threads()}"
            )
        time.sleep(every)


def threads(frames: int = 8) -> str:
    """Where this process's other threads are (the last ``frames`` of each): what a timed-out
    wait shows, so that a background thread stuck somewhere says where."""
    names = {t.ident: t.name for t in threading.enumerate()}
    out = []
    for ident, frame in sys._current_frames().items():
        if ident == threading.get_ident():
            continue
        stack = "".join(traceback.format_stack(frame)[-frames:])
        out.append(f"thread {names.get(ident, ident)}:\n{stack}")
    return "\n".join(out) or "(no other thread)"


@dataclass
class RedisProcess:
    """A redis-server of the test's own (see the module docstring)."""

    directory: Path
    appendonly: bool = False
    load_delay_us: int = 0  # key-load-delay: microseconds per key while loading the AOF
    extra: tuple[str, ...] = ()
    password: str | None = None  # requirepass
    port: int = field(default_factory=lambda: free_ports(1)[0])
    proc: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    stopped_at: list[float] = field(default_factory=list)  # time.monotonic() of each stop

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self, timeout: float = 5.0) -> redis.Redis:
        return redis.Redis(
            host="127.0.0.1", port=self.port, password=self.password, socket_timeout=timeout,
            socket_connect_timeout=timeout, retry=redis.retry.Retry(redis.backoff.NoBackoff(), 0),
        )  # fmt: skip

    def start(self) -> RedisProcess:
        assert self.proc is None or self.proc.poll() is not None, "already running"
        args = [
            "redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
            "--save", "", "--appendonly", "yes" if self.appendonly else "no",
            "--appendfsync", "always", "--dir", str(self.directory),
            "--logfile", str(self.directory / f"redis-{self.port}.log"),
            "--daemonize", "no", *self.extra,
        ]  # fmt: skip
        if self.password:
            args += ["--requirepass", self.password]
        if self.load_delay_us:
            args += ["--key-load-delay", str(self.load_delay_us),
                     "--loading-process-events-interval-bytes", "1024"]  # fmt: skip
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        register(self.proc.pid)  # redis overwrites its environment: tests/reaper.py
        try:
            wait_for(f"redis-server on port {self.port} answering", self._answers, START_SECONDS)
        except BaseException:
            self.close()
            raise
        return self

    def _answers(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise OSError(f"redis-server exited with {self.proc.returncode}")
        c = self.client(1.0)
        try:
            try:
                return bool(c.ping())
            except redis.BusyLoadingError:
                return True  # up, loading its AOF: what the LOADING tests want
        finally:
            c.close()

    def stop(self, *, kill: bool = False) -> None:
        """SIGKILL (``kill``), else SIGTERM (Redis then writes its AOF and exits); bounded."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        self.stopped_at.append(time.monotonic())
        proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        try:
            proc.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(STOP_SECONDS)

    def restart(self, down: float = 1.0, *, kill: bool = False, empty: bool = False) -> None:
        """Stop, stay down ``down`` seconds, start again on the same port; ``empty``: without
        the data it had (its append-only file removed while it is down)."""
        self.stop(kill=kill)
        time.sleep(down)
        if empty:
            shutil.rmtree(self.directory / "appendonlydir", ignore_errors=True)
            (self.directory / "dump.rdb").unlink(missing_ok=True)
        self.restarts += 1
        self.start()

    def close(self) -> None:
        proc = self.proc
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(STOP_SECONDS)

    def __enter__(self) -> RedisProcess:
        return self if self.proc is not None else self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def dbsize(self) -> int:
        c = self.client()
        try:
            return int(c.dbsize())
        finally:
            c.close()

    @contextmanager
    def bounce_when(
        self,
        condition: Callable[[], bool],
        down: float = 1.0,
        *,
        kill: bool = False,
        times: int = 1,
        seconds: float = 60.0,
    ) -> Iterator[threading.Thread]:
        """Restart the server from a thread once ``condition()`` holds (polled), ``times``
        times; the thread is joined on exit and its failure re-raised."""  # fmt: skip
        failure: list[BaseException] = []
        stop = threading.Event()

        def run() -> None:
            try:
                for _ in range(times):
                    deadline = time.monotonic() + seconds
                    while not stop.is_set():
                        try:
                            if condition():
                                break
                        except (redis.RedisError, OSError):
                            pass
                        if time.monotonic() > deadline:
                            raise AssertionError("the bounce condition never held")
                        time.sleep(0.01)
                    if stop.is_set():
                        return
                    self.restart(down, kill=kill)
            except BaseException as e:
                failure.append(e)

        thread = threading.Thread(target=run, name="redis-bounce", daemon=True)
        thread.start()
        try:
            yield thread
        finally:
            stop.set()
            thread.join(START_SECONDS + STOP_SECONDS + down + 5)
            if failure:
                raise failure[0]


def redis_process(tmp_path: Path, **options: Any) -> RedisProcess:
    """A started RedisProcess in its own subdirectory of ``tmp_path``."""
    directory = tmp_path / f"redis-{len(list(tmp_path.glob('redis-*')))}"
    directory.mkdir()
    return RedisProcess(directory, **options).start()


# -- MySQL: KILL the test's own connections ----------------------------------------------------
def connections_of(db: Any) -> list[tuple[int, str, str]]:
    """(id, command, info) of every connection whose current database is ``db.name``
    (the test's own ``mig_t_<hex>``), except the one asking."""
    conn = pymysql.connect(**_server_args(db))
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT ID, COMMAND, COALESCE(INFO, '') FROM information_schema.PROCESSLIST "
                "WHERE DB = %s AND ID <> CONNECTION_ID()",
                (db.name,),
            )
            return [(int(i), str(c), str(q)) for i, c, q in cur.fetchall()]
    finally:
        conn.close()


def kill_connections(db: Any, *, reading_only: bool = False) -> int:
    """KILL the connections of the test's own database (``reading_only``: those running a
    SELECT); returns how many were killed. A connection KILLed before and still ending
    (``Killed``: the server's thread blocked on a client that is still reading what was
    sent) is left out: killing it again does nothing, and it is gone the next moment."""
    assert db.name.startswith("mig_t_"), "only a test's own database"
    victims = [
        i for i, command, info in connections_of(db)
        if command != "Killed"
        and (not reading_only
             or (command == "Query" and info.lstrip().upper().startswith("SELECT")))
    ]  # fmt: skip
    conn = pymysql.connect(**_server_args(db))
    killed = 0
    try:
        with conn.cursor() as cur:
            for i in victims:
                try:
                    cur.execute(f"KILL {int(i)}")
                    killed += 1
                except pymysql.MySQLError:  # gone meanwhile
                    pass
    finally:
        conn.close()
    return killed


class KillMySQLAfter(NullProgress):
    """A progress that KILLs the connections of ``db`` once ``rows`` rows were reported
    (in-process: the load's or the check's reads are cut off mid-run)."""

    def __init__(self, db: Any, rows: int) -> None:
        self.db, self.rows, self.seen, self.killed = db, rows, 0, 0

    def advance(self, table: str, n: int) -> None:
        self.seen += n
        if self.seen >= self.rows and not self.killed:
            self.killed = kill_connections(self.db)


def _server_args(db: Any) -> dict[str, Any]:
    from tests.services import mysql_connect_args

    return mysql_connect_args(db.server_url)


# -- processes ---------------------------------------------------------------------------------
def _ppid(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])


def alive(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def descendants(pid: int) -> list[int]:
    """Every living process below ``pid`` (children, their children...)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            parent = _ppid(int(entry.name))
            if parent is not None:
                children.setdefault(parent, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if alive(child):
                out.append(child)
                todo.append(child)
    return out


def wait_gone(pids: list[int], seconds: float) -> list[int]:
    """Wait up to ``seconds`` for ``pids`` to end; returns those still alive."""
    deadline = time.monotonic() + seconds
    while True:
        left = [p for p in pids if alive(p)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.02)


def reap(pids: list[int]) -> None:
    """SIGKILL whatever of ``pids`` is still alive (cleanup after a failed assertion)."""
    for p in pids:
        if alive(p):
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass


@dataclass
class SilentServer:
    port: int
    accepted: list[socket.socket] = field(default_factory=list)


@contextmanager
def silent_server() -> Iterator[SilentServer]:
    """A TCP server of the test's own that accepts connections and never sends a byte;
    closed, with every connection it accepted, at the end."""
    server = socket.create_server(("127.0.0.1", 0))
    silent = SilentServer(server.getsockname()[1])
    done = threading.Event()

    def accept() -> None:
        server.settimeout(0.1)
        while not done.is_set():
            try:
                silent.accepted.append(server.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield silent
    finally:
        done.set()
        thread.join(2)
        for conn in silent.accepted:
            conn.close()
        server.close()


def signal_when(
    proc: subprocess.Popen[str],
    what: str,
    ready: Callable[[], object],
    sig: int,
    seconds: float = 60,
) -> tuple[str, str]:
    """Send ``sig`` to ``proc`` once ``ready()`` (or once it ended by itself), then its
    (stdout, stderr); killed for sure if still running when this returns or fails."""
    try:
        wait_for(what, lambda: proc.poll() is not None or ready(), seconds)
        proc.send_signal(sig)
        return proc.communicate(timeout=seconds)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
