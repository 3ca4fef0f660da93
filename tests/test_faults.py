"""migrate under faults (issue 10 items 1-4), each injected by the test on servers it starts:
its own redis-server restarted empty, restarted from its AOF (LOADING), flushed, stopped for
good; KILL of the reading MySQL connection; kill -9 / SIGTERM / SIGINT of a parent with
workers; a mapping or source that changed under a --resume. Each ends with verify exit 0
after the documented recovery, and leaves no process behind (tests/faults.py)."""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from migrator.commands import migrate, verify
from migrator.errors import EXIT_CONNECT, EXIT_USAGE, MigratorError, TargetLost
from migrator.progress import NullProgress
from migrator.store.checkpoint import Checkpoint
from tests.faults import (
    KillMySQLAfter,
    RedisProcess,
    descendants,
    kill_connections,
    reap,
    redis_process,
    redis_server_problem,
    wait_for,
    wait_gone,
)

pytestmark = [
    pytest.mark.skipif(bool(redis_server_problem()), reason=str(redis_server_problem())),
    pytest.mark.workers,  # faults mid-load: again in CI with MIGRATOR_WORKERS=4
]

ROWS = 20_000
MAPPING = """\
version: 1
options:
  batch_size: {batch}
  retries: {{attempts: {attempts}, backoff: 0.1, max_backoff: 1}}
tables:
  t:
    indexes: [grp]
    latest:
      - key: "t:latest"
        order_by: created
        limit: 20
"""


def make_table(db: Any, rows: int = ROWS) -> None:
    db.run(
        "CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(40), grp INT, created DATETIME,"
        " KEY ix_grp (grp));"
        f"INSERT INTO t SELECT seq, CONCAT('name ', seq), seq % 97,"
        f" TIMESTAMP('2020-01-01') + INTERVAL seq MINUTE FROM seq_1_to_{rows};"
        "ANALYZE TABLE t;"
    )


BIG = 60_000


@pytest.fixture
def big_table(mysql_db: Any) -> Any:
    make_table(mysql_db, BIG)
    return mysql_db


@pytest.fixture
def table(mysql_db: Any) -> Any:
    make_table(mysql_db)
    return mysql_db


def mapping_file(tmp_path: Path, batch: int = 20, attempts: int = 8) -> Path:
    path = tmp_path / "faults.yaml"
    path.write_text(MAPPING.format(batch=batch, attempts=attempts))
    return path


@pytest.fixture
def redis_own(tmp_path: Path) -> Iterator[RedisProcess]:
    with redis_process(tmp_path) as server:
        yield server


class Notes(NullProgress):
    """A progress that keeps every note (retries, reloads) a run shows."""

    def __init__(self) -> None:
        self.notes: list[tuple[str, str]] = []

    def note(self, table: str, message: str) -> None:
        self.notes.append((table, message))


def verified(path: Path, db: Any, url: str) -> None:
    report = verify(path, source=db.url, target=url)
    assert report.exit_code == 0, report.as_dict()


def keys_at_least(server: RedisProcess, n: int) -> Any:
    return lambda: server.dbsize() >= n


# -- item 1: no false success ---------------------------------------------------------------------


def test_target_restarted_empty_mid_run_is_reloaded(
    table: Any, redis_own: RedisProcess, tmp_path: Path
) -> None:
    path = mapping_file(tmp_path)
    notes = Notes()
    with redis_own.bounce_when(keys_at_least(redis_own, 4000), down=1.0):
        report = migrate(path, source=table.url, target=redis_own.url, progress=notes)
    assert redis_own.restarts == 1
    assert report.recoveries and "loading every table again" in report.recoveries[0]
    assert any("target lost data" in m for _, m in notes.notes), notes.notes
    assert report.tables[0].rows == ROWS  # the reload's own count: every row again
    verified(path, table, redis_own.url)


def test_target_restarted_from_its_aof_continues_from_its_checkpoint(
    table: Any, tmp_path: Path
) -> None:
    """A restart that keeps the data (AOF, fsync always) changes the run_id: the run goes on
    from the checkpoint the target holds; the restart's LOADING replies are waited out."""
    path = mapping_file(tmp_path)
    notes = Notes()
    with redis_process(tmp_path, appendonly=True, load_delay_us=500) as server:
        with server.bounce_when(keys_at_least(server, 4000), down=0.2):
            report = migrate(path, source=table.url, target=server.url, progress=notes)
        assert server.restarts == 1
        assert report.recoveries, notes.notes
        assert any("LOADING" in m for _, m in notes.notes), notes.notes  # waited out
        assert "restarted or failed over" in report.recoveries[0]
        assert "continuing from the checkpoint" in report.recoveries[0]
        assert report.tables[0].resumed_from > 0  # not reloaded from the start
        verified(path, table, server.url)


