"""A private MariaDB with the row binary log on, for the sync tests (notes/binlog.md).

The shared server on 3306 keeps its binary log off, so these tests start their own server
in a temporary directory on a free port, once per session, and stop it (and remove the
directory) at the end. ``mariadb-install-db`` + ``mariadbd --no-defaults`` take ~2 s.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pymysql

MARIADBD = os.environ.get("MIGRATOR_TEST_MARIADBD", "/usr/sbin/mariadbd")

BINLOG_OPTIONS = (
    "--log-bin=mysql-bin",
    "--binlog-format=ROW",
    "--binlog-row-image=FULL",
    "--binlog-row-metadata=FULL",
)


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


@dataclass
class PrivateMariaDB:
    """One mariadbd of our own: ``start()``, ``url``, ``stop()``; ``binlog=False`` starts it
    without the binary log (for the refusal test)."""

    binlog: bool = True
    port: int = field(default_factory=free_port)
    dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="migrator-binlog-")))
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"mysql+pymysql://root@127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> None:
        data = self.dir / "data"
        done = subprocess.run(
            [
                "mariadb-install-db", "--no-defaults", f"--datadir={data}", "--user=root",
                "--auth-root-authentication-method=normal", "--skip-test-db",
            ],
            capture_output=True,
        )  # fmt: skip
        if done.returncode != 0:
            out = (done.stdout + done.stderr).decode(errors="replace")[-2000:]
            raise RuntimeError(f"mariadb-install-db failed ({done.returncode}):\n{out}")
        args = [
            MARIADBD, "--no-defaults", "--user=root", f"--datadir={data}", f"--port={self.port}",
            "--bind-address=127.0.0.1", f"--socket={self.dir / 'sock'}",
            f"--pid-file={self.dir / 'pid'}", "--server-id=1", "--skip-name-resolve",
            "--innodb-buffer-pool-size=64M", f"--log-error={self.dir / 'err.log'}",
            *(BINLOG_OPTIONS if self.binlog else ()),
        ]  # fmt: skip
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

    def connect(self, database: str | None = None) -> pymysql.Connection:  # type: ignore[type-arg]
        return pymysql.connect(
            host="127.0.0.1", port=self.port, user="root", database=database,
            autocommit=True, charset="utf8mb4",
        )  # fmt: skip

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 20 s) and remove its directory."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None
        shutil.rmtree(self.dir, ignore_errors=True)
