"""The longer faults of migrate --dask and verify --dask on real processes (issue 21 item 3),
marked ``long`` (about 15 s each on a busy machine; ``make test-long``, or
``pytest tests/test_dask_faults.py -m long``). Their neighbours in the default suite
(tests/test_dask.py): test_without_a_scheduler_exit_3_and_workers_excluded (exit 3 naming
the scheduler), test_a_task_that_fails_for_good_fails_the_run_with_its_message (the resume
hint), test_ctrl_c_stops_the_tasks_on_the_cluster (the stop check verify's tasks share).

The scheduler killed during migrate --dask or verify --dask gives exit 3 and the command
that resumes (migrate) or runs it again (verify); Ctrl-C during verify --dask stops the chunk
checks on the workers. Each test starts (and kills) its own ``dask scheduler`` and two
``dask worker`` processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from migrator.commands import migrate, verify
from migrator.errors import EXIT_CONNECT
from tests.dask_cluster import DaskCluster, dask_cluster
from tests.faults import reap, wait_for

# the fixtures big and own are test_dask.py's, imported (so the tests' arguments "redefine" them)
# ruff: noqa: F811
from tests.test_dask import BIG, big, keys_at_least_url, own  # noqa: F401

pytestmark = pytest.mark.long


@pytest.fixture(autouse=True)
def _no_local_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MIGRATOR_WORKERS", raising=False)


def cli(command: str, *args: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MIGRATOR_") or "TEST" in k}
    return subprocess.Popen(
        [sys.executable, "-m", "migrator", command, *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**env, "COLUMNS": "200"}, start_new_session=True,
    )  # fmt: skip


def finished(proc: subprocess.Popen[str], seconds: float) -> tuple[str, str]:
    try:
        return proc.communicate(timeout=seconds)
    finally:
        reap([proc.pid])


def verified(
    big: Path, mysql_db: Any, redis_url: str, own: DaskCluster, *extra: str
) -> subprocess.Popen[str]:
    """A slow verify --dask of the loaded table (one row per batch), once it has begun to
    check rows on the workers."""
    assert migrate(big, source=mysql_db.url, target=redis_url, workers=1).exit_code == 0
    proc = cli("verify", str(big), "--source", mysql_db.url, "--target", redis_url,
               "--dask", own.address, "--chunk-rows", "20000", "--batch-size", "1",
               *extra)  # fmt: skip

    def checking() -> bool:
        assert proc.poll() is None, proc.communicate()
        return own.rows_reported() >= 200

    try:
        wait_for("rows checked on the cluster", checking, 120, every=0.2)
    except BaseException:
        reap([proc.pid])
        raise
    return proc


def test_the_scheduler_killed_during_verify_exit_3_with_the_command_to_run_again(
    big: Path, mysql_db: Any, redis_url: str, own: DaskCluster
) -> None:
    proc = verified(big, mysql_db, redis_url, own, "--json")
    assert own.scheduler is not None
    os.killpg(own.scheduler.pid, signal.SIGKILL)
    out, err = finished(proc, 120)
    assert proc.returncode == EXIT_CONNECT, err
    failure = json.loads(out)
    assert "Dask scheduler" in failure["error"], failure
    again = f"migrator verify {big} --source {mysql_db.url} --target {redis_url} --batch-size 1"
    assert again in failure["hint"] and f"--dask {own.address}" in failure["hint"], failure
    assert "Traceback" not in err and "distributed" not in err


def test_ctrl_c_during_verify_stops_the_chunk_checks_on_the_workers(
    big: Path, mysql_db: Any, redis_url: str, own: DaskCluster
) -> None:
    proc = verified(big, mysql_db, redis_url, own)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = finished(proc, 60)
    assert proc.returncode == 130, err
    assert "interrupted" in err
    # the running checks stop between two batches; the chunks of 20,000 rows, checked one
    # row per batch, are far from done when they do
    wait_for("no task running on the Dask workers", lambda: own.executing() == 0, 60,
             every=0.2)  # fmt: skip
    assert own.rows_reported() < BIG


def test_the_scheduler_killed_exit_3_with_the_resume_command(
    big: Path, mysql_db: Any, redis_url: str, own: DaskCluster
) -> None:
    proc = cli("migrate", str(big), "--source", mysql_db.url, "--target", redis_url,
               "--dask", own.address, "--chunk-rows", "4000")  # fmt: skip
    try:
        wait_for("keys in the target", keys_at_least_url(redis_url, 3000), 60, every=0.01)
        assert own.scheduler is not None
        os.killpg(own.scheduler.pid, signal.SIGKILL)
        _, err = proc.communicate(timeout=120)
    finally:
        reap([proc.pid])
    assert proc.returncode == EXIT_CONNECT, err
    assert "Dask scheduler" in err and "Traceback" not in err
    assert "distributed" not in err  # the library's own log lines are not shown
    assert f"--chunk-rows 4000 --dask {own.address} --resume" in err
    own.stop()  # its workers too
    with dask_cluster(own.directory.parent / "again") as again:  # a new scheduler
        done = cli("migrate", str(big), "--source", mysql_db.url, "--target", redis_url, "--dask",
                       again.address, "--resume", "--json")  # fmt: skip
        out, err = done.communicate(timeout=180)
    assert done.returncode == 0, err
    table = json.loads(out)["tables"][0]
    assert table["resumed_from"] > 0 and table["resumed_from"] + table["rows"] == BIG
    checked = verify(big, source=mysql_db.url, target=redis_url)
    assert checked.exit_code == 0, checked.as_dict()