def test_target_flushed_mid_run_is_reloaded(
    table: Any, redis_own: RedisProcess, tmp_path: Path
) -> None:
    path = mapping_file(tmp_path)
    stop = threading.Event()

    def flush_once() -> None:
        wait_for("keys in the target", keys_at_least(redis_own, 4000), 60, every=0.01)
        client = redis_own.client()
        client.flushall()
        client.close()

    flusher = threading.Thread(target=flush_once, daemon=True)
    flusher.start()
    try:
        report = migrate(path, source=table.url, target=redis_own.url)
    finally:
        stop.set()
        flusher.join(60)
    assert report.recoveries and "run marker is gone" in report.recoveries[0]
    verified(path, table, redis_own.url)


def test_loss_without_retries_stops_with_exit_3_and_resume_loads_what_is_missing(
    table: Any, redis_own: RedisProcess, tmp_path: Path
) -> None:
    path = mapping_file(tmp_path, attempts=0)
    bounce = redis_own.bounce_when(keys_at_least(redis_own, 4000), down=0.3)
    with bounce, pytest.raises(MigratorError) as stopped:
        migrate(path, source=table.url, target=redis_own.url)
        assert redis_own.stopped_at, "the run ended before the fault: make the table bigger"
    assert stopped.value.exit_code == EXIT_CONNECT
    assert isinstance(stopped.value, TargetLost) or "still failing" in stopped.value.message
    assert "--resume" in (stopped.value.hint or "")
    report = migrate(path, source=table.url, target=redis_own.url, resume=True)
    assert report.tables[0].status == "done"
    verified(path, table, redis_own.url)


def test_a_checkpoint_whose_rows_the_target_lacks_is_not_trusted(
    table: Any, redis_own: RedisProcess, tmp_path: Path
) -> None:
    """A run stopped after its last batch (its table not yet marked done); then the target
    loses the rows but keeps (or gets back) the checkpoint: --resume loads the table again
    instead of trusting the checkpoint."""
    path = mapping_file(tmp_path)
    migrate(path, source=table.url, target=redis_own.url)
    client = redis_own.client()
    unfinished(client)
    saved: dict[Any, Any] = dict(client.hgetall("migrator:faults:checkpoint"))
    client.flushall()
    client.hset("migrator:faults:checkpoint", mapping=saved)
    client.close()
    report = migrate(path, source=table.url, target=redis_own.url, resume=True)
    assert report.tables[0].status == "done" and report.tables[0].rows == ROWS
    assert report.recoveries and "lacks that key" in report.recoveries[0]
    verified(path, table, redis_own.url)


@pytest.mark.parametrize("kind", ["hash", "columns"])
def test_a_checkpoint_the_target_still_vouches_for_is_trusted(
    table: Any, redis_own: RedisProcess, tmp_path: Path, kind: str
) -> None:
    path = mapping_file(tmp_path)
    path.write_text(path.read_text().replace("  t:\n", f"  t:\n    as: {kind}\n"))
    migrate(path, source=table.url, target=redis_own.url)
    client = redis_own.client()
    unfinished(client)
    client.close()
    again = migrate(path, source=table.url, target=redis_own.url, resume=True)
    assert again.tables[0].resumed_from == ROWS and not again.recoveries
    verified(path, table, redis_own.url)


def unfinished(client: Any) -> None:
    """The checkpoint of a run stopped after its last batch, before its table was done (a
    --resume refuses a finished run's: nothing is left to resume)."""
    raw = json.loads(client.hget("migrator:faults:checkpoint", "t"))
    client.hset("migrator:faults:checkpoint", "t", json.dumps({**raw, "done": False,
                "after": [str(ROWS).encode().hex()]}))  # fmt: skip


# -- item 2: transient failures are retried -------------------------------------------------------


