"""A real Dask cluster for tests: ``dask scheduler`` and ``dask worker`` processes on loopback
ports, each in a process group of its own, every one of them killed when the test ends."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.faults import alive, descendants, wait_gone

START_SECONDS = 60


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class DaskCluster:
    directory: Path
    port: int = field(default_factory=free_port)
    scheduler: subprocess.Popen[bytes] | None = None
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def address(self) -> str:
        return f"tcp://127.0.0.1:{self.port}"

    def _start(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        log = (self.directory / f"{name}.log").open("wb")
        env = {k: v for k, v in os.environ.items() if not k.startswith("MIGRATOR_")}
        return subprocess.Popen(
            [sys.executable, "-m", "dask", *args], stdout=log, stderr=subprocess.STDOUT,
            env={**env, "DASK_DISTRIBUTED__WORKER__DAEMON": "False"}, cwd=self.directory,
            start_new_session=True,
        )  # fmt: skip

    def start_scheduler(self) -> None:
        """The scheduler, once it says it listens on its port: a free port may be taken by
        another test's process (a Dask worker of another xdist worker) before the scheduler
        binds it, and a client would then talk to that process; such a scheduler exits, and
        another port is tried."""
        for _ in range(5):
            self.scheduler = self._start(
                "scheduler", "scheduler", "--host", "127.0.0.1", "--port", str(self.port),
                "--no-dashboard",
            )  # fmt: skip
            address = self.address.encode()
            deadline = time.monotonic() + START_SECONDS
            while time.monotonic() < deadline and self.scheduler.poll() is None:
                said = (self.directory / "scheduler.log").read_bytes().splitlines()
                if any(b"Scheduler at:" in x and x.rstrip().endswith(address) for x in said):
                    return
                time.sleep(0.1)
            self.scheduler.kill()
            self.scheduler.wait()
            self.port = free_port()
        raise AssertionError(f"no Dask scheduler started:\n{self.log()}")

    def start_worker(self) -> subprocess.Popen[bytes]:
        n = len(self.workers)
        proc = self._start(
            f"worker-{n}", "worker", self.address, "--name", f"w{n}", "--nthreads", "1",
            "--no-nanny", "--no-dashboard", "--host", "127.0.0.1", "--death-timeout", "5",
            "--local-directory", str(self.directory / f"worker-{n}"),
        )  # fmt: skip
        self.workers.append(proc)
        return proc

    def wait_for_workers(self, n: int) -> None:
        from distributed import Client

        with Client(self.address, timeout=START_SECONDS, set_as_default=False) as client:
            if n:
                client.wait_for_workers(n, timeout=START_SECONDS)

    def executing(self) -> int:
        """Tasks running on the workers now, cancelled ones that still run included (a
        task's thread ends only when the task returns)."""
        from distributed import Client

        with Client(self.address, timeout=START_SECONDS, set_as_default=False) as client:
            counts = client.run(lambda dask_worker: dask_worker.state.executing_count)
        return sum(counts.values())

    def events(self, prefix: str = "migrator-progress-") -> list[Any]:
        """What the workers reported on the runs' progress topics: (table, rows or note)."""
        from distributed import Client

        with Client(self.address, timeout=START_SECONDS, set_as_default=False) as client:
            topics = client.get_events()
        return [e for t, evs in topics.items() if t.startswith(prefix) for _, e in evs]

    def rows_reported(self) -> int:
        return sum(what for _, what in self.events() if isinstance(what, int))

    def log(self) -> str:
        return "\n".join(
            f"== {p.name}\n{p.read_text(errors='replace')[-3000:]}"
            for p in sorted(self.directory.glob("*.log"))
        )

    def pids(self) -> list[int]:
        procs = [p for p in [self.scheduler, *self.workers] if p is not None]
        return [pid for p in procs for pid in [p.pid, *descendants(p.pid)]]

    def stop(self) -> None:
        """SIGKILL every process started (and their children); wait until they are gone."""
        pids = self.pids()
        for p in [self.scheduler, *self.workers]:
            if p is not None and p.poll() is None:
                with suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
        for pid in pids:
            if alive(pid):
                with suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        for p in [self.scheduler, *self.workers]:
            if p is not None:
                with suppress(subprocess.TimeoutExpired):
                    p.wait(10)
        left = wait_gone(pids, 10)
        assert not left, f"Dask processes left behind: {left}"


@contextmanager
def dask_cluster(directory: Path, workers: int = 2) -> Iterator[DaskCluster]:
    """A scheduler and ``workers`` single-threaded workers, stopped (killed) at the end."""
    directory.mkdir(parents=True, exist_ok=True)
    cluster = DaskCluster(directory)
    try:
        cluster.start_scheduler()
        for _ in range(workers):
            cluster.start_worker()
        started = time.monotonic()
        try:
            cluster.wait_for_workers(workers)
        except Exception as e:
            raise AssertionError(
                f"Dask cluster not up after {time.monotonic() - started:.0f} s: {e}\n"
                f"{cluster.log()}"
            ) from None
        yield cluster
    finally:
        cluster.stop()
