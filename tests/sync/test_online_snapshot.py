"""Online, resumable per-table snapshots inside ``sync`` (issue 19 item 2;
sync/online_snapshot.py): a table re-read chunk by chunk while random writes from several
seeds go on and every other table keeps following; ``kill -9`` in the middle resumes at the
chunk it was at. Each test ends in ``verify`` exit 0 after ``--until-caught-up``."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import redis

from migrator.commands import verify
from migrator.commands.sync import sync
from migrator.errors import MigratorError
from migrator.mapping.loader import parse_mapping
from migrator.sync.figures import SyncFigures
from tests.faults import wait_for
from tests.sync.helpers import log_base
from tests.sync.workload import MAPPING, SCHEMA, Writer

_ids = iter(range(9100, 9400))
STATE = "migrator:synctest:sync"


def _mapping():  # type: ignore[no-untyped-def]
    return parse_mapping(MAPPING, name="synctest")


def _verify(db, redis_url: str) -> None:  # type: ignore[no-untyped-def]
    report = verify(_mapping(), source=db.url, target=redis_url)
    assert report.exit_code == 0, report.as_dict()


def _bulk(db, n: int) -> None:  # type: ignore[no-untyped-def]
    """``n`` more emp rows (every structure of the mapping touched) and a tag for most."""
    rng = random.Random(n)
    conn = db.connect(client_flag=0)
    try:
        cur = conn.cursor()
        rows = [
            (f"bulk{i}@x", f"bulk{i}", rng.choice([1, 2, 3, None]),
             rng.choice(["boss", "dev", "ops", None]), rng.choice([None, f"{i % 997}.25"]),
             f"2022-0{1 + i % 9}-1{i % 10} 10:00:00.{i % 1000:03d}", None)
            for i in range(n)
        ]  # fmt: skip
        cur.executemany(
            "INSERT INTO emp (email, login, dept_id, title, salary, hired, note) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s)",
            rows,
        )
        cur.execute("INSERT IGNORE INTO tag SELECT id, 'bulk' FROM emp WHERE id % 3 = 0")
        conn.commit()
    finally:
        conn.close()


def _writers(db, seeds, steps: int, errors: list[BaseException]) -> list[threading.Thread]:  # type: ignore[no-untyped-def]
    def write(seed: int) -> None:
        conn = db.connect(client_flag=0)
        try:
            w = Writer(conn, seed)
            for _ in range(steps):
                w.step()
        except BaseException as e:
            errors.append(e)
        finally:
            conn.close()

    threads = [threading.Thread(target=write, args=(s,)) for s in seeds]
    for t in threads:
        t.start()
    return threads


def test_resnapshot_while_writes_go_on(binlog_db, redis_url: str) -> None:  # type: ignore[no-untyped-def]
    binlog_db.run(SCHEMA)
    _bulk(binlog_db, 3000)
    sync(_mapping(), source=binlog_db.url, target=redis_url, until_caught_up=True,
         server_id=next(_ids))  # fmt: skip
    client = redis.Redis.from_url(redis_url)
    client.hset("emp:1", "email", "damaged")  # the re-snapshot replaces what was there
    client.hset("emp:999999", "email", "stale")  # and removes what no row explains
    errors: list[BaseException] = []
    writers = _writers(binlog_db, (51, 52, 53), 120, errors)
    try:
        report = sync(_mapping(), source=binlog_db.url, target=redis_url, until_caught_up=True,
                      server_id=next(_ids), resnapshot_tables=("emp", "tag"),
                      chunk_rows=250)  # fmt: skip
    finally:
        for w in writers:
            w.join()
    assert not errors, errors
    done, tags = report.resnapshots  # tag: a composite key with text, and no row hash
    # the writers delete at most one emp row a step (120 steps each) while it is read
    assert done.table == "emp" and done.rows >= 3000 - 3 * 120
    assert tags.table == "tag" and tags.rows >= 900
    assert any("emp" in n for n in report.notes)
    assert not client.exists("emp:999999")
    # the others kept following: their changes were applied during the snapshot
    sync(_mapping(), source=binlog_db.url, target=redis_url, until_caught_up=True,
         server_id=next(_ids))  # fmt: skip
    state = client.hget(STATE, "snapshot")
    assert state in (b"", None)
    client.close()
    _verify(binlog_db, redis_url)


def test_a_mapping_that_gains_a_table_loads_only_it(binlog_db, redis_url: str) -> None:  # type: ignore[no-untyped-def]
    """``other`` added to the mapping while every table is written: only it is read (online);
    the others keep following, their keys never removed."""
    binlog_db.run(SCHEMA + "INSERT INTO other VALUES (1, 1), (2, NULL);")
    sync(_mapping(), source=binlog_db.url, target=redis_url, until_caught_up=True,
         server_id=next(_ids))  # fmt: skip
    client = redis.Redis.from_url(redis_url)
    client.hset("dept:2", "marker", "kept")  # dept is never replaced, so this stays
    assert not client.exists("other:1")
    gained = parse_mapping(MAPPING + "  other: {}\n", name="synctest")
    errors: list[BaseException] = []
    writers = _writers(binlog_db, (81, 82), 100, errors)
    try:
        report = sync(gained, source=binlog_db.url, target=redis_url, until_caught_up=True,
                      server_id=next(_ids), chunk_rows=2)  # fmt: skip
    finally:
        for w in writers:
            w.join()
    assert not errors, errors
    assert [t.table for t in report.resnapshots] == ["other"]
    assert "re-snapshot of other queued: new in the mapping" in report.notes
    assert client.hget("dept:2", "marker") == b"kept"
    client.hdel("dept:2", "marker")
    sync(gained, source=binlog_db.url, target=redis_url, until_caught_up=True,
         server_id=next(_ids))  # fmt: skip
    result = verify(gained, source=binlog_db.url, target=redis_url)
    assert result.exit_code == 0, result.as_dict()
    # a table removed from the mapping: no longer followed, its keys kept
    lost = parse_mapping(MAPPING.replace("  stats:\n    as: columns\n", ""), name="synctest")
    held = set(client.scan_iter("stats:*"))
    assert held
    report = sync(lost, source=binlog_db.url, target=redis_url, until_caught_up=True,
                  server_id=next(_ids))  # fmt: skip
    assert "stats is no longer in the mapping: its keys are kept" in report.notes
    assert not report.resnapshots and set(client.scan_iter("stats:*")) == held
    client.close()
    result = verify(lost, source=binlog_db.url, target=redis_url)
    assert result.exit_code == 0, result.as_dict()


def test_online_first_load_while_writes_go_on(binlog_db, redis_url: str) -> None:  # type: ignore[no-untyped-def]
    """The default first load: no long transaction; every table read in chunks while
    following; ``--until-caught-up`` returns only once every table is done."""
    binlog_db.run(SCHEMA)
    _bulk(binlog_db, 3000)
    errors: list[BaseException] = []
    writers = _writers(binlog_db, (91, 92, 93), 100, errors)
    client = redis.Redis.from_url(redis_url)
    try:
        report = sync(_mapping(), source=binlog_db.url, target=redis_url, until_caught_up=True,
                      server_id=next(_ids), chunk_rows=300)  # fmt: skip
        assert client.hget(STATE, "snapshot") in (b"", None), "no table left to read"
    finally:
        for w in writers:
            w.join()
    assert not errors, errors
    assert report.online_load and report.stopped == "caught up" and not report.resnapshots
    assert report.snapshot is not None and report.snapshot.has_position
    assert [t.table for t in report.loaded] == ["dept", "emp", "tag", "stats"]
    assert report.loaded[1].rows >= 3003 and all(t.status == "done" for t in report.loaded)
    # what the writers did after it caught up
    sync(_mapping(), source=binlog_db.url, target=redis_url, until_caught_up=True,
         server_id=next(_ids))  # fmt: skip
    client.close()
    _verify(binlog_db, redis_url)


def test_truncate_during_a_resnapshot(binlog_db, redis_url: str) -> None:  # type: ignore[no-untyped-def]
    """A TRUNCATE of the table in its snapshot: a chunk read before it is never written
    after it; rows inserted after it arrive; ``verify`` exit 0."""
    binlog_db.run(SCHEMA)
    _bulk(binlog_db, 4000)
    sync(_mapping(), source=binlog_db.url, target=redis_url, until_caught_up=True,
         server_id=next(_ids))  # fmt: skip
    client = redis.Redis.from_url(redis_url)
    stop = threading.Event()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            sync(_mapping(), source=binlog_db.url, target=redis_url, stop=stop,
                 server_id=next(_ids), resnapshot_tables=("emp",), chunk_rows=50)  # fmt: skip
        except BaseException as e:
            errors.append(e)

    follower = threading.Thread(target=run)
    follower.start()
    try:
        wait_for("two chunks of emp stored", lambda: errors or _where(client)[1] >= 2, 120)
        binlog_db.run("TRUNCATE TABLE emp; INSERT INTO emp (email) VALUES ('after@truncate')")
        wait_for("the snapshot done", lambda: errors or _where(client)[1] < 0, 120)
    finally:
        stop.set()
        follower.join(60)
    assert not follower.is_alive() and not errors, errors
    sync(_mapping(), source=binlog_db.url, target=redis_url, until_caught_up=True,
         server_id=next(_ids))  # fmt: skip
    client.close()
    _verify(binlog_db, redis_url)


def test_resnapshot_of_an_unknown_table_is_refused(binlog_db, redis_url: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(MigratorError) as caught:
        sync(_mapping(), source=binlog_db.url, target=redis_url, until_caught_up=True,
             server_id=next(_ids), resnapshot_tables=("emps",))  # fmt: skip
    assert caught.value.exit_code == 2
    assert "did you mean 'emp'" in caught.value.message


def test_status_shows_the_snapshot_progress(binlog_db, redis_url: str) -> None:  # type: ignore[no-untyped-def]
    binlog_db.run(SCHEMA)
    _bulk(binlog_db, 1000)
    sync(_mapping(), source=binlog_db.url, target=redis_url, until_caught_up=True,
         server_id=next(_ids))  # fmt: skip
    seen: list[dict] = []  # type: ignore[type-arg]
    sync(_mapping(), source=binlog_db.url, target=redis_url, until_caught_up=True,
         server_id=next(_ids), resnapshot_tables=("emp", "dept"), chunk_rows=100,
         on_status=lambda s: seen.append(s.as_dict()), status_interval=0.0)  # fmt: skip
    progress = [s["online_snapshot"] for s in seen if s.get("online_snapshot")]
    assert any(p["table"] == "emp" and p["waiting"] == ["dept"] for p in progress), progress
    assert max(p["chunk"] for p in progress if p["table"] == "emp") >= 5
    _verify(binlog_db, redis_url)


def test_the_default_first_load_is_phase_loading_until_its_last_table(  # type: ignore[no-untyped-def]
    binlog_db, redis_url: str
) -> None:
    """The status lines (and /metrics' phase) say ``loading`` while the default first load
    reads its tables, with the table and chunk in ``online_snapshot`` and the applied
    position in ``position``; never ``loading`` after its last table."""
    binlog_db.run(SCHEMA)
    _bulk(binlog_db, 1000)
    figures = SyncFigures()
    seen: list[tuple[str, str, str, dict | None]] = []  # type: ignore[type-arg]
    report = sync(_mapping(), source=binlog_db.url, target=redis_url, until_caught_up=True,
                  server_id=next(_ids), chunk_rows=100, figures=figures, status_interval=0.0,
                  on_status=lambda s: seen.append((s.phase, figures.phase, s.position,
                                                   s.online_snapshot)))  # fmt: skip
    during = [x for x in seen if x[3] is not None]
    assert during and all(x[:2] == ("loading", "loading") for x in during), during[:3]
    assert all(x[2].startswith(log_base(binlog_db)) for x in during)
    assert max(x[3]["chunk"] for x in during if x[3]["table"] == "emp") >= 5
    last = max(i for i, x in enumerate(seen) if x[3] is not None)
    assert all(x[0] != "loading" and x[1] != "loading" for x in seen[last + 1 :])
    assert [t.table for t in report.loaded] == ["dept", "emp", "tag", "stats"]
    _verify(binlog_db, redis_url)


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "migrator", *args]


def _progress(client: redis.Redis) -> int:
    """The chunks of the current snapshot stored (-1: none under way)."""
    return _where(client)[1]


def _where(client: redis.Redis) -> tuple[str, int]:
    """The table of the current snapshot and its chunks stored (("", -1): none)."""
    raw = client.hget(STATE, "snapshot")
    queue = json.loads(raw) if raw else []
    return (queue[0]["table"], int(queue[0]["chunk"])) if queue else ("", -1)


def _killed_in_the_middle(cmd: list[str], env: dict[str, str], client: redis.Redis,
                          pause: float, log: Path) -> tuple[str, int]:  # fmt: skip
    """Run ``cmd`` (its output to ``log``, never a full pipe), SIGKILL it once a chunk more
    is stored (or the snapshot ended) and ``pause`` later; the table and chunks stored then
    (read once it is dead: a chunk, or the snapshot's end, stored between a look and the
    kill would make the look wrong)."""
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=out)
    try:
        start = _progress(client)

        def moved() -> bool:
            return _progress(client) not in (start, 0) or proc.poll() is not None

        wait_for("a chunk of emp stored (or the snapshot done)", moved, 300)
        time.sleep(pause)  # a random point of the snapshot (not a wait for anything)
        assert proc.poll() is None, log.read_text()[-3000:]  # it follows until killed
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    return _where(client)


def _kill_and_resume(db, redis_url: str, tmp_path: Path, rows: int, chunk: int, kills: int,
                     seed: int, first_run: bool) -> None:  # type: ignore[no-untyped-def]  # fmt: skip
    """A real ``migrator sync`` killed with SIGKILL at random points of an online snapshot
    while writers go on — the first run's (online by default: every table) or a
    ``--resnapshot emp`` after a first run — then a restart that resumes, and ``verify``."""
    db.run(SCHEMA)
    _bulk(db, rows)
    mapping = tmp_path / "synctest.yaml"  # its state: migrator:synctest:sync
    mapping.write_text(MAPPING)
    env = {**os.environ, "MIGRATOR_SYNC_SERVER_ID": str(next(_ids))}
    base = ["sync", str(mapping), "--source", db.url, "--target", redis_url]
    if not first_run:
        first = subprocess.run(_cli(*base, "--until-caught-up"), env=env, capture_output=True,
                               text=True)  # fmt: skip
        assert first.returncode == 0, first.stderr
    client = redis.Redis.from_url(redis_url)
    rng = random.Random(seed)
    errors: list[BaseException] = []
    writers = _writers(db, (seed, seed + 1), 80, errors)
    how = [] if first_run else ["--resnapshot", "emp"]  # the first run: online by default
    resnapshot = [*how, "--chunk-rows", str(chunk)]
    chunks_seen: list[int] = []
    tables_seen: list[str] = []
    try:
        for n in range(kills):
            cmd = _cli(*base, *(resnapshot if n == 0 else []), "--json")
            log = tmp_path / f"run{n}.log"
            table, chunks = _killed_in_the_middle(cmd, env, client, rng.uniform(0.0, 0.3), log)
            tables_seen.append(table)
            chunks_seen.append(chunks)
            if chunks_seen[-1] < 0:
                break  # the snapshot ended before this kill
    finally:
        for w in writers:
            w.join()
    assert not errors, errors
    done = subprocess.run(_cli(*base, "--until-caught-up"), env=env, capture_output=True,
                          text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    assert max(chunks_seen) > 0, chunks_seen  # killed at least once in the middle
    if chunks_seen[-1] > 0:  # the last kill was in the middle too: this run resumed it
        resumed = re.search(r"resumed (\w+) at chunk (\d+) of (\d+)", text)
        assert resumed is not None, text  # (a chunk, or a table, may end between look and kill)
        assert int(resumed[3]) >= int(resumed[2]) >= 1
        if resumed[1] == tables_seen[-1]:
            assert int(resumed[2]) >= chunks_seen[-1] + 1, (text, chunks_seen)
    assert client.hget(STATE, "snapshot") in (b"", None)
    client.close()
    _verify(db, redis_url)


def test_kill_9_during_an_online_first_load_resumes_at_its_chunk(binlog_db, redis_url: str,
                                                      tmp_path: Path) -> None:  # type: ignore[no-untyped-def]  # fmt: skip
    _kill_and_resume(binlog_db, redis_url, tmp_path, rows=20_000, chunk=400, kills=3, seed=61,
                     first_run=True)  # fmt: skip


@pytest.mark.long  # the default suite's version: the 20,000-row test above
@pytest.mark.parametrize("first_run", [True, False], ids=["online-load", "resnapshot"])
def test_kill_9_during_a_500k_row_snapshot(binlog_db, redis_url: str, tmp_path: Path,
                                           first_run: bool) -> None:  # type: ignore[no-untyped-def]  # fmt: skip
    _kill_and_resume(binlog_db, redis_url, tmp_path, rows=500_000, chunk=20_000, kills=5,
                     seed=71, first_run=first_run)  # fmt: skip
