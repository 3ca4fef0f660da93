"""A real 3-primary Redis Cluster on free local ports, for the tests (tests/test_cluster.py).

``start_cluster(tmp)`` starts three ``redis-server --cluster-enabled yes`` processes on free
ports of 127.0.0.1, joins them with ``redis-cli --cluster create`` (no replicas) and waits for
``cluster_state:ok``; ``ClusterServers.stop()`` shuts them down. ``cluster_problem()`` says
why a cluster cannot be started here (the binaries are missing), or None.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

PRIMARIES = 3


class ClusterUnavailable(Exception):
    """The binaries exist, but the cluster would not form."""


def cluster_problem() -> str | None:
    missing = [b for b in ("redis-server", "redis-cli") if shutil.which(b) is None]
    if missing:
        return f"no Redis Cluster for the tests: {' and '.join(missing)} not on PATH"
    return None


def free_ports(n: int) -> list[int]:
    """n distinct ports that are free now, whose cluster bus ports (+10000) are free too."""
    out: list[int] = []
    while len(out) < n:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port + 10000 > 65535 or port in out:
            continue
        with socket.socket() as bus:
            try:
                bus.bind(("127.0.0.1", port + 10000))
            except OSError:
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
