"""migrate's last rough edges under faults (issue 17 item 7), on a redis-server of the test's
own: a Redis that goes away during start-up (before the first batch) or during ``--replace``'s
removal phase is retried like one that goes away mid-load, and ``kill -9`` of a run whose
worker processes are starting leaves nothing on stderr (no traceback, no leaked-semaphore
warning).

The faults are real (the test's redis-server stopped, restarted empty or from its AOF); to
land them at a chosen moment of start-up the test wraps one of migrate's own steps so that the
fault happens just before that step runs."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import migrator.commands.startup as startup_module
import migrator.store.keys as keys_module
from migrator.commands import migrate
from tests.faults import (
    RedisProcess,
    descendants,
    reap,
    redis_process,
    redis_server_problem,
    wait_for,
    wait_gone,
)
from tests.test_faults import Notes, make_table, mapping_file, verified

pytestmark = pytest.mark.skipif(bool(redis_server_problem()), reason=str(redis_server_problem()))

ROWS = 20_000


@pytest.fixture
def table(mysql_db: Any) -> Any:
    make_table(mysql_db, ROWS)
    return mysql_db


#: restarts under way in threads, and their servers: joined and closed after each test, so a
#: test that fails before the server came back leaves no redis-server behind
_RESTARTS: list[tuple[threading.Thread, RedisProcess]] = []


@pytest.fixture(autouse=True)
def _no_server_left() -> Iterator[None]:
    yield
    while _RESTARTS:
        thread, server = _RESTARTS.pop()
        thread.join(30)
        server.close()


def gone_for(server: RedisProcess, down: float) -> None:
    """Stop the server now and start it again ``down`` seconds later, from a thread (the
    caller goes on while it is away); returns once it is stopped."""
    stops = len(server.stopped_at)
    thread = threading.Thread(target=server.restart, kwargs={"down": down}, daemon=True)
    _RESTARTS.append((thread, server))
    thread.start()
    wait_for("the server stopped", lambda: len(server.stopped_at) > stops, 10)
    proc = server.proc
    assert proc is not None
    wait_for("the server stopped", lambda: proc.poll() is not None, 10)


def before(monkeypatch: pytest.MonkeyPatch, module: Any, name: str, fault: Callable[[], None],
           times: int = 1) -> list[int]:  # fmt: skip
    """Make ``fault()`` happen just before ``module.name`` runs (the first ``times`` calls);
    returns the list of calls seen, for the test to check the moment came."""
    original = getattr(module, name)
    calls: list[int] = []

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        calls.append(len(calls) + 1)
        if len(calls) <= times:
            fault()
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapped)
    return calls


@pytest.fixture
def aof_server(tmp_path: Path) -> Iterator[RedisProcess]:
    with redis_process(tmp_path, appendonly=True) as server:
        yield server


@pytest.fixture
def plain_server(tmp_path: Path) -> Iterator[RedisProcess]:
    with redis_process(tmp_path) as server:
        yield server


# -- start-up ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("step", "persistent", "down", "seen"),
    [
        pytest.param("check_target", False, 4.0, "connection", id="check-empty"),
        # nothing is written before the check: from its AOF or empty, the same retry (long)
        pytest.param("check_target", True, 4.0, "connection", id="check-aof",
                     marks=pytest.mark.long),
        pytest.param("untrusted", True, 4.0, "connection", id="vouch-aof"),
        # restarted empty before the step (down 0: back when it runs): the marker is gone
        pytest.param("untrusted", False, 0.0, "the target lost data",
                     id="vouch-empty-marker-lost"),
    ],
)  # fmt: skip
def test_redis_gone_during_start_up_is_retried(
    table: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    step: str,
    persistent: bool,
    down: float,
    seen: str,
) -> None:
    """Redis goes away just before a step of start-up: the first check of the target's keys
    (nothing written yet), or the check of what the checkpoint vouches for (the run's marker
    and binding are written: a restart without them loses the marker). Both are retried as a
    failure mid-load is, each retry a note under "start-up"; the run ends with exit 0 and
    Redis exact. (redis-py reconnects by itself for about two seconds: a longer outage
    reaches migrate's own retries.)"""
    path = mapping_file(tmp_path)
    notes = Notes()
    with redis_process(tmp_path, appendonly=persistent) as server:
        fault = (lambda: gone_for(server, down)) if down else (lambda: server.restart(0.0))
        calls = before(monkeypatch, startup_module, step, fault)
        report = migrate(path, source=table.url, target=server.url, progress=notes)
        assert calls and server.restarts == 1
        retries = [m for t, m in notes.notes if t == "start-up" and m.startswith("retry ")]
        assert retries and "starting the run on Redis" in retries[0], notes.notes
        assert seen in retries[0], retries
        assert not [m for t, m in notes.notes if t != "start-up"], notes.notes  # no later loss
        assert report.tables[0].rows == ROWS and not report.recoveries
        verified(path, table, server.url)


def test_redis_gone_for_good_during_start_up_is_exit_3_after_the_retries(
    table: Any, plain_server: RedisProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from migrator.errors import EXIT_CONNECT, MigratorError

    path = mapping_file(tmp_path, attempts=2)
    notes = Notes()
    before(monkeypatch, startup_module, "check_target", lambda: plain_server.stop(kill=True))
    with pytest.raises(MigratorError) as stopped:
        migrate(path, source=table.url, target=plain_server.url, progress=notes)
    assert stopped.value.exit_code == EXIT_CONNECT
    assert "still failing after 2 retries" in stopped.value.message
    assert len([m for _, m in notes.notes if "retry" in m]) == 2, notes.notes


def test_redis_unreachable_at_the_first_connection_is_exit_3_at_once(
    table: Any, plain_server: RedisProcess, tmp_path: Path
) -> None:
    from migrator.errors import EXIT_CONNECT, MigratorError

    path = mapping_file(tmp_path)
    plain_server.stop(kill=True)
    notes = Notes()
    t0 = time.monotonic()
    with pytest.raises(MigratorError) as stopped:
        migrate(path, source=table.url, target=plain_server.url, progress=notes)
    assert stopped.value.exit_code == EXIT_CONNECT and not notes.notes
    # no backoff (no retry noted above): a wrong URL is said at once; the bound only catches a
    # wait of the default policy's length, with room for a loaded host
    assert time.monotonic() - t0 < 30


# -- --replace's removal phase -------------------------------------------------------------------
@pytest.mark.parametrize("persistent", [False, True], ids=["empty", "aof"])
def test_redis_gone_during_replace_removal_is_retried(
    table: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, persistent: bool
) -> None:
    """An earlier load is there; ``--replace`` removes it in UNLINK batches, and Redis goes
    away after the first batches (restarted empty, or from its AOF with the rest of the old
    keys). The removal goes on against the server that came back, the load follows, and
    Redis ends exact, with no key of the old load left over."""
    path = mapping_file(tmp_path)
    with redis_process(tmp_path, appendonly=persistent) as server:
        migrate(path, source=table.url, target=server.url)
        client = server.client()
        client.set("t:999999", "a key of a row that is no longer in MySQL")
        client.close()
        table.run("UPDATE t SET grp = grp + 1 WHERE id <= 100")  # index members that move
        monkeypatch.setattr(keys_module, "UNLINK_BATCH", 500)
        unlinks: list[int] = []
        original = keys_module.retry

        def fault_on_third_unlink(fn: Callable[[], Any], **kw: Any) -> Any:
            if "unlink" in getattr(fn, "__code__", fn.__call__).co_names:
                unlinks.append(1)
                if len(unlinks) == 3:
                    gone_for(server, 1.0)
            return original(fn, **kw)

        monkeypatch.setattr(keys_module, "retry", fault_on_third_unlink)
        notes = Notes()
        report = migrate(path, source=table.url, target=server.url, replace=True, progress=notes)
        assert len(unlinks) >= 3 and server.restarts == 1, unlinks
        assert report.recoveries, notes.notes  # the new server was met, and recovered from
        assert report.tables[0].rows == ROWS
        client = server.client()
        assert client.exists("t:999999") == 0
        client.close()
        verified(path, table, server.url)


# -- kill -9 while workers start -----------------------------------------------------------------
def spawned(proc: subprocess.Popen[str]) -> list[int]:
    """The processes below ``proc``; fails at once, with what it printed, if it ended first."""
    if proc.poll() is not None:
        out, err = proc.communicate()
        raise AssertionError(f"migrate ended ({proc.returncode}) before a worker: {out}{err}")
    return descendants(proc.pid)


def test_kill_9_while_a_worker_starts_leaves_stderr_clean(
    mysql_db: Any, plain_server: RedisProcess, tmp_path: Path
) -> None:
    """``kill -9`` of migrate at the moment its first worker process appears (the parent may
    die before it handed the worker its task), and again a little later: the workers end, and
    nothing is written to stderr after the parent's death — no traceback of a worker that
    found its parent gone, no ``resource_tracker`` warning about leaked semaphores."""
    make_table(mysql_db, 60_000)
    path = mapping_file(tmp_path)
    for delay in (0.0, 0.0, 0.0, 0.3):
        proc = subprocess.Popen(
            [sys.executable, "-m", "migrator", "migrate", str(path), "--source", mysql_db.url,
             "--target", plain_server.url, "--workers", "3", "--batch-size", "20",
             # chunks of 5,000: a worker process is needed whatever MySQL's row estimate (a
             # low one makes 60,000 rows a single chunk, which the parent's own thread reads)
             "--chunk-rows", "5000"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        )  # fmt: skip
        kids: list[int] = []
        try:
            wait_for("a process spawned", lambda p=proc: spawned(p), 60, every=0.001)
            time.sleep(delay)
            kids = descendants(proc.pid)
            proc.kill()
            proc.wait(10)
            _, err = proc.communicate(timeout=30)  # ends once every child closed stderr
            left = wait_gone(kids, 10.0)
        finally:
            reap([proc.pid, *kids])
        assert not left, f"processes alive 10 s after kill -9 of their parent: {left}"
        assert "Traceback" not in err and "leaked" not in err, err
        assert err == "", err


@pytest.mark.parametrize("parent_alive", [False, True], ids=["parent-gone", "parent-alive"])
def test_a_worker_whose_hand_over_failed_ends_quietly_only_when_its_parent_is_gone(
    parent_alive: bool,
) -> None:
    """The moment above, made exact: a worker started with nothing to read from its parent
    (the pipe closed before the hand-over). With its parent gone it ends without a word;
    with its parent alive the failure is multiprocessing's own, traceback and all."""
    import os

    read, write = os.pipe()
    os.close(write)  # the hand-over never comes
    # gone: the pid that started it is no longer its parent (it was re-parented)
    parent = os.getpid() if parent_alive else 1
    try:
        done = subprocess.run(
            [sys.executable, "-c", "from migrator.lifeline import spawned; "
             f"spawned(parent={parent}, tracker_fd=-1, pipe_handle={read})",
             "--multiprocessing-fork"],
            pass_fds=(read,), capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    finally:
        os.close(read)
    assert done.returncode == 1
    if parent_alive:
        assert "EOFError" in done.stderr
    else:
        assert done.stderr == ""
