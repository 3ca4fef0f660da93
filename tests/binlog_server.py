"""Servers with the row binary log on, for the sync and snapshot-position tests (notes/binlog.md).

The shared server on 3306 keeps its binary log off, so these tests start their own, once per
session, and stop it at the end:

* ``PrivateMariaDB``: a mariadbd in a temporary directory on a free port (removed at the end);
  its data directory is a copy of one ``mariadb-install-db`` made once (``template()``), and
  ``mariadbd --no-defaults`` starts in ~1 s; ``restart()`` stops it and
  starts it again on the same port and data directory, ``halt()`` only stops it;
* ``MySQL8Container``: ``mysql:8.0`` through testcontainers, where a Docker engine answers
  (hosted CI, laptops; not the project's machines), with GTIDs on as MySQL sites run it.

Both have an empty root password and a reader account (``reader_url``) with the grants sync
needs on either server (``READER_GRANTS``).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import pymysql
from sqlalchemy.engine import make_url

from tests.services import mysql_connect, mysql_container, url_text

MARIADBD = os.environ.get("MIGRATOR_TEST_MARIADBD", "/usr/sbin/mariadbd")

BINLOG_OPTIONS = (
    "--log-bin=mysql-bin",
    "--binlog-format=ROW",
    "--binlog-row-image=FULL",
    "--binlog-row-metadata=FULL",
)


# mysqld's command line in the MySQL 8 container (the image's entrypoint passes it on)
MYSQL8_IMAGE = "mysql:8.0"
MYSQL8_OPTIONS = (
    "--character-set-server=utf8mb4", "--log-bin", "--binlog-format=ROW",
    "--binlog-row-image=FULL", "--binlog-row-metadata=FULL", "--server-id=1",
    "--gtid-mode=ON", "--enforce-gtid-consistency=ON",
)  # fmt: skip

# what sync needs: the log stream, its status, the tables; RELOAD for the short FLUSH TABLES
# WITH READ LOCK that gives a MySQL snapshot its log position (docs/consistency.md)
READER = ("migrator_reader", "reader-pw")
READER_GRANTS = "REPLICATION SLAVE, REPLICATION CLIENT, RELOAD, SELECT"


def add_reader(url: str) -> str:
    """Create the reader account on the server at ``url`` (root); returns its URL."""
    user, password = READER
    conn = mysql_connect(url)
    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY '{password}'")
            cur.execute(f"GRANT {READER_GRANTS} ON *.* TO '{user}'@'%'")
    finally:
        conn.close()
    return url_text(make_url(url).set(username=user, password=password))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def missing() -> str | None:
    """Why no private server can be started here, or None."""
    if not Path(MARIADBD).exists():
        return f"{MARIADBD} is not installed (Debian package mariadb-server)"
    if shutil.which("mariadb-install-db") is None:
        return "mariadb-install-db is not on PATH (Debian package mariadb-server)"
    return None


def template() -> Path:
    """A data directory made by ``mariadb-install-db`` once per mariadbd binary and machine
    (``~/.cache/migrator/mariadb-template-*``), which each server copies (~0.2 s instead of
    the ~2-8 s of an install; xdist workers wait for the first under a lock)."""
    import fcntl

    binary = Path(MARIADBD).resolve()
    stamp = f"{binary.stat().st_size}-{int(binary.stat().st_mtime)}"
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "migrator"
    cache.mkdir(parents=True, exist_ok=True)
    ready = cache / f"mariadb-template-{stamp}"
    if (ready / "mysql").exists():
        return ready
    with open(cache / "mariadb-template.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (ready / "mysql").exists():
            return ready
        work = Path(tempfile.mkdtemp(prefix="mariadb-template-", dir=cache))
        done = subprocess.run(
            [
                "mariadb-install-db", "--no-defaults", f"--datadir={work / 'data'}",
                "--user=root", "--auth-root-authentication-method=normal", "--skip-test-db",
                f"--tmpdir={work}",  # its own: temporary names in /tmp collide across runs
            ],
            capture_output=True,
        )  # fmt: skip
        if done.returncode != 0:
            out = (done.stdout + done.stderr).decode(errors="replace")[-2000:]
            shutil.rmtree(work, ignore_errors=True)
            raise RuntimeError(f"mariadb-install-db failed ({done.returncode}):\n{out}")
        (work / "data").rename(ready)
        shutil.rmtree(work, ignore_errors=True)
    return ready


@dataclass
class PrivateMariaDB:
    """One mariadbd of our own: ``start()``, ``url``, ``stop()``; ``binlog=False`` starts it
    without the binary log (for the refusal test); ``server_id``, ``log_bin`` (the log's
    file names) and ``options`` for a primary and replica pair (tests/replication.py)."""

    kind: ClassVar[str] = "mariadb"
    binlog: bool = True
    server_id: int = 1
    log_bin: str = "mysql-bin"
    port: int = field(default_factory=free_port)
    dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="migrator-binlog-")))
    process: subprocess.Popen[bytes] | None = None
    reader_url: str = ""  # set by add_reader()
    options: tuple[str, ...] = ()  # more of mariadbd's command line (TLS files, say)

    @property
    def url(self) -> str:
        return f"mysql+pymysql://root@127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> None:
        """Copy a data directory from the template (unless one is there: a server halted
        before) and start."""
        data = self.dir / "data"
        if not (data / "mysql").exists():
            shutil.copytree(template(), data, symlinks=True)
        self._launch(timeout)

    def _launch(self, timeout: float) -> None:
        """Start mariadbd on the installed data directory and wait until it answers."""
        args = [
            MARIADBD, "--no-defaults", "--user=root", f"--datadir={self.dir / 'data'}",
            f"--port={self.port}", "--bind-address=127.0.0.1", f"--socket={self.dir / 'sock'}",
            f"--pid-file={self.dir / 'pid'}", f"--server-id={self.server_id}",
            "--skip-name-resolve", "--innodb-buffer-pool-size=64M",
            f"--log-error={self.dir / 'err.log'}", f"--tmpdir={self.dir}",
            *(BINLOG_OPTIONS if self.binlog else ()), *self.options,
        ]  # fmt: skip
        if self.binlog:
            args[args.index("--log-bin=mysql-bin")] = f"--log-bin={self.log_bin}"
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while True:
            try:
                pymysql.connect(host="127.0.0.1", port=self.port, user="root").close()
                return
            except pymysql.err.OperationalError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    log = (self.dir / "err.log").read_text(errors="replace")[-2000:]
                    self.stop()
                    raise RuntimeError(
                        f"mariadbd did not start on port {self.port}:\n{log}"
                    ) from None
                time.sleep(0.1)

    def halt(self, *, kill: bool = False) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 20 s; ``kill``: SIGKILL at once, a
        crash InnoDB recovers from at the next start), keeping its data directory."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def restart(self, down: float = 0.0, timeout: float = 60.0) -> None:
        """Stop the server, stay down ``down`` seconds, start it again on the same port and
        data directory (a MySQL restart as clients see it)."""
        self.halt()
        time.sleep(down)
        self._launch(timeout)

    def connect(self, database: str | None = None) -> pymysql.Connection:  # type: ignore[type-arg]
        return pymysql.connect(
            host="127.0.0.1", port=self.port, user="root", database=database,
            autocommit=True, charset="utf8mb4",
        )  # fmt: skip

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 20 s) and remove its directory."""
        self.halt()
        shutil.rmtree(self.dir, ignore_errors=True)


@dataclass
class MySQL8Container:
    """``mysql:8.0`` with the row binary log and GTIDs (``MYSQL8_OPTIONS``) through
    testcontainers: ``start()``, ``url``, ``stop()``. Needs a Docker engine
    (``tests.services.docker_problem()``)."""

    kind: ClassVar[str] = "mysql"
    url: str = ""
    reader_url: str = ""  # set by add_reader()
    stack: ExitStack = field(default_factory=ExitStack)

    def start(self) -> None:
        self.url = self.stack.enter_context(mysql_container(MYSQL8_IMAGE, MYSQL8_OPTIONS))

    def stop(self) -> None:
        self.stack.close()


@contextmanager
def running_mariadb() -> Iterator[PrivateMariaDB]:
    """A ``PrivateMariaDB`` started for the block and stopped after it (a test's own server)."""
    server = PrivateMariaDB()
    server.start()
    try:
        yield server
    finally:
        server.stop()