@pytest.mark.parametrize("reader", ["asyncmy", "pymysql"])
def test_killed_mysql_connection_is_retried_from_the_last_position(
    reader: str, big_table: Any, redis_own: RedisProcess, tmp_path: Path
) -> None:
    """KILL of the reading connection, twice: read again from the last position, each retry
    on stderr (a 'note:' line where stderr is no terminal) and counted in the report; the
    same with either row reader (asyncmy, the default, and PyMySQL)."""
    path = mapping_file(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "migrator", "migrate", str(path), "--source", big_table.url,
         "--target", redis_own.url, "--batch-size", "20", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "MIGRATOR_RAW_DRIVER": reader},
    )  # fmt: skip
    killed = []
    try:
        # twice, mid-read (the whole load is ~60,100 keys; a page is 20,000 rows)
        for at in (3000, 30000):
            wait_for("keys in the target", keys_at_least(redis_own, at), 60, every=0.005)
            # a connection seen may be gone when the KILL comes (a killed one ending, or the
            # reader between two connections): until one is killed
            killed.append(wait_for("a connection killed", lambda: kill_connections(big_table),
                                   60, every=0.005))  # fmt: skip
        out, err = proc.communicate(timeout=120)
    finally:
        reap([proc.pid])
    assert all(killed), killed
    assert proc.returncode == 0, err
    notes = [line for line in err.splitlines() if line.startswith("note: t: retry ")]
    assert notes and "reading t from MySQL" in notes[0], err
    report = json.loads(out)
    # one process notices each KILL mid-read. With N workers (MIGRATOR_WORKERS) a worker may
    # have received its whole range before a KILL (a range is one page here), so only the
    # parent's connection, idle until it finishes the table, is sure to notice: once for both
    seen = 2 if int(os.environ.get("MIGRATOR_WORKERS") or 1) == 1 else 1
    assert report["retries"] == len(notes) >= seen and report["rows"] == BIG
    verified(path, big_table, redis_own.url)


@pytest.mark.parametrize("reader", ["asyncmy", "pymysql"])
def test_killed_mysql_connection_without_retries_is_exit_3_never_2(
    reader: str, big_table: Any, redis_own: RedisProcess, tmp_path: Path
) -> None:
    path = mapping_file(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "migrator", "migrate", str(path), "--source", big_table.url,
         "--target", redis_own.url, "--retries", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "MIGRATOR_RAW_DRIVER": reader},
    )  # fmt: skip
    try:
        wait_for("keys in the target", keys_at_least(redis_own, 3000), 60, every=0.005)
        assert kill_connections(big_table)
        _, err = proc.communicate(timeout=120)
    finally:
        reap([proc.pid])
    assert proc.returncode == EXIT_CONNECT, err
    flat = " ".join(err.split())  # lines wrap at 80 columns
    assert "still failing after 0 retries" in flat and "Traceback" not in err
    assert f"--target {redis_own.url} --retries 0 --resume" in err
    done = cli("migrate", str(path), "--source", big_table.url, "--target", redis_own.url,
               "--resume")  # fmt: skip
    assert done.returncode == 0, done.stderr
    verified(path, big_table, redis_own.url)


