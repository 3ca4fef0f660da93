"""Snapshot entries and the JSON form of change streams (issue 37 items 1 and 3), on MariaDB and
MySQL 9.7: with ``streams: {snapshot: true}`` a load appends a ``truncate`` entry per table, then
one ``snapshot`` entry per row it writes (``migrate``, ``sync``'s first load online or
consistent, ``sync --reload``), so that a consumer replaying the stream from its start —
truncate: forget the table's rows; snapshot, insert, update: the after-image; delete: gone —
holds exactly the table's rows, while changes go on during the load too. ``form: json`` holds
each image as one JSON object; ``verify`` accepts both; ``dry-run`` shows the snapshot entry and
counts the stream in its memory estimate (compared with Redis's ``MEMORY USAGE``)."""

from __future__ import annotations

import json
import random
import subprocess
import threading
import time
from typing import Any

import pytest
import redis

from migrator.commands import dry_run, migrate, verify
from migrator.commands.sync import sync
from migrator.errors import LoadInterrupted, MigratorError
from migrator.mapping.loader import parse_mapping
from migrator.mapping.model import Mapping
from migrator.progress import NullProgress
from migrator.render.console import out
from migrator.render.dryrun import render_dry_run
from migrator.store.sync_state import SyncState, apply_group, state_key
from tests.engines import server_facts
from tests.faults import wait_for
from tests.services import MySQLDatabase
from tests.sync.helpers import Rows, cli, replay

_ids = iter(range(9450, 9550))

SCHEMA = """
CREATE TABLE acct (id INT PRIMARY KEY, owner VARCHAR(20) NOT NULL, bal INT NULL);
"""
MAPPING = """\
version: 1
options: {batch_size: 7}
tables:
  acct:
    streams: {key: "acct:changes", snapshot: true%s}
"""
STREAM = b"acct:changes"


def _mapping(extra: str = "") -> Mapping:
    return parse_mapping(MAPPING % extra, name="snap")


def _seed(db: MySQLDatabase, n: int) -> None:
    db.run(SCHEMA + "".join(
        f"INSERT INTO acct VALUES ({i}, 'o{i % 3}', {'NULL' if i % 4 == 0 else i * 10});"
        for i in range(1, n + 1)
    ))  # fmt: skip


def _table(db: MySQLDatabase) -> Rows:
    """The table's rows as the row hash writes them: pk -> {column: text}, NULL left out."""
    conn = db.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT id, owner, bal FROM acct")
            return {
                str(i).encode(): {k: str(v).encode() for k, v in
                                  ((b"id", i), (b"owner", o), (b"bal", b)) if v is not None}
                for i, o, b in cur.fetchall()
            }  # fmt: skip
    finally:
        conn.close()


def _ops(client: redis.Redis) -> list[bytes]:
    return [f[b"op"] for _, f in client.xrange(STREAM)]


def _write(db: MySQLDatabase, start: int, steps: int) -> None:
    """Inserts, updates (to NULL too) and deletes, each its own transaction."""
    conn = db.connect()
    try:
        with conn.cursor() as cur:
            for k in range(start, start + steps):
                cur.execute("INSERT INTO acct VALUES (%s, %s, %s)", (10_000 + k, f"w{k}", k))
                cur.execute("UPDATE acct SET bal = IF(bal IS NULL, 1, NULL) WHERE id = %s",
                            (1 + k % 30,))  # fmt: skip
                cur.execute("DELETE FROM acct WHERE id = %s", (31 + k % 30,))
                conn.commit()
    finally:
        conn.close()


class Writes(NullProgress):
    """A load's progress that commits a few changes each time rows are written (a chunk
    flushed online, a batch of the consistent load): changes while the load goes on."""

    def __init__(self, db: MySQLDatabase) -> None:
        self.db, self.done = db, 0

    def advance(self, table: str, rows: int) -> None:
        _write(self.db, self.done, 2)
        self.done += 2


def _caught_up(m: Mapping, db: MySQLDatabase, url: str, **kw: Any) -> Any:
    return sync(m, source=db.url, target=url, until_caught_up=True, server_id=next(_ids), **kw)


