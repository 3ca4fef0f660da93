"""sync's binary-log reader in a process of its own (issue 26 item 2): it is started by sync,
replaced when it dies, dies with sync, and the thread reader (``MIGRATOR_SYNC_READER=thread``)
gives the same result; a setting sync does not know is refused before anything is done."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from migrator.commands.sync import sync
from migrator.errors import EXIT_USAGE, MigratorError
from migrator.source.binlog.process import READER_ENV
from tests.binlog_server import missing
from tests.faults import redis_server_problem, wait_for
from tests.sync.helpers import cli, following, past_loading, write_random
from tests.sync.test_sync_faults import Following, _caught_up, _cli_setup, _mapping
from tests.sync.workload import SCHEMA

pytestmark = pytest.mark.skipif(
    redis_server_problem() is not None or missing() is not None,
    reason=f"{redis_server_problem() or missing()}",
)

MODULE = b"migrator.source.binlog.process"


def readers_of(parent: int) -> list[int]:
    """The live reader processes whose parent is ``parent`` (zombies are not alive)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]
        if int(ppid) == parent and state != "Z" and MODULE in cmdline:
            found.append(int(entry.name))
    return found


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSEGV], ids=["SIGKILL", "SIGSEGV"])
def test_a_killed_reader_process_is_started_again_and_sync_stays_exact(  # type: ignore[no-untyped-def]
    binlog_db, redis_url, sig
) -> None:
    """Killed (the OOM killer) or crashed (SIGSEGV in a C extension: before issue 35, exit 2
    with "run sync again", a code the service unit does not restart on)."""
    binlog_db.run(SCHEMA)
    run = Following(binlog_db, redis_url)
    wait_for("sync's reader process", lambda: len(readers_of(os.getpid())) == 1, 30)
    (first,) = readers_of(os.getpid())
    cmdline = Path(f"/proc/{first}/cmdline").read_bytes()
    assert b"@" not in cmdline and b"mysql" not in cmdline, cmdline  # the URL goes by pipe
    write_random(binlog_db, 81, 30)
    run.wait_applied(1)
    os.kill(first, sig)
    # the first reader's follower ends (what it had read is applied), then a new one starts
    wait_for("a new reader process", lambda: readers_of(os.getpid()) not in ([], [first]), 60)
    (second,) = readers_of(os.getpid())
    before = run.applied
    write_random(binlog_db, 82, 30)
    run.wait_applied(before + 1)  # read by the new reader process
    assert readers_of(os.getpid()) == [second]
    report = run.finish()
    assert any("reader's process was killed" in n for n in run.notes()), run.notes()
    assert any("reconnected" in r for r in report.recoveries), report.recoveries
    wait_for("no reader process left", lambda: not readers_of(os.getpid()), 10)
    _caught_up(binlog_db, redis_url)  # verify exit 0


def test_a_kill_9_of_sync_leaves_no_reader_process_behind(binlog_db, redis_url, tmp_path) -> None:  # type: ignore[no-untyped-def]
    binlog_db.run(SCHEMA)
    base, env = _cli_setup(binlog_db, redis_url, tmp_path)
    with following(base, env) as proc:
        wait_for("sync's reader process", lambda: len(readers_of(proc.pid)) == 1, 30)
        (reader,) = readers_of(proc.pid)
        proc.kill()
        proc.wait()
    wait_for(f"reader {reader} gone", lambda: not _alive(reader), 10)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_signal_to_the_whole_group_stops_sync_as_documented(  # type: ignore[no-untyped-def]
    binlog_db, redis_url, tmp_path, sig
) -> None:
    """A terminal's Ctrl-C and a service manager's SIGTERM reach the reader process too: sync
    still stops after the transaction in hand with exit 0, and the reader with it."""
    binlog_db.run(SCHEMA)
    base, env = _cli_setup(binlog_db, redis_url, tmp_path)
    proc = subprocess.Popen(cli(*base, "--json"), env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)  # fmt: skip
    try:
        assert proc.stdout is not None
        past_loading(proc.stdout)
        wait_for("sync's reader process", lambda: len(readers_of(proc.pid)) == 1, 30)
        (reader,) = readers_of(proc.pid)
        write_random(binlog_db, 84, 20)
        os.killpg(proc.pid, sig)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert json.loads(out.splitlines()[-1])["stopped"] == "stopped", out[-500:]
    wait_for(f"reader {reader} gone", lambda: not _alive(reader), 10)


def test_the_thread_reader_gives_the_same_result(binlog_db, redis_url, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv(READER_ENV, "thread")
    binlog_db.run(SCHEMA)
    run = Following(binlog_db, redis_url)
    write_random(binlog_db, 83, 40)
    run.wait_applied(1)
    assert readers_of(os.getpid()) == []  # decoded in this process
    run.finish()
    _caught_up(binlog_db, redis_url)  # verify exit 0


def test_a_reader_setting_sync_does_not_know_is_refused_first(  # type: ignore[no-untyped-def]
    binlog_db, redis_url, monkeypatch
) -> None:
    monkeypatch.setenv(READER_ENV, "fork")
    binlog_db.run(SCHEMA)
    with pytest.raises(MigratorError) as e:
        sync(_mapping(), source=binlog_db.url, target=redis_url, until_caught_up=True,
             server_id=8991)  # fmt: skip
    assert e.value.exit_code == EXIT_USAGE
    assert READER_ENV in str(e.value) and "'process'" in str(e.value.hint)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