@pytest.mark.parametrize("reader", ["asyncmy", "pymysql"])
def test_a_read_cut_off_mid_result_leaves_nothing_failing_when_collected(
    reader: str, mysql_db: Any, redis_own: RedisProcess, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """A KILL while MySQL still sends a page (rows wider than the socket buffers: it cannot
    have sent it all) cuts the unbuffered read off mid-result. The cursor is let go, not
    closed; PyMySQL's cursor and result close themselves when collected and failed there on
    the dead connection: a traceback on stderr after the one-line error, whenever the
    garbage collector ran before the process ended."""
    mysql_db.run("CREATE TABLE w (id INT PRIMARY KEY, body MEDIUMTEXT);"
                 "INSERT INTO w SELECT seq, REPEAT('x', 4000) FROM seq_1_to_20000;")  # fmt: skip
    path = tmp_path / "wide.yaml"
    path.write_text("version: 1\noptions:\n  batch_size: 20\n  retries: {attempts: 0}\n"
                    "tables:\n  w: {}\n")  # fmt: skip
    monkeypatch.setenv("MIGRATOR_RAW_DRIVER", reader)
    unraisable: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    killer = KillMySQLAfter(mysql_db, 200)
    with pytest.raises(MigratorError) as stopped:
        migrate(path, source=mysql_db.url, target=redis_own.url, progress=killer)
    assert killer.killed and stopped.value.exit_code == EXIT_CONNECT, stopped.value
    assert "reading w from MySQL" in stopped.value.message
    del stopped
    gc.collect()
    assert not unraisable, [(u.exc_value, u.object) for u in unraisable]


def test_busy_script_is_waited_out(table: Any, tmp_path: Path) -> None:
    """A Lua script that runs too long makes Redis answer BUSY to everyone until SCRIPT KILL."""
    path = mapping_file(tmp_path)
    notes = Notes()
    with redis_process(tmp_path, extra=("--busy-reply-threshold", "50")) as server:
        blocked = threading.Event()

        def busy() -> None:
            wait_for("keys in the target", keys_at_least(server, 3000), 60, every=0.005)
            client = server.client(timeout=30)
            blocked.set()
            try:
                client.eval("local i = 0 while true do i = i + 1 end", 0)
            except Exception:  # killed by SCRIPT KILL: expected
                pass
            finally:
                client.close()

        def kill_script() -> None:
            blocked.wait(60)
            wait_for("migrate answered BUSY", lambda: any("BUSY" in m for _, m in notes.notes), 60)
            wait_for("SCRIPT KILL", lambda: server.client().script_kill(), 10)

        threads = [threading.Thread(target=f, daemon=True) for f in (busy, kill_script)]
        for t in threads:
            t.start()
        report = migrate(path, source=table.url, target=server.url, progress=notes)
        for t in threads:
            t.join(60)
        assert any("BUSY" in m for _, m in notes.notes), notes.notes
        assert report.tables[0].retries >= 1 and not report.recoveries
        verified(path, table, server.url)


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MIGRATOR_") or "TEST" in k}
    return subprocess.run(
        [sys.executable, "-m", "migrator", *args],
        capture_output=True, text=True, env={**env, "COLUMNS": "200"}, timeout=timeout,
    )  # fmt: skip


def test_retries_run_out_exit_3_with_a_resume_hint_that_repeats_every_option(
    table: Any, tmp_path: Path
) -> None:
    path = mapping_file(tmp_path, batch=100)
    with redis_process(tmp_path, password="s3cr#t") as server:
        target = f"redis://:s3cr%23t@127.0.0.1:{server.port}/0"
        args = ["migrate", str(path), "--source", table.url, "--target", target,
                "--tables", "t", "--batch-size", "20", "--retries", "2"]  # fmt: skip
        proc = subprocess.Popen(
            [sys.executable, "-m", "migrator", *args], stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            wait_for("keys in the target", keys_at_least(server, 2000), 60, every=0.01)
            server.stop(kill=True)  # gone for good
            _, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == EXIT_CONNECT, err
        assert "still failing after 2 retries" in " ".join(err.split()) and "Traceback" not in err
        assert "s3cr" not in err  # never the password, in no form
        # the command to copy stands whole on a line of its own (80-column wrapping)
        after = err.split("once fixed:", 1)[1]
        hint = next(line.strip() for line in after.splitlines() if line.strip())
        assert hint.startswith(f"migrator migrate {path} --source {table.url} ")
        assert f"--target 'redis://:***@127.0.0.1:{server.port}/0'" in hint
        assert "--tables t --batch-size 20 --retries 2 --resume" in hint
        assert "passwords are shown as ***: type them again" in " ".join(after.split())
        # following it (with the password typed again) continues and completes the load
        server.start()
        again = hint.split(" (passwords")[0].replace("***", "s3cr%23t").replace("'", "")
        done = cli(*again.split()[1:])
        assert done.returncode == 0, done.stderr
        verified(path, table, target)


# -- item 3: workers die with their parent --------------------------------------------------------
def start_with_workers(
    path: Path, db: Any, server: RedisProcess, *extra: str
) -> tuple[subprocess.Popen[str], list[int]]:
    """migrate --workers 3 in a subprocess, once its workers write; and the workers' pids."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "migrator", "migrate", str(path), "--source", db.url,
         "--target", server.url, "--workers", "3", "--chunk-rows", str(BIG // 3),
         "--batch-size", "20", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,  # a process group of its own, as a shell gives a job
    )  # fmt: skip
    try:
        wait_for("two worker processes", lambda: len(descendants(proc.pid)) >= 2, 60)
        wait_for("keys in the target", keys_at_least(server, 5000), 60, every=0.01)
    except BaseException:
        reap([proc.pid, *descendants(proc.pid)])
        raise
    return proc, descendants(proc.pid)


def checkpoint_ranges(server: RedisProcess) -> dict[str, Any]:
    client = server.client()
    try:
        states = Checkpoint(client, "faults").load()
    finally:
        client.close()
    return {f: s for f, s in states.items() if "#range:" in f}


# SIGTERM stops migrate through the same KeyboardInterrupt as SIGINT (cli.run): long
@pytest.mark.parametrize(
    "how", [signal.SIGKILL, pytest.param(signal.SIGTERM, marks=pytest.mark.long), signal.SIGINT]
)
def test_workers_die_with_their_parent_and_resume_completes(
    big_table: Any, redis_own: RedisProcess, tmp_path: Path, how: signal.Signals
) -> None:
    path = mapping_file(tmp_path)
    proc, workers = start_with_workers(path, big_table, redis_own)
    try:
        if how is signal.SIGINT:  # Ctrl-C: the terminal signals the whole process group
            os.killpg(proc.pid, how)
        else:
            proc.send_signal(how)
        left = wait_gone(workers, 2.0)
        assert not left, f"workers alive 2 s after {how.name} of their parent: {left}"
        proc.wait(10)
        err = proc.stderr.read() if proc.stderr else ""
        if how is not signal.SIGKILL:  # stopped like Ctrl-C: says so, and how to go on
            assert proc.returncode == 130, err
            assert "interrupted" in err
            assert f"--batch-size 20 --workers 3 --chunk-rows {BIG // 3} --resume" in err
            assert "--resume" in err and "Traceback" not in err
    finally:
        reap([proc.pid, *workers])
    ranges = checkpoint_ranges(redis_own)
    # three chunks by the row estimate; InnoDB's sampled estimate may be well below the rows
    # (MySQL: 35,000 for 60,000 seen), which gives two bigger ones (migrator/source/chunks.py)
    assert len(ranges) in (2, 3) and not all(s.done for s in ranges.values()), ranges
    done = cli("migrate", str(path), "--source", big_table.url, "--target", redis_own.url,
               "--workers", "3", "--resume")  # fmt: skip
    assert done.returncode == 0, done.stderr
    verified(path, big_table, redis_own.url)


# -- item 4: a checkpoint is bound to what it resumes ---------------------------------------------


def interrupted_run(path: Path, db: Any, server: RedisProcess) -> None:
    """A run with workers, killed mid-way (its key ranges registered, some rows loaded)."""
    proc, workers = start_with_workers(path, db, server)
    proc.kill()
    proc.wait(10)
    reap(wait_gone(workers, 2.0))


def test_resume_with_an_edited_mapping_or_another_source_is_refused(
    big_table: Any, redis_own: RedisProcess, tmp_path: Path, mysql_server_url: str
) -> None:
    path = mapping_file(tmp_path)
    interrupted_run(path, big_table, redis_own)
    edited = path  # edited in place: the same mapping name, so the same checkpoint
    edited.write_text(
        path.read_text() + '    sorted:\n      - key: "t:by:grp"\n        score: grp\n'
    )
    refused = cli("migrate", str(edited), "--source", big_table.url, "--target", redis_own.url,
                  "--resume")  # fmt: skip
    assert refused.returncode == EXIT_USAGE, refused.stderr
    assert "--resume refused" in refused.stderr and "tables.t: sorted" in refused.stderr
    assert f"migrator migrate {edited}" in refused.stderr  # how to start over
    # the same table in another database: another source
    from tests.services import create_database, drop_database, new_database_name

    other = create_database(mysql_server_url, new_database_name())
    try:
        make_table(other, 100)
        with pytest.raises(MigratorError) as e:
            migrate(path, source=other.url, target=redis_own.url, resume=True)
        assert e.value.exit_code == EXIT_USAGE
        assert f"was database '{big_table.name}'" in e.value.message
        assert f"now '{other.name}'" in e.value.message
    finally:
        drop_database(mysql_server_url, other.name)
    # the documented way out: start over
    done = cli("migrate", str(edited), "--source", big_table.url, "--target", redis_own.url)
    assert done.returncode == 0, done.stderr
    verified(edited, big_table, redis_own.url)


def test_rows_inserted_after_the_plan_are_left_to_sync(
    big_table: Any, redis_own: RedisProcess, tmp_path: Path
) -> None:
    """The last chunk is closed at the key's maximum when the run is planned: rows inserted
    later are not loaded, not even by --resume (an open-ended last chunk grows with every
    insert); verify reports them, and sync is what carries them."""
    path = mapping_file(tmp_path)
    interrupted_run(path, big_table, redis_own)
    ranges = checkpoint_ranges(redis_own)
    last = max(ranges)
    assert ranges[last].until == (str(BIG).encode(),), ranges  # closed at MAX(id)
    late = f"seq_{BIG + 1}_to_{BIG + 500}"
    big_table.run(f"INSERT INTO t SELECT seq, CONCAT('late ', seq), 1, NOW() FROM {late}")
    done = cli("migrate", str(path), "--source", big_table.url, "--target", redis_own.url,
               "--workers", "3", "--resume")  # fmt: skip
    assert done.returncode == 0, done.stderr
    client = redis_own.client()
    assert client.exists(f"t:{BIG}") == 1 and client.exists(f"t:{BIG + 1}") == 0
    client.close()
    checked = cli("verify", str(path), "--source", big_table.url, "--target", redis_own.url)
    assert checked.returncode == 1 and "500" in checked.stdout, checked.stdout


def test_moved_storm_is_waited_out(redis_cluster: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two primaries that each say the other owns a slot (a resharding caught half way):
    every write to it comes back MOVED, round after round; the batch is sent again with
    backoff (each retry noted) until the slot has one owner again."""
    from redis.cluster import RedisCluster
    from redis.crc import key_slot

    from migrator.mapping.model import Retries
    from migrator.retry import Retrying
    from migrator.store import cluster as routing
    from migrator.store.cluster import connect_any
    from migrator.store.cluster_sink import ClusterSink

    monkeypatch.setattr(routing, "REDIRECT_ROUNDS", 2)  # a storm: give up on a batch soon
    redis_cluster.flush()
    client = connect_any(redis_cluster.url)
    assert isinstance(client, RedisCluster)
    key = b"storm:1"
    slot = key_slot(key)
    owner_port = client.get_node_from_key(key).port
    other_port = next(p for p in redis_cluster.ports if p != owner_port)
    owner, other = redis_cluster.node(owner_port), redis_cluster.node(other_port)
    owner_id = owner.execute_command("CLUSTER MYID")
    other_id = other.execute_command("CLUSTER MYID")

    def settle() -> None:
        wait_for("a redirect storm noted", lambda: notes, 60)
        for node in (owner, other):
            node.execute_command("CLUSTER SETSLOT", slot, "NODE", owner_id)

    notes: list[str] = []
    restore = threading.Thread(target=settle, daemon=True)
    owner.execute_command("CLUSTER SETSLOT", slot, "NODE", other_id)  # owner: "ask other"
    restore.start()
    try:
        policy = Retries(attempts=8, backoff=0.2, max_backoff=1.0)
        ClusterSink(client, Retrying(policy, notes.append)).write([(b"SET", key, b"v")])
    finally:
        restore.join(10)
        for node in (owner, other):
            node.execute_command("CLUSTER SETSLOT", slot, "NODE", owner_id)
    assert notes and "kept redirecting" in notes[0], notes
    check = redis_cluster.node(owner_port)
    assert check.get(key) == b"v"
    for node in (owner, other, check):
        node.close()
    client.close()
    redis_cluster.flush()


def test_redis_connection_resets_are_retried_by_a_user_without_info(
    table: Any, redis_own: RedisProcess, tmp_path: Path
) -> None:
    """CLIENT KILL of the tool's connections mid-run: the batch is sent again on a new
    connection, whose identity check copes with a user that may not run INFO (the marker
    alone then guards)."""
    admin = redis_own.client()
    admin.execute_command("ACL", "SETUSER", "loader", "on", ">pw", "~*", "+@all", "-info")
    target = f"redis://loader:pw@127.0.0.1:{redis_own.port}/0"
    path = mapping_file(tmp_path)
    notes = Notes()
    killed: list[int] = []

    def resets() -> None:
        for at in (4000, 12000):
            wait_for("keys in the target", keys_at_least(redis_own, at), 60, every=0.005)
            killed.append(int(admin.execute_command("CLIENT", "KILL", "USER", "loader")))

    thread = threading.Thread(target=resets, daemon=True)
    thread.start()
    try:
        report = migrate(path, source=table.url, target=target, progress=notes)
    finally:
        thread.join(60)
        admin.close()
    assert all(killed) and len(killed) == 2, killed
    assert report.tables[0].rows == ROWS and not report.recoveries
    # a reset met mid-batch is a noted retry; one met between batches a silent reconnect
    assert all("connection lost" in m for _, m in notes.notes), notes.notes
    verified(path, table, target)
