"""migrate --dask (issue 21 items 2-4): the chunks run as tasks of a real Dask cluster (a
``dask scheduler`` and two ``dask worker`` processes on loopback ports: the module's, or a
test's own when it kills one); the result equals a local load; a worker killed mid-run, a
task that fails for good (a key of the wrong type, a full Redis) and Ctrl-C each end as
documented. The scheduler killed: tests/test_dask_faults.py (marked ``long``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from migrator.commands import migrate, verify
from migrator.errors import (
    EXIT_CONNECT,
    EXIT_TARGET,
    EXIT_USAGE,
    ConnectError,
    MigratorError,
    TargetError,
)
from migrator.progress import NullProgress
from migrator.scaleout import dask_tasks as scaleout
from tests import test_chunks
from tests.dask_cluster import DaskCluster, dask_cluster
from tests.faults import reap, redis_process, redis_server_problem, wait_for
from tests.test_faults import MAPPING, make_table
from tests.test_workers import snapshot


@pytest.fixture(autouse=True)
def _no_local_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    """--dask and --workers exclude each other (exit 2, tested here): CI's pass with
    MIGRATOR_WORKERS=4 would otherwise turn every Dask run into that refusal."""
    monkeypatch.delenv("MIGRATOR_WORKERS", raising=False)


keyed = test_chunks.keyed  # the fixture: every kind of primary key
KEYS = test_chunks.KEYS

BIG = 40_000


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaskCluster]:
    with dask_cluster(tmp_path_factory.mktemp("dask")) as c:
        yield c


@pytest.fixture
def cluster(shared: DaskCluster) -> Iterator[DaskCluster]:
    """The module's cluster, for tests that break none of its processes; idle when the test
    ends (before its Redis database is emptied: no task of a stopped run writes there)."""
    yield shared
    wait_for("no task running on the Dask workers", lambda: shared.executing() == 0, 60,
             every=0.1)  # fmt: skip


@pytest.fixture
def own(tmp_path: Path) -> Iterator[DaskCluster]:
    """A cluster of the test's own, for tests that kill its processes."""
    with dask_cluster(tmp_path / "dask") as c:
        yield c


@pytest.fixture
def big(mysql_db: Any, tmp_path: Path) -> Path:
    make_table(mysql_db, BIG)
    path = tmp_path / "big.yaml"
    path.write_text(MAPPING.format(batch=50, attempts=8))
    return path


def keys_at_least_url(url: str, n: int) -> Any:
    client = redis.Redis.from_url(url)
    return lambda: client.dbsize() >= n


def test_every_kind_of_key_loads_on_the_cluster_as_it_does_locally(
    keyed: Path, mysql_db: Any, redis_url: str, redis_client: redis.Redis, cluster: DaskCluster
) -> None:
    local = migrate(keyed, source=mysql_db.url, target=redis_url, workers=1)
    want = snapshot(redis_client)
    before = cluster.rows_reported()
    redis_client.flushdb()
    report = migrate(keyed, source=mysql_db.url, target=redis_url, dask=cluster.address,
                     chunk_rows=300)  # fmt: skip
    assert report.exit_code == 0
    assert snapshot(redis_client) == want
    for a, b in zip(local.tables, report.tables):
        assert a.as_dict() | {"seconds": 0, "rows_per_second": 0} == b.as_dict() | {
            "seconds": 0,
            "rows_per_second": 0,
        }
    # every row was read on a Dask worker
    assert cluster.rows_reported() - before == len(KEYS) * 2000
    assert verify(keyed, source=mysql_db.url, target=redis_url).ok


