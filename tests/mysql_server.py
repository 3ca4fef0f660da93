"""A private Oracle MySQL server for the tests: scripts/mysql-server.sh (Debian's
``mysql-server-core`` 9.7, pinned, unpacked into a cache dir and run through its own loader).

* ``PrivateMySQL``: one ``mysqld`` on a free port with a data directory of its own (a copy of
  the script's template: ~1 s once the packages are cached; the first fetch downloads ~50 MB).
  The same interface as ``tests.binlog_server.PrivateMariaDB``: ``start()``, ``url``,
  ``stop()``, ``halt(kill=)``, ``restart(down)``, ``connect()``, ``server_id``, ``log_bin``,
  ``options`` (more of mysqld's command line), ``binlog=False`` (``--skip-log-bin``). Its
  binary log is on with GTIDs, as MySQL sites run it (the script's defaults).
* ``mysql_problem()``: why no private MySQL can be had here, or None.
* ``client_argv()``: MySQL's own command-line client (``mysql`` from the same prefix).

The cache dir is ``$MYSQL_SH_WORK``, else ``${XDG_CACHE_HOME:-~/.cache}/migrator/mysql-server``.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, ClassVar

import pymysql

from tests.binlog_server import free_port
from tests.reaper import register

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "mysql-server.sh"
FETCH_SECONDS = 600  # a cold fetch downloads ~50 MB; later ones unpack nothing


@cache
def _fetched() -> tuple[str | None, str]:
    """(None, the prefix) once the script has the packages unpacked, else (the reason, "")."""
    if shutil.which("dpkg-deb") is None:
        return "dpkg-deb is missing (scripts/mysql-server.sh needs a Debian system)", ""
    try:
        done = subprocess.run(
            ["bash", str(SCRIPT), "fetch"], capture_output=True, timeout=FETCH_SECONDS
        )
    except subprocess.TimeoutExpired:
        return f"scripts/mysql-server.sh fetch took over {FETCH_SECONDS} s", ""
    if done.returncode != 0:
        err = done.stderr.decode(errors="replace").strip()[-1500:]
        return f"scripts/mysql-server.sh fetch failed ({done.returncode}): {err}", ""
    return None, done.stdout.decode().strip()


def mysql_problem() -> str | None:
    """Why no private MySQL can be started here, or None (fetches the packages once)."""
    return _fetched()[0]


def client_argv() -> list[str]:
    """MySQL's ``mysql`` client of the script's prefix, through the prefix's loader."""
    problem, prefix = _fetched()
    if problem:
        raise RuntimeError(problem)
    root = Path(prefix)
    return [
        str(root / "usr/lib64/ld-linux-x86-64.so.2"), "--inhibit-cache",
        "--library-path", str(root / "usr/lib/x86_64-linux-gnu"), str(root / "usr/bin/mysql"),
    ]  # fmt: skip


@dataclass
class PrivateMySQL:
    """One Oracle MySQL of our own (see the module's docstring)."""

    kind: ClassVar[str] = "mysql"
    binlog: bool = True
    server_id: int = 1
    log_bin: str = "binlog"
    port: int = field(default_factory=free_port)
    dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="migrator-mysql-")))
    reader_url: str = ""  # set by add_reader()
    options: tuple[str, ...] = ()  # more of mysqld's command line

    @property
    def url(self) -> str:
        return f"mysql+pymysql://root@127.0.0.1:{self.port}"

    @property
    def data(self) -> Path:
        return self.dir / "data"

    @property
    def pid(self) -> int | None:
        try:
            return int((self.dir / "data.pid").read_text().strip())
        except (OSError, ValueError):
            return None

    def _script(self, *command: str, timeout: float = 120) -> subprocess.CompletedProcess[bytes]:
        argv = [
            "bash", str(SCRIPT), "--port", str(self.port), "--data", str(self.data),
            "--server-id", str(self.server_id), *command,
        ]  # fmt: skip
        return subprocess.run(argv, capture_output=True, timeout=timeout)

    def start(self, timeout: float = 120.0) -> None:
        """Start on this data directory (a new one is copied from the template)."""
        problem = mysql_problem()
        if problem:
            raise RuntimeError(problem)
        # a session that ends without its teardown (a second Ctrl-C) stops it all the same
        atexit.register(self.stop)
        extra = [f"--log-bin={self.log_bin}"] if self.binlog else ["--skip-log-bin"]
        done = self._script("start", "--", *extra, *self.options, timeout=timeout)
        if done.returncode != 0:
            log = (
                (self.dir / "data.err").read_text(errors="replace")[-2000:]
                if (self.dir / "data.err").exists()
                else ""
            )
            err = done.stderr.decode(errors="replace")[-1500:]
            raise RuntimeError(f"mysqld did not start on port {self.port}: {err}\n{log}")
        self._wait(timeout)
        if self.pid is not None:
            register(self.pid)  # setsid'd by the script: the run's watcher kills it if we die

    def _wait(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                pymysql.connect(host="127.0.0.1", port=self.port, user="root").close()
                return
            except pymysql.err.OperationalError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"mysqld on port {self.port} does not answer") from None
                time.sleep(0.1)

    def halt(self, *, kill: bool = False) -> None:
        """Stop the server (SIGTERM; ``kill``: SIGKILL, a crash InnoDB recovers from at the
        next start), keeping its data directory."""
        self._script("kill" if kill else "stop")

    def restart(self, down: float = 0.0, timeout: float = 120.0) -> None:
        """Stop the server, stay down ``down`` seconds, start it again on the same port and
        data directory."""
        self.halt()
        time.sleep(down)
        self.start(timeout)

    def signal(self, sig: signal.Signals) -> None:
        """Send ``sig`` to mysqld (SIGSTOP / SIGCONT: a server that hangs)."""
        pid = self.pid
        if pid is not None:
            os.kill(pid, sig)

    def connect(self, database: str | None = None) -> pymysql.Connection[Any]:
        return pymysql.connect(
            host="127.0.0.1", port=self.port, user="root", database=database,
            autocommit=True, charset="utf8mb4",
        )  # fmt: skip

    def stop(self) -> None:
        """Stop the server and remove its directory (once: later calls do nothing)."""
        if not self.dir.exists():
            return
        done = self._script("stop")
        if b"not running" in done.stderr and (self.dir / "data.err").exists():
            # it died before its time: what it said, before the directory goes
            tail = (self.dir / "data.err").read_text(errors="replace")[-3000:]
            sys.stderr.write(f"\nmysqld on port {self.port} had stopped by itself:\n{tail}\n")
        shutil.rmtree(self.dir, ignore_errors=True)