def test_migrate_appends_a_truncate_then_a_snapshot_entry_per_row_at_its_snapshot(
    binlog_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis
) -> None:
    _seed(binlog_db, 12)
    m = _mapping()
    report = migrate(m, source=binlog_db.url, target=redis_url)
    assert report.exit_code == 0 and report.snapshot is not None
    entries = redis_client.xrange(STREAM)
    assert [f[b"op"] for _, f in entries] == [b"truncate"] + [b"snapshot"] * 12
    at = f"{report.snapshot.binlog_file}:{report.snapshot.binlog_position}".encode()
    assert {f[b"pos"] for _, f in entries} == {at}
    assert b"pk" not in entries[0][1] and entries[1][1][b"pk"] == b"1"
    assert replay(redis_client) == _table(binlog_db)
    assert verify(m, source=binlog_db.url, target=redis_url).exit_code == 0
    with pytest.raises(MigratorError, match="need every row read in one snapshot"):
        migrate(m, source=binlog_db.url, target=redis_url, workers=2, replace=True)
    with pytest.raises(MigratorError, match="--workers above 1 and --dask") as refused:
        migrate(m, source=binlog_db.url, target=redis_url, dask="tcp://127.0.0.1:1")
    assert refused.value.exit_code == 2
    assert len(redis_client.xrange(STREAM)) == 13  # refused before anything was written
    binlog_db.run("DELETE FROM acct WHERE id = 5;")
    migrate(m, source=binlog_db.url, target=redis_url, replace=True)  # kept, appended to
    assert (
        _ops(redis_client)
        == [b"truncate"] + [b"snapshot"] * 12 + [b"truncate"] + [b"snapshot"] * 11
    )
    assert replay(redis_client) == _table(binlog_db)


@pytest.mark.parametrize("online", [True, False], ids=["online", "consistent"])
def test_sync_first_load_while_writes_go_on_then_reload_replays_to_the_rows(
    binlog_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis, online: bool
) -> None:
    """Chunks of 7 rows read online while a writer inserts, updates and deletes: the rows a
    change touched during the load come from its entry, the others from their snapshot entry;
    after ``--reload`` (streams kept, a truncate and a new snapshot appended) the same."""
    _seed(binlog_db, 60)
    m = _mapping()
    writes = Writes(binlog_db)
    _caught_up(m, binlog_db, redis_url, chunk_rows=7, online_load=online, progress=writes)
    _caught_up(m, binlog_db, redis_url)
    ops = _ops(redis_client)
    assert ops[0] == b"truncate" and ops.count(b"truncate") == 1
    assert writes.done >= 8 and ops.count(b"insert") == writes.done  # during the load
    last_snapshot = len(ops) - ops[::-1].index(b"snapshot")
    # online: the log's changes between the chunks; consistent: all after the snapshot's rows
    assert (ops.index(b"insert") < last_snapshot) is online
    assert replay(redis_client) == _table(binlog_db)
    assert verify(m, source=binlog_db.url, target=redis_url).exit_code == 0
    before = len(ops)
    _write(binlog_db, 40, 5)
    _caught_up(m, binlog_db, redis_url, reload=True, chunk_rows=7, online_load=online)
    ops = _ops(redis_client)
    assert ops.count(b"truncate") == 2 and ops[before] == b"truncate"  # kept, then appended
    assert ops[before:].count(b"snapshot") == len(_table(binlog_db))
    assert replay(redis_client) == _table(binlog_db)


def test_a_chunk_stored_again_after_its_exec_appends_its_entries_once(
    binlog_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis
) -> None:
    """``sync`` killed between chunks resumes at the stored chunk: each row's snapshot entry
    once (a stop after the first chunk, as a crash leaves it, then the rest)."""
    _seed(binlog_db, 30)
    m = _mapping()
    stop = threading.Event()
    seen: list[int] = []

    def status(s: Any) -> None:
        snap = getattr(s, "online_snapshot", None)
        if snap and snap.get("chunk", 0) >= 1:
            seen.append(snap["chunk"])
            stop.set()

    with pytest.raises(LoadInterrupted):  # stopped before the load was done
        sync(m, source=binlog_db.url, target=redis_url, server_id=next(_ids), stop=stop,
             chunk_rows=5, on_status=status, status_interval=0.0)  # fmt: skip
    assert seen
    partial = _ops(redis_client).count(b"snapshot")
    assert 5 <= partial < 30
    _caught_up(m, binlog_db, redis_url, chunk_rows=5)
    pks = [f[b"pk"] for _, f in redis_client.xrange(STREAM) if f[b"op"] == b"snapshot"]
    assert sorted(pks) == sorted(_table(binlog_db)) and len(pks) == 30  # none twice
    assert replay(redis_client) == _table(binlog_db)