def test_without_a_scheduler_exit_3_and_workers_excluded(
    keyed: Path, mysql_db: Any, redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.dask_cluster import free_port

    monkeypatch.setattr(scaleout, "CONNECT_SECONDS", 2)  # (the wait is not what is tested)
    with pytest.raises(MigratorError) as e:
        migrate(keyed, source=mysql_db.url, target=redis_url,
                dask=f"tcp://127.0.0.1:{free_port()}")  # fmt: skip
    assert e.value.exit_code == EXIT_CONNECT and "Dask scheduler" in e.value.message
    with pytest.raises(MigratorError, match="--workers and --dask exclude each other") as e:
        migrate(keyed, source=mysql_db.url, target=redis_url, dask="tcp://x:1", workers=2)
    assert e.value.exit_code == EXIT_USAGE


def test_without_the_extra_the_option_says_how_to_install(
    keyed: Path, mysql_db: Any, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # "import distributed" fails
    with pytest.raises(MigratorError) as e:
        migrate(keyed, source=mysql_db.url, target=redis_url, dask="tcp://127.0.0.1:1")
    assert e.value.exit_code == EXIT_USAGE
    assert e.value.hint is not None and "pip install 'migrator[dask]'" in e.value.hint


def test_a_scheduler_without_workers_exit_3_before_writing(
    keyed: Path, mysql_db: Any, redis_url: str, redis_client: redis.Redis, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setattr(scaleout, "CONNECT_SECONDS", 2)  # (the wait is not what is tested)
    with (
        dask_cluster(tmp_path / "lonely", workers=0) as lonely,
        pytest.raises(MigratorError, match="has no worker") as e,
    ):
        migrate(keyed, source=mysql_db.url, target=redis_url, dask=lonely.address)
    assert e.value.exit_code == EXIT_CONNECT and "dask worker" in (e.value.hint or "")
    assert redis_client.dbsize() == 0


def run_cli(*args: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MIGRATOR_") or "TEST" in k}
    return subprocess.Popen(
        [sys.executable, "-m", "migrator", "migrate", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**env, "COLUMNS": "200"}, start_new_session=True,
    )  # fmt: skip


def test_a_worker_killed_mid_run_its_chunks_run_again_elsewhere(
    big: Path, mysql_db: Any, redis_url: str, redis_client: redis.Redis, own: DaskCluster
) -> None:
    proc = run_cli(str(big), "--source", mysql_db.url, "--target", redis_url,
                   "--dask", own.address, "--chunk-rows", "4000", "--json")  # fmt: skip
    try:
        wait_for("keys in the target", keys_at_least_url(redis_url, 3000), 60, every=0.01)
        victim = own.workers[0]
        os.killpg(victim.pid, signal.SIGKILL)  # mid-chunk, whatever it held
        out, err = proc.communicate(timeout=180)
    finally:
        reap([proc.pid])
    assert proc.returncode == 0, err + own.log()
    report = json.loads(out)
    assert report["tables"][0]["rows"] == BIG  # each chunk counted once
    assert redis_client.llen("t:latest") == 20  # no duplicate list entries
    checked = verify(big, source=mysql_db.url, target=redis_url)
    assert checked.exit_code == 0, checked.as_dict()


def test_a_task_that_fails_for_good_fails_the_run_with_its_message(
    big: Path, mysql_db: Any, redis_url: str, redis_client: redis.Redis, cluster: DaskCluster
) -> None:
    redis_client.set("t:indices:grp:5", "in the way")  # WRONGTYPE for every chunk's rows
    with pytest.raises(TargetError, match="WRONGTYPE") as e:
        migrate(big, source=mysql_db.url, target=redis_url, dask=cluster.address,
                chunk_rows=4000, into_existing=True)  # fmt: skip
    assert e.value.hint and "--resume" in e.value.hint


def test_a_full_redis_fails_the_run_with_its_oom_message_not_an_endless_retry(
    big: Path, mysql_db: Any, tmp_path: Path, cluster: DaskCluster
) -> None:
    problem = redis_server_problem()
    if problem:
        pytest.skip(problem)
    extra = ("--maxmemory", "2mb", "--maxmemory-policy", "noeviction")
    with redis_process(tmp_path, extra=extra) as full:
        proc = run_cli(str(big), "--source", mysql_db.url, "--target", full.url,
                       "--dask", cluster.address, "--chunk-rows", "4000", "--no-memory-check",
                       "--json")  # fmt: skip
        try:
            out, err = proc.communicate(timeout=180)  # (an endless retry fails here)
        finally:
            reap([proc.pid])
        assert proc.returncode == EXIT_TARGET, err  # a condition of Redis (issue 27 item 3)
        failure = json.loads(out)
        assert failure["exit_code"] == EXIT_TARGET
        assert "OOM" in failure["error"] and "maxmemory" in failure["error"], failure
        assert "--resume" in failure["hint"], failure
        assert "Traceback" not in err


def test_a_second_run_on_the_same_cluster_is_not_taken_for_a_lost_target(
    keyed: Path, mysql_db: Any, tmp_path: Path, cluster: DaskCluster
) -> None:
    """A Dask worker outlives a run: the Redis client it kept must not carry the first
    run's marker into the second, whose reconnections it would then refuse."""
    problem = redis_server_problem()
    if problem:
        pytest.skip(problem)
    with redis_process(tmp_path) as server:
        first = migrate(keyed, source=mysql_db.url, target=server.url, dask=cluster.address,
                        chunk_rows=300)  # fmt: skip
        assert first.exit_code == 0 and not first.recoveries
        killer = server.client()
        try:  # every connection the workers kept is dropped: the next run reconnects
            killer.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
        finally:
            killer.close()
        second = migrate(keyed, source=mysql_db.url, target=server.url, dask=cluster.address,
                         chunk_rows=300, into_existing=True)  # fmt: skip
        assert second.exit_code == 0 and not second.recoveries, second.recoveries
        assert verify(keyed, source=mysql_db.url, target=server.url).exit_code == 0


# SIGTERM is turned into the same KeyboardInterrupt as Ctrl-C (cli.run): long
@pytest.mark.parametrize(
    "how", [signal.SIGINT, pytest.param(signal.SIGTERM, marks=pytest.mark.long)]
)
def test_ctrl_c_stops_the_tasks_on_the_cluster(
    big: Path, mysql_db: Any, redis_url: str, redis_client: redis.Redis, cluster: DaskCluster,
    how: signal.Signals,
) -> None:  # fmt: skip
    # batches of 5 rows: the load lasts long after the first 3,000 keys, even when this
    # process is slow to see them on a busy machine
    slow = big.with_name("slow.yaml")
    slow.write_text(MAPPING.format(batch=5, attempts=8))
    proc = run_cli(str(slow), "--source", mysql_db.url, "--target", redis_url,
                   "--dask", cluster.address, "--chunk-rows", "4000")  # fmt: skip
    try:
        wait_for("keys in the target", keys_at_least_url(redis_url, 3000), 60, every=0.01)
        at_signal = redis_client.dbsize()
        os.killpg(proc.pid, how)
        _, err = proc.communicate(timeout=60)
    finally:
        reap([proc.pid])
    assert proc.returncode == 130, (at_signal, err)
    assert "interrupted" in err and "--resume" in err
    # a running task notices between two batches (at most a STOP_CHECK_SECONDS apart), the
    # others were cancelled: soon no task runs on the workers, and none has loaded it all
    wait_for("no task running on the Dask workers", lambda: cluster.executing() == 0, 60,
             every=0.2)  # fmt: skip
    settled = redis_client.dbsize()
    assert cluster.executing() == 0
    assert redis_client.dbsize() == settled < BIG, (at_signal, settled, err)  # nothing writes


def test_a_stopped_run_leaves_no_callback_to_run_after_the_client_is_closed(
    cluster: DaskCluster,
) -> None:
    """A run stopped (Ctrl-C, an error) cancels its tasks; each task's callback on Dask's one
    callback thread hands its outcome to the run. One that ran after the client was closed
    waited forever for its result there, and the interpreter joins that thread at exit:
    the command had printed its error and never ended (the OOM and Ctrl-C tests above, now
    and then). ``close`` returns once every callback has run."""
    import distributed

    client = scaleout.connect(cluster.address)
    try:
        pool = scaleout.DaskPool(client, cluster.address)
        run = pool.topic[-12:]
        handed = [pool.call(time.sleep, 2, key=f"sleep-{run}-{i}") for i in range(4)]
        pool.close(cancel=True)
        assert all(f.done() for f in handed), [f.done() for f in handed]
        assert all(isinstance(f.exception(), ConnectError) for f in handed)
    finally:
        client.close()
    callbacks = distributed.Future._cb_executor  # free: an exit would not wait on it
    assert callbacks is not None and callbacks.submit(lambda: 1).result(timeout=30) == 1


def test_verify_on_the_cluster_finds_what_a_local_verify_finds(
    keyed: Path, mysql_db: Any, redis_url: str, redis_client: redis.Redis, cluster: DaskCluster
) -> None:
    migrate(keyed, source=mysql_db.url, target=redis_url, workers=1)
    clean = verify(keyed, source=mysql_db.url, target=redis_url, dask=cluster.address,
                   chunk_rows=300)  # fmt: skip
    assert clean.exit_code == 0 and clean.snapshot is None, clean.as_dict()
    assert [t.mysql_rows for t in clean.tables] == [2000] * len(KEYS)
    # a changed value, a missing row, a stale row key, a wrong counter
    redis_client.hset("num:7", "v", "changed")
    redis_client.delete("pair:3:k1046")
    redis_client.hset("num:999999", "v", "nobody")
    redis_client.set("num:id", "5")
    local = verify(keyed, source=mysql_db.url, target=redis_url)
    remote = verify(keyed, source=mysql_db.url, target=redis_url, dask=cluster.address,
                    chunk_rows=300)  # fmt: skip
    assert remote.exit_code == local.exit_code == 1
    assert [dict(t.counts) for t in remote.tables] == [dict(t.counts) for t in local.tables]
    assert sum(sum(t.counts.values()) for t in remote.tables) >= 4


def test_verify_on_the_cluster_merges_index_members_across_chunks(
    big: Path, mysql_db: Any, redis_url: str, redis_client: redis.Redis, cluster: DaskCluster
) -> None:
    migrate(big, source=mysql_db.url, target=redis_url, workers=1)
    # every index set holds members of every chunk: only the merged counts explain them
    clean = verify(big, source=mysql_db.url, target=redis_url, dask=cluster.address,
                   chunk_rows=3000)  # fmt: skip
    assert clean.exit_code == 0, clean.as_dict()
    redis_client.sadd("t:indices:grp:5", "999999")  # a member nobody explains
    redis_client.srem("t:indices:grp:6", "6")  # one missing
    redis_client.lpop("t:latest")
    local = verify(big, source=mysql_db.url, target=redis_url)
    remote = verify(big, source=mysql_db.url, target=redis_url, dask=cluster.address,
                    chunk_rows=3000)  # fmt: skip
    assert remote.exit_code == local.exit_code == 1
    assert dict(remote.tables[0].counts) == dict(local.tables[0].counts)
    assert len(remote.tables[0].counts) >= 3, remote.tables[0].counts


class Rows(NullProgress):
    def __init__(self) -> None:
        self.rows = 0

    def advance(self, table: str, rows: int) -> None:
        self.rows += rows


@pytest.mark.long  # neighbour: test_a_worker_killed_mid_run_its_chunks_run_again_elsewhere
def test_verify_on_the_cluster_survives_a_killed_worker(
    big: Path, mysql_db: Any, redis_url: str, own: DaskCluster
) -> None:
    migrate(big, source=mysql_db.url, target=redis_url, workers=1)
    seen = Rows()
    result: list[Any] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            result.append(verify(big, source=mysql_db.url, target=redis_url,
                                 dask=own.address, chunk_rows=2000, progress=seen))  # fmt: skip
        except BaseException as e:
            failure.append(e)

    def checking() -> bool:
        assert not failure, f"verify failed: {failure[0]!r}"
        return seen.rows >= 2000

    thread = threading.Thread(target=run)
    thread.start()
    try:
        wait_for("rows checked on the cluster", checking, 60, every=0.005)
        os.killpg(own.workers[0].pid, signal.SIGKILL)
        at_kill = seen.rows
    finally:
        thread.join(180)
    assert not failure, f"verify failed: {failure[0]!r}"
    assert result, "verify did not return"
    report = result[0]
    assert report.exit_code == 0, report.as_dict()
    assert at_kill < BIG // 2  # killed mid-run, chunks of both workers still to check
    assert report.tables[0].mysql_rows == BIG  # each chunk counted once


def test_verify_on_the_cluster_counts_rejected_rows_as_a_local_verify(
    mysql_db: Any, redis_url: str, tmp_path: Path, cluster: DaskCluster
) -> None:
    mysql_db.run(
        "CREATE TABLE nk (id INT PRIMARY KEY, code VARCHAR(10) NULL, v INT);"
        "INSERT INTO nk SELECT seq, IF(seq % 100 = 0, NULL, CONCAT('c', seq)), seq"
        " FROM seq_1_to_1000;"
    )
    path = tmp_path / "nulls.yaml"
    path.write_text('version: 1\ntables:\n  nk: {key: "nk:{id}:{code}", counter: false}\n')
    migrate(path, source=mysql_db.url, target=redis_url, workers=1)
    # examples are named per batch: a local pass of 150-row batches meets the same ones
    local = verify(path, source=mysql_db.url, target=redis_url, batch_size=150)
    remote = verify(path, source=mysql_db.url, target=redis_url, dask=cluster.address,
                    chunk_rows=150)  # fmt: skip
    assert remote.exit_code == local.exit_code == 1
    assert remote.tables[0].as_dict() | {"seconds": 0} == local.tables[0].as_dict() | {"seconds": 0}
    assert dict(remote.tables[0].refused) == {"NULL in a row-key column": 10}
