"""Servers die with the run that started them (tests/reaper.py): a real pytest run that starts
a server of every kind (tests/killed_run.py) is killed with ``kill -9`` (pytest alone, or its
whole process group with xdist workers) or interrupted with Ctrl-C, and afterwards none of its
servers is left, nor any other process that carries its token."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.reaper import TOKEN_ENV, command_of, owned_by, stat_of, supported

REPO = Path(__file__).resolve().parent.parent

pytestmark = [
    pytest.mark.skipif(not supported(), reason="the watcher reads /proc (Linux)"),
    pytest.mark.integration,
]


def _start_run(tmp_path: Path, token: str, *extra: str) -> subprocess.Popen[bytes]:
    inherited = os.environ.get(TOKEN_ENV)
    env = {
        **os.environ,
        TOKEN_ENV: f"{inherited}:{token}" if inherited else token,
        "MIGRATOR_KILLED_RUN_DIR": str(tmp_path),
        "MIGRATOR_TEST_ENGINES": "mariadb",  # binlog_server's private mariadbd; oracle_mysql asked
    }
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra,
         "tests/killed_run.py", "--basetemp", str(tmp_path / "base")],
        cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,  # a process group of its own, as a terminal gives a job
    )  # fmt: skip


def _servers(run: subprocess.Popen[bytes], tmp_path: Path) -> dict[str, dict[int, int]]:
    """kind -> {pid: start time} of the run's servers, once they are all up."""
    deadline = time.monotonic() + 240
    ready = tmp_path / "ready"
    while not ready.exists():
        assert run.poll() is None, f"the run ended ({run.returncode}) before its servers were up"
        assert time.monotonic() < deadline, "the run's servers were not up within 240 s"
        time.sleep(0.2)
    found: dict[str, dict[int, int]] = {}
    for kind, pids in json.loads(ready.read_text()).items():
        found[kind] = {pid: st[1] for pid in pids if (st := stat_of(pid)) is not None}
        assert found[kind] and len(found[kind]) == len(pids), f"{kind} not running: {pids}"
    return found


def _still_running(servers: dict[str, dict[int, int]], token: str, seconds: float) -> list[str]:
    def left() -> list[str]:
        same = [
            f"{kind}: {command_of(pid)[:100]}"
            for kind, pids in servers.items()
            for pid, started in pids.items()
            if (st := stat_of(pid)) is not None and st[1] == started
        ]
        return same + [f"token: {command_of(pid)[:100]}" for pid in owned_by(token)]

    deadline = time.monotonic() + seconds
    while (now := left()) and time.monotonic() < deadline:
        time.sleep(0.2)
    return now


@pytest.mark.parametrize(
    ("how", "extra"),
    [
        ("kill -9 of pytest", ()),
        ("kill -9 of the process group, xdist workers included", ("-n", "2")),
        ("Ctrl-C", ()),
    ],
)
def test_a_killed_run_leaves_no_server_behind(
    tmp_path: Path, how: str, extra: tuple[str, ...]
) -> None:
    if extra and not _has_xdist():
        pytest.skip("pytest-xdist is not installed")
    token = uuid.uuid4().hex[:12]
    run = _start_run(tmp_path, token, *extra)
    servers: dict[str, dict[int, int]] = {}
    try:
        servers = _servers(run, tmp_path)
        if how == "kill -9 of pytest":
            run.kill()
        elif how.startswith("kill -9"):
            os.killpg(run.pid, signal.SIGKILL)
        else:
            os.killpg(run.pid, signal.SIGINT)  # what a terminal's Ctrl-C sends the job
        left = _still_running(servers, token, 45)
        assert not left, f"after {how}, still running: {left}"
    finally:
        for pid in [*owned_by(token), *(p for pids in servers.values() for p in pids)]:
            if stat_of(pid) is not None:
                os.kill(pid, signal.SIGKILL)
        run.wait(30)


def _has_xdist() -> bool:
    try:
        import xdist  # noqa: F401
    except ImportError:
        return False
    return True