def test_the_json_form_holds_each_image_as_one_object_of_the_hash_texts(
    binlog_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis
) -> None:
    binlog_db.run(
        "CREATE TABLE doc (id INT PRIMARY KEY, t VARCHAR(20), b VARBINARY(8), d DATETIME(3), "
        "n DECIMAL(6,2), j JSON);"
        "INSERT INTO doc VALUES (1, 'héllo \"q\"', 0x00FF0A, '2020-01-02 03:04:05.250', -0.5, "
        "'{\"k\": [1]}'), (2, NULL, NULL, NULL, NULL, NULL);"
    )
    m = parse_mapping("version: 1\ntables:\n  doc:\n    streams: {snapshot: true, form: json}\n",
                      name="snapjson")  # fmt: skip
    _caught_up(m, binlog_db, redis_url)
    hashed = redis_client.hgetall("doc:1")  # the row hash, as loaded
    conn = binlog_db.connect()
    with conn.cursor() as cur:
        cur.execute("UPDATE doc SET t = 'x', b = 0x41 WHERE id = 1")
        cur.execute("DELETE FROM doc WHERE id = 2")
    conn.commit()
    conn.close()
    _caught_up(m, binlog_db, redis_url)
    entries = [f for _, f in redis_client.xrange("doc:changes")]
    assert [f[b"op"] for f in entries] == [b"truncate", b"snapshot", b"snapshot", b"update",
                                           b"delete"]  # fmt: skip
    first = json.loads(entries[1][b"after"])
    assert list(first) == ["id", "t", "b", "d", "n", "j"]  # the columns' order
    assert first["t"] == 'héllo "q"' and first["b"] == "AP8K"  # binary: base64
    assert first["d"] == "2020-01-02 03:04:05.250" and first["n"] == "-0.50"
    assert json.loads(first["j"]) == {"k": [1]}  # a JSON column: its text, a string
    assert {k.encode(): v.encode() for k, v in first.items() if k not in ("b", "id")} == {
        k: v for k, v in hashed.items() if k not in (b"b", b"id")
    }  # every other value the hash's own text
    assert json.loads(entries[2][b"after"]) == {"id": "2", "t": None, "b": None, "d": None,
                                                "n": None, "j": None}  # fmt: skip
    update = entries[3]
    assert json.loads(update[b"before"])["b"] == "AP8K"
    assert json.loads(update[b"after"])["t"] == "x" and json.loads(update[b"after"])["b"] == "QQ=="
    assert b"after" not in entries[4] and json.loads(entries[4][b"before"])["id"] == "2"
    assert not any(k.startswith((b"after.", b"before.")) for f in entries for k in f)
    assert verify(m, source=binlog_db.url, target=redis_url).exit_code == 0


def test_verify_names_an_entry_of_the_json_form_that_is_not_an_object(
    binlog_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis
) -> None:
    _seed(binlog_db, 2)
    m = _mapping(", form: json")
    _caught_up(m, binlog_db, redis_url)
    redis_client.xadd(STREAM, {"op": "snapshot", "table": "acct", "pk": "9",
                               "pos": "binlog.000001:4", "ts": "1", "after": "[1]"})  # fmt: skip
    report = verify(m, source=binlog_db.url, target=redis_url)
    assert report.exit_code == 1
    found = [e for t in report.as_dict()["tables"] for e in t["examples"]]
    assert "stream entry malformed" in json.dumps(found), found
    assert "after: not a JSON object" in json.dumps(found), found


def test_dry_run_shows_the_snapshot_entry_and_counts_the_stream_in_its_memory(
    binlog_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis, tmp_path: Any
) -> None:
    """Against ``MEMORY USAGE`` of the stream ``migrate`` appends: within 30 %."""
    _seed(binlog_db, 400)
    m = _mapping()
    resp = tmp_path / "load.resp"
    report = dry_run(m, source=binlog_db.url, sample=1, resp_file=resp)
    data = resp.read_bytes()
    assert data.count(b"$8\r\ntruncate\r\n") == 1 and data.count(b"$8\r\nsnapshot\r\n") == 400
    (t,) = report.tables
    assert t.stream_snapshot is not None
    assert t.stream_snapshot.startswith("XADD acct:changes * op snapshot table acct pk 1 pos ")
    assert t.stream_snapshot.endswith("after.id 1 after.owner o1 after.bal 10")
    assert t.keys["stream"] == 1 and t.memory["stream"] > 0
    migrate(m, source=binlog_db.url, target=redis_url)
    used = redis_client.memory_usage(STREAM, samples=0)
    assert used is not None and 0.7 < t.memory["stream"] / used < 1.3, (t.memory, used)
    with out.capture() as captured:  # the text people read
        render_dry_run(report)
    text = " ".join(captured.get().split())
    assert "the first load appends one snapshot entry per row" in text
    assert "op snapshot table acct pk 1" in text
    assert t.patterns["stream"] == ["acct:changes"] and t.stream_refused is None
    on_cluster = dry_run(m, source=binlog_db.url, target="redis+cluster://127.0.0.1:1", sample=0)
    refused = on_cluster.tables[0].stream_refused
    assert refused is not None and "sync refuses change streams on a Redis Cluster" in refused


