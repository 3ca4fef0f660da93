"""Servers die with the test run that started them, however it ends (issue 34 item 2).

A test run's first pytest process (the controller; with xdist, the workers are its children)
puts a token of its own in ``PYTEST_RUN_OWNER`` before it starts anything, and starts this
module as a watcher in a session of its own::

    python -m tests.reaper PID TOKEN

The watcher knows the run's processes three ways:

* the token: every process the run starts inherits it in its environment (xdist workers,
  private ``mysqld``/``mariadbd`` even once they left the process tree, Dask schedulers and
  workers, ``migrator`` commands);
* the process tree: every POLL_SECONDS it notes each descendant of PID (with its start time,
  so a reused pid is never taken for it): this finds ``redis-server`` and ``valkey-server``,
  which overwrite their environment with their process title;
* a register: a server that daemonizes (a Cluster node, scripts/redis-server.sh's servers)
  leaves the tree at once, so whoever starts one calls :func:`register` with its pid.

When PID is gone — a normal end, Ctrl-C, or ``kill -9`` that left no time for a fixture's
teardown — the watcher kills all of them that still run, until none is left, and exits. A run
inside a run (a test that starts pytest) appends its token to the inherited one
(``outer:inner``), so the outer watcher reaps the inner run's processes too.

Linux only (it reads ``/proc``); elsewhere nothing is started and teardowns alone clean up.
The variable's name does not start with ``MIGRATOR_``: some tests hand their children an
environment without those (tests/dask_cluster.py).
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

TOKEN_ENV = "PYTEST_RUN_OWNER"
REGISTER_ENV = "PYTEST_RUN_PIDS"  # the register's file: "pid start-time" lines
PROC = Path("/proc")
POLL_SECONDS = 2.0  # the tree walk reads every /proc/PID/stat: ~1% of a core at 0.5 s


def supported() -> bool:
    return sys.platform.startswith("linux") and PROC.is_dir()


def owned_by(token: str) -> list[int]:
    """The processes whose environment carries ``token`` in ``PYTEST_RUN_OWNER``."""
    prefix = f"{TOKEN_ENV}=".encode()
    found = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:  # gone, or not ours to read
            continue
        for var in environ.split(b"\0"):
            if var.startswith(prefix) and token.encode() in var[len(prefix) :].split(b":"):
                found.append(int(entry.name))
                break
    return found


def stat_of(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time in clock ticks) of ``pid``, or None when it is gone (or a
    zombie: it has ended, and only waits for its parent to read its status)."""
    try:
        raw = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()  # after "pid (comm) "
    if fields[0] == "Z":
        return None
    return int(fields[1]), int(fields[19])


def descendants(root: int) -> dict[int, int]:
    """Every process under ``root`` now: pid -> start time."""
    children: dict[int, list[tuple[int, int]]] = {}
    for entry in PROC.iterdir():
        if entry.name.isdigit() and (st := stat_of(int(entry.name))) is not None:
            children.setdefault(st[0], []).append((int(entry.name), st[1]))
    found: dict[int, int] = {}
    todo = [root]
    while todo:
        for pid, started in children.get(todo.pop(), ()):
            if pid not in found:
                found[pid] = started
                todo.append(pid)
    return found


def register(pid: int) -> None:
    """Note a server that left the process tree (daemonized) so the watcher kills it too."""
    path = os.environ.get(REGISTER_ENV)
    st = stat_of(pid)
    if path and st is not None:
        with open(path, "a") as f:
            f.write(f"{pid} {st[1]}\n")


def registered() -> dict[int, int]:
    path = os.environ.get(REGISTER_ENV)
    try:
        lines = Path(path).read_text().split() if path else []
    except OSError:
        return {}
    return dict(zip(map(int, lines[0::2]), map(int, lines[1::2])))


def command_of(pid: int) -> str:
    try:
        raw = (PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return "?"
    return raw.replace(b"\0", b" ").decode(errors="replace").strip() or "?"


def reap(token: str, known: dict[int, int], seconds: float = 30.0) -> list[str]:
    """Kill every process of the token and every known one (pid -> start time) still running
    (SIGKILL: a teardown had its chance) until two sweeps in a row find none; returns the
    commands killed."""
    killed: list[str] = []
    quiet = 0
    deadline = time.monotonic() + seconds
    while quiet < 2 and time.monotonic() < deadline:
        known.update(registered())
        known.pop(os.getpid(), None)  # the watcher is a child of the run too
        alive = [p for p, started in known.items() if (st := stat_of(p)) and st[1] == started]
        pids = sorted(set(owned_by(token)) | set(alive))
        quiet = 0 if pids else quiet + 1
        for pid in pids:
            command = command_of(pid)
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(command)
            except ProcessLookupError:
                pass
        time.sleep(0.1)
    return killed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def watch(pid: int, token: str, pipe: int) -> None:
    """Wait until ``pid`` is gone (its end of ``pipe`` closed, or it no longer exists), then
    reap the run's processes."""
    known: dict[int, int] = {}
    while _alive(pid):
        known.update(descendants(pid))
        ready, _, _ = select.select([pipe], [], [], POLL_SECONDS)
        if ready and not os.read(pipe, 4096):
            break  # the run closed its end: it exited (a forked child may still hold a copy)
    killed = reap(token, known)
    path = os.environ.get(REGISTER_ENV)
    if path:
        Path(path).unlink(missing_ok=True)
    if killed:
        shown = ", ".join(sorted({c[:80] for c in killed}))[:600]
        print(
            f"tests/reaper.py: the test run (pid {pid}) ended; killed {len(killed)} process(es)"
            f" it left behind: {shown}",
            file=sys.stderr,
        )


def start_watcher() -> None:
    """In the controller: give the run a token and start its watcher (once per run)."""
    if not supported():
        return
    token = uuid.uuid4().hex[:12]
    inherited = os.environ.get(TOKEN_ENV)
    os.environ[TOKEN_ENV] = f"{inherited}:{token}" if inherited else token
    os.environ[REGISTER_ENV] = os.path.join(tempfile.gettempdir(), f"pytest-run-{token}.pids")
    read_end, write_end = os.pipe()  # the write end stays here, not inherited (PEP 446)
    env = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
    subprocess.Popen(
        [sys.executable, "-m", "tests.reaper", str(os.getpid()), token, str(read_end)],
        pass_fds=(read_end,), env=env, start_new_session=True,
        cwd=Path(__file__).resolve().parent.parent, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    os.close(read_end)
    _keep.append(write_end)


_keep: list[int] = []  # the write end of the watcher's pipe, open until this process ends


if __name__ == "__main__":
    watch(int(sys.argv[1]), sys.argv[2], int(sys.argv[3]))
