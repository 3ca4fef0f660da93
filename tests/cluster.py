"""A real 3-primary Redis Cluster on free local ports, for the tests (tests/test_cluster.py).

``start_cluster(tmp)`` starts three ``redis-server --cluster-enabled yes`` processes on free
ports of 127.0.0.1, joins them with ``redis-cli --cluster create`` (no replicas) and waits for
``cluster_state:ok``; ``ClusterServers.stop()`` shuts them down. ``cluster_problem()`` says
why a cluster cannot be started here (the binaries are missing), or None.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from tests.reaper import register

PRIMARIES = 3


class ClusterUnavailable(Exception):
    """The binaries exist, but the cluster would not form."""


def cluster_problem() -> str | None:
    missing = [b for b in ("redis-server", "redis-cli") if shutil.which(b) is None]
    if missing:
        return f"no Redis Cluster for the tests: {' and '.join(missing)} not on PATH"
    return None


#: ``FIRST-LAST``: the ports the tests' own servers take (a session beside others on one machine
#: keeps to its range); unset: any free port the system gives
PORTS_ENV = "MIGRATOR_TEST_REDIS_PORTS"
_next_in_range = 0


def _bindable(port: int) -> bool:
    """Nothing listens on ``port`` (a port in TIME_WAIT counts as free: redis-server sets
    SO_REUSEADDR too)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def port_range() -> range | None:
    """The range ``MIGRATOR_TEST_REDIS_PORTS`` names, or None."""
    text = os.environ.get(PORTS_ENV, "").strip()
    if not text:
        return None
    first, _, last = text.partition("-")
    try:
        ports = range(int(first), int(last or first) + 1)
    except ValueError:
        raise ValueError(f"{PORTS_ENV}={text!r}: write FIRST-LAST, e.g. 6480-6499") from None
    if not ports or ports[0] < 1 or ports[-1] + 10000 > 65535:
        raise ValueError(f"{PORTS_ENV}={text!r}: write FIRST-LAST, with LAST + 10000 <= 65535")
    return ports


def free_ports(n: int) -> list[int]:
    """n distinct ports that are free now, whose cluster bus ports (+10000) are free too:
    taken in turn from ``MIGRATOR_TEST_REDIS_PORTS`` when set, else given by the system."""
    global _next_in_range
    ports = port_range()
    out: list[int] = []
    tried = 0
    while len(out) < n:
        if ports is not None:
            if tried >= len(ports):
                raise OSError(f"{PORTS_ENV}: fewer than {n} free ports in {ports[0]}-{ports[-1]}")
            port = ports[_next_in_range % len(ports)]
            _next_in_range += 1
            tried += 1
            if port in out or not _bindable(port):
                continue
        else:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            if port + 10000 > 65535 or port in out:
                continue
        if not _bindable(port + 10000):
            continue
        out.append(port)
    return out


@dataclass
class ClusterServers:
    ports: list[int]
    directory: Path
    started: list[int] = field(default_factory=list)

    @property
    def url(self) -> str:
        """A plain redis:// URL of one node (the tool detects the cluster)."""
        return f"redis://127.0.0.1:{self.ports[0]}"

    @property
    def seeds_url(self) -> str:
        return "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in self.ports)

    def node(self, port: int) -> redis.Redis:
        return redis.Redis(
            host="127.0.0.1", port=port, socket_timeout=10, retry=Retry(NoBackoff(), 0)
        )

    def pid(self, port: int) -> int:
        client = self.node(port)
        try:
            return int(client.info("server")["process_id"])
        finally:
            client.close()

    def flush(self) -> None:
        for port in self.ports:
            client = self.node(port)
            try:
                client.flushall()
            finally:
                client.close()

    def stop(self) -> None:
        for port in self.started:
            client = self.node(port)
            try:
                client.shutdown(nosave=True)
            except (redis.ConnectionError, redis.ResponseError):
                pass
            finally:
                client.close()
        self.started = []


def _wait(what: str, check: object, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    last: object = None
    while time.monotonic() < deadline:
        try:
            if check():  # type: ignore[operator]
                return
        except (redis.ConnectionError, redis.ResponseError, OSError) as e:
            last = e
        time.sleep(0.1)
    raise ClusterUnavailable(f"{what} within {seconds:.0f}s (last error: {last})")


def start_cluster(directory: Path) -> ClusterServers:
    """Start and join three primaries; raises ClusterUnavailable when they do not form."""
    servers = ClusterServers(free_ports(PRIMARIES), directory)
    try:
        for port in servers.ports:
            subprocess.run(
                ["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                 "--cluster-enabled", "yes", "--cluster-config-file", f"nodes-{port}.conf",
                 "--save", "", "--appendonly", "no", "--daemonize", "yes",
                 "--dir", str(directory), "--logfile", str(directory / f"redis-{port}.log")],
                check=True, capture_output=True, timeout=30,
            )  # fmt: skip
            servers.started.append(port)
        for port in servers.ports:
            _wait(f"redis-server on port {port} did not answer", servers.node(port).ping, 20)
            register(servers.pid(port))  # daemonized: the run's watcher kills it if we die
        done = subprocess.run(
            ["redis-cli", "--cluster", "create",
             *(f"127.0.0.1:{p}" for p in servers.ports),
             "--cluster-replicas", "0", "--cluster-yes"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        if done.returncode != 0:
            raise ClusterUnavailable(f"redis-cli --cluster create failed: {done.stdout[-500:]}")

        def formed() -> bool:
            for port in servers.ports:
                info = servers.node(port).execute_command("CLUSTER", "INFO")
                text = info.decode() if isinstance(info, bytes) else str(info)
                if "cluster_state:ok" not in text:
                    return False
            return True

        _wait("the cluster did not reach cluster_state:ok", formed, 30)
    except (subprocess.SubprocessError, OSError) as e:
        servers.stop()
        raise ClusterUnavailable(f"could not start redis-server: {e}") from None
    except BaseException:
        servers.stop()
        raise
    return servers