def test_migrate_refuses_snapshot_entries_from_a_source_without_its_binary_log(
    mysql_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis
) -> None:
    if server_facts(mysql_db.url)["log_bin"] in ("1", "ON"):
        pytest.skip("the server's binary log is on (the shared MariaDB has it off)")
    _seed(mysql_db, 2)
    with pytest.raises(MigratorError, match="the source's binary log is off"):
        migrate(_mapping(), source=mysql_db.url, target=redis_url)
    assert not redis_client.keys("*")  # refused before writing


def test_sync_reload_then_changes_keep_the_consumer_exact_after_deletes_between_loads(
    binlog_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis
) -> None:
    """Rows deleted between ``migrate`` and ``sync``'s first load: the second load's truncate
    makes the consumer forget them (a snapshot alone would leave them)."""
    _seed(binlog_db, 10)
    m = _mapping()
    migrate(m, source=binlog_db.url, target=redis_url)
    binlog_db.run("DELETE FROM acct WHERE id IN (2, 3); UPDATE acct SET owner = 'z' WHERE id = 4;")
    time.sleep(0.1)
    _caught_up(m, binlog_db, redis_url)
    assert _ops(redis_client).count(b"truncate") == 2
    assert replay(redis_client) == _table(binlog_db)


def test_kill_9_during_the_online_load_appends_each_rows_snapshot_entry_once(
    binlog_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis, tmp_path: Any
) -> None:
    """``sync`` killed (-9) twice while it loads chunk by chunk and a writer commits:
    the next run resumes at the stored chunk, whose entries went in with its progress, so each
    row has one snapshot entry (none twice, none lost) and the replay is the table."""
    binlog_db.run(SCHEMA + "INSERT INTO acct (id, owner, bal) VALUES " + ",".join(
        f"({i}, 'o{i % 3}', {i})" for i in range(1, 1501)) + ";")  # fmt: skip
    path = tmp_path / "snap.yaml"
    path.write_text(MAPPING % "")
    errors: list[BaseException] = []

    def write() -> None:
        try:
            _write(binlog_db, 0, 60)
        except BaseException as e:  # checked below
            errors.append(e)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    mid_load = []
    for k in range(2):
        before = redis_client.xlen(STREAM) if redis_client.exists(STREAM) else 0
        proc = subprocess.Popen(
            cli("sync", str(path), "--source", binlog_db.url, "--target", redis_url,
                "--server-id", str(next(_ids)), "--chunk-rows", "20"),
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            wait_for("entries appended", lambda p=proc, n=before: (
                redis_client.exists(STREAM) and redis_client.xlen(STREAM) > n
            ) or p.poll() is not None, 60)  # fmt: skip
            time.sleep(random.Random(k).uniform(0.0, 0.3))
        finally:
            proc.kill()
            _, err = proc.communicate(timeout=30)
        assert proc.returncode == -9, err[-2000:]
        mid_load.append(bool(redis_client.hget(state_key("snap"), "snapshot")))
    writer.join(60)
    assert not errors and not writer.is_alive(), errors
    assert any(mid_load), mid_load  # killed while chunks were still to read
    _caught_up(_mapping(), binlog_db, redis_url, chunk_rows=20)
    ops = _ops(redis_client)
    assert ops.count(b"truncate") == 1  # one load, resumed
    pks = [f[b"pk"] for _, f in redis_client.xrange(STREAM) if f[b"op"] == b"snapshot"]
    assert len(pks) == len(set(pks))  # none twice
    assert replay(redis_client) == _table(binlog_db)


def test_a_chunk_whose_exec_ran_but_reply_was_lost_is_not_appended_again(
    redis_client: redis.Redis,
) -> None:
    """What ``write_atomic`` retries after a lost reply: a chunk's entries go with its stored
    progress (``once`` = that progress), so the second send finds it stored."""
    state = SyncState(redis_client, "snaponce")
    state.begin()
    entry = (b"XADD", b"s", b"*", b"op", b"snapshot")
    for progress in ('[{"chunk":1}]', '[{"chunk":1}]', '[{"chunk":2}]', ""):
        stored = state.command({"file": "b.000001", "pos": "9", "snapshot": progress})
        apply_group(redis_client, [entry], stored, state, once={"snapshot": progress})
    assert redis_client.xlen("s") == 3  # chunk 1 once, chunk 2, the table's end ("")
