"""Change streams exactly once, in commit order (issue 37 item 2), on MariaDB and MySQL 9.7: a
writer commits random transactions (and rolls some back) while ``sync`` runs as a process that
is killed (-9) at random moments, four times, and started again; a last run catches up. The
writer's own log of what it committed is then compared with the streams: each committed row
change appears once, none that rolled back, in commit order per stream, each entry's position
no later than the stored one. The first load wrote no entries, ``verify`` calls the streams
nothing stray, and ``migrate --replace`` and ``sync --reload`` leave them alone. A group
retried after its EXEC was applied (its reply lost) appends nothing twice. ``dry-run`` shows
the entry of a table's first row; ``/metrics`` counts the entries per stream. The consumer
docs/sync.md shows, killed (-9) and restarted, handles each change once, in commit order."""

from __future__ import annotations

import random
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import redis
from prometheus_client import CollectorRegistry, generate_latest

from migrator.commands import dry_run, migrate, verify
from migrator.commands.sync import sync
from migrator.mapping.loader import parse_mapping
from migrator.mapping.model import Mapping
from migrator.mapping.resolve import resolve
from migrator.plan.planner import TablePlan
from migrator.plan.stream import streams_of
from migrator.store.sync_state import SyncState, apply_group, state_key
from migrator.sync.exporter import FiguresCollector
from migrator.sync.figures import SyncFigures
from tests.binlog_server import PrivateMariaDB, missing
from tests.faults import redis_process, redis_server_problem, wait_for
from tests.services import MySQLDatabase, create_database
from tests.sync.helpers import cli
from tests.test_scaffold import sample_schema

_ids = iter(range(9300, 9400))

SCHEMA = """
CREATE TABLE acct (id INT PRIMARY KEY, owner VARCHAR(20) NOT NULL, bal INT NOT NULL);
CREATE TABLE note (id INT PRIMARY KEY, acct_id INT NULL, body VARCHAR(40));
"""
MAPPING = """\
version: 1
options:
  retries: {attempts: 10, backoff: 0.2, max_backoff: 1}
  streams: {key: feed}
tables:
  acct:
    indexes: [owner]
    streams: {key: "{table}:changes"}
  note: {}
"""
STREAM_OF = {"acct": b"acct:changes", "note": b"feed"}
COLUMNS = {"acct": ("id", "owner", "bal"), "note": ("id", "acct_id", "body")}

Image = dict[bytes, bytes]
Entry = tuple[bytes, bytes, bytes, Image, Image]  # op, table, pk, before, after


def _image(table: str, row: tuple[Any, ...] | None) -> Image:
    if row is None:
        return {}
    return {c.encode(): str(v).encode() for c, v in zip(COLUMNS[table], row) if v is not None}


class Writer:
    """Random transactions of 1-3 row changes on one connection (so its commit order is the
    log's), one in five rolled back; ``log`` holds the committed changes, in order."""

    def __init__(self, db: MySQLDatabase, seed: int) -> None:
        self.conn = db.connect(client_flag=0)
        self.conn.autocommit(False)
        self.rng = random.Random(seed)
        self.rows: dict[str, dict[int, tuple[Any, ...]]] = {"acct": {}, "note": {}}
        self.next_id = 1000
        self.log: list[tuple[bytes, Entry]] = []
        self.rolled_back = 0
        self.stop = threading.Event()
        self.error: BaseException | None = None  # what ended ``run`` early

    def seed(self, n: int) -> None:
        for i in range(1, n + 1):
            self._do(self.rows, "acct", None, (i, f"o{i % 4}", i * 10))
            self._do(self.rows, "note", None, (i, i, f"n{i}" if i % 3 else None))
        self.conn.commit()

    def _do(self, rows: Any, table: str, old: tuple[Any, ...] | None,
            new: tuple[Any, ...] | None) -> Entry:  # fmt: skip
        cols = COLUMNS[table]
        with self.conn.cursor() as cur:
            if old is None and new is not None:
                cur.execute(f"INSERT INTO {table} ({', '.join(cols)}) VALUES (%s, %s, %s)", new)
            elif new is None and old is not None:
                cur.execute(f"DELETE FROM {table} WHERE id = %s", (old[0],))
            elif old is not None and new is not None:
                cur.execute(f"UPDATE {table} SET {cols[1]} = %s, {cols[2]} = %s WHERE id = %s",
                            (new[1], new[2], old[0]))  # fmt: skip
        if new is None:
            del rows[table][old[0]]  # type: ignore[index]
        else:
            rows[table][new[0]] = new
        op = b"insert" if old is None else b"delete" if new is None else b"update"
        pk = str((new or old)[0]).encode()  # type: ignore[index]
        return op, table.encode(), pk, _image(table, old), _image(table, new)

    def _change(self, rows: Any) -> Entry:
        r = self.rng
        table = r.choice(("acct", "note"))
        have = sorted(rows[table])
        pick = r.randrange(10)
        if pick < 4 or len(have) < 3:
            self.next_id += 1
            i = self.next_id
            new = (i, f"o{r.randrange(4)}", r.randrange(999)) if table == "acct" else \
                (i, r.choice([None, *have]), r.choice([None, f"b{r.randrange(99)}"]))  # fmt: skip
            return self._do(rows, table, None, new)
        old = rows[table][r.choice(have)]
        if pick < 8:  # a value that differs, so the server logs the row
            new = (old[0], old[1], old[2] + 1 + r.randrange(9)) if table == "acct" else \
                (old[0], old[1], f"u{self.next_id}-{r.randrange(99)}")  # fmt: skip
            self.next_id += 1
            return self._do(rows, table, old, new)
        return self._do(rows, table, old, None)

    def step(self) -> None:
        rows = {t: dict(v) for t, v in self.rows.items()}
        changes = [self._change(rows) for _ in range(self.rng.randint(1, 3))]
        if self.rng.random() < 0.2:
            self.conn.rollback()
            self.rolled_back += 1
            return
        self.conn.commit()
        self.rows = rows
        self.log += [(STREAM_OF[c[1].decode()], c) for c in changes]

    def run(self, steps: int) -> None:
        try:
            for _ in range(steps):
                if self.stop.is_set():
                    return
                self.step()
                time.sleep(0.01)
        except BaseException as e:  # checked by the test
            self.error = e


def _entries(client: redis.Redis, stream: bytes) -> list[tuple[bytes, dict[bytes, bytes]]]:
    return [(i, dict(f)) for i, f in client.xrange(stream)]


def _total(client: redis.Redis) -> int:
    return sum(client.xlen(s) for s in STREAM_OF.values())


def _parsed(fields: dict[bytes, bytes]) -> Entry:
    def image(prefix: bytes) -> Image:
        return {k[len(prefix) :]: v for k, v in fields.items() if k.startswith(prefix)}

    return fields[b"op"], fields[b"table"], fields[b"pk"], image(b"before."), image(b"after.")


def _at(text: bytes) -> tuple[int, int]:
    file, _, pos = text.decode().rpartition(":")
    return int(file.rsplit(".", 1)[1]), int(pos)


def _caught_up(mapping: Mapping, db: MySQLDatabase, url: str) -> None:
    sync(mapping, source=db.url, target=url, until_caught_up=True, server_id=next(_ids))


def _loaded(db: MySQLDatabase, url: str, seed: int, rows: int) -> tuple[Writer, Mapping]:
    """The tables with ``rows`` rows each, loaded by sync's first load (no entries)."""
    db.run(SCHEMA)
    writer = Writer(db, seed)
    writer.seed(rows)
    mapping = parse_mapping(MAPPING, name="streams")
    _caught_up(mapping, db, url)
    return writer, mapping


def test_kill_9_of_sync_leaves_each_committed_change_once_in_commit_order(
    binlog_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis, tmp_path: Any
) -> None:
    writer, mapping = _loaded(binlog_db, redis_url, 37, 20)
    path = tmp_path / "streams.yaml"
    path.write_text(MAPPING)
    assert not redis_client.exists(*STREAM_OF.values()), "the first load wrote entries"
    thread = threading.Thread(target=writer.run, args=(100_000,), daemon=True)
    thread.start()
    lengths = []
    try:
        for _ in range(4):
            before = _total(redis_client)
            proc = subprocess.Popen(
                cli("sync", str(path), "--source", binlog_db.url, "--target", redis_url,
                    "--server-id", str(next(_ids))),
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            )  # fmt: skip
            try:
                wait_for("entries appended",
                         lambda p=proc, n=before: _total(redis_client) > n or p.poll() is not None,
                         30)  # fmt: skip
                time.sleep(random.Random(len(lengths)).uniform(0.05, 0.8))
            finally:
                proc.kill()
                _, err = proc.communicate(timeout=30)
            assert proc.returncode == -9, err[-2000:]
            lengths.append(_total(redis_client))
    finally:
        writer.stop.set()
        thread.join(30)
    _caught_up(mapping, binlog_db, redis_url)
    assert writer.rolled_back > 0 and len(writer.log) >= lengths[-1] > lengths[0] > 0, lengths
    assert thread.is_alive() is False and writer.error is None, writer.error

    stored = redis_client.hgetall(state_key("streams"))
    last = _at(stored[b"file"] + b":" + stored[b"pos"])
    for stream in STREAM_OF.values():
        got = _entries(redis_client, stream)
        want = [c for s, c in writer.log if s == stream]
        assert [_parsed(f) for _, f in got] == want, stream  # once each, in commit order
        at = [_at(f[b"pos"]) for _, f in got]
        assert at == sorted(at) and at[-1] <= last
        assert all(f[b"gtid"] and int(f[b"ts"]) > 1_700_000_000 for _, f in got)
    report = verify(mapping, source=binlog_db.url, target=redis_url)
    assert report.exit_code == 0, report.as_dict()  # the streams are nothing stray
    counts = {s: redis_client.xlen(s) for s in STREAM_OF.values()}
    replaced = migrate(mapping, source=binlog_db.url, target=redis_url, replace=True)
    assert replaced.exit_code == 0
    assert {s: redis_client.xlen(s) for s in STREAM_OF.values()} == counts
    sync(mapping, source=binlog_db.url, target=redis_url, until_caught_up=True, reload=True,
         server_id=next(_ids))  # fmt: skip
    assert {s: redis_client.xlen(s) for s in STREAM_OF.values()} == counts  # nor a reload


def test_a_group_sent_again_after_its_exec_was_applied_appends_nothing(
    redis_client: redis.Redis,
) -> None:
    """What ``write_atomic`` retries when the connection drops after EXEC ran but before its
    reply came: with the group's position (``once``), the second send finds it stored."""
    state = SyncState(redis_client, "once")
    state.begin()
    position = state.command({"file": "b.000001", "pos": "500"})
    entry = (b"XADD", b"s", b"*", b"op", b"insert")
    apply_group(redis_client, [entry], position, state, once={"file": "b.000001", "pos": "500"})
    apply_group(redis_client, [entry], position, state, once={"file": "b.000001", "pos": "500"})
    assert redis_client.xlen("s") == 1
    apply_group(redis_client, [entry], state.command({"file": "b.000001", "pos": "600"}), state,
                once={"file": "b.000001", "pos": "600"})  # fmt: skip
    assert redis_client.xlen("s") == 2
    apply_group(redis_client, [entry], position, state)  # without once: appended again
    assert redis_client.xlen("s") == 3


def test_dry_run_shows_the_entry_of_an_insert_and_its_size(binlog_db: MySQLDatabase) -> None:
    binlog_db.run(SCHEMA + "INSERT INTO acct VALUES (1, 'ann', 50); INSERT INTO note VALUES "
                  "(1, NULL, 'hi');")  # fmt: skip
    mapping = parse_mapping(MAPPING.replace("  note: {}", "  note: {streams: {ops: [delete]}}"),
                            name="streams")  # fmt: skip
    report = dry_run(mapping, source=binlog_db.url, sample=1)
    acct, note = report.tables
    assert acct.stream is not None and acct.stream.startswith(
        "XADD acct:changes * op insert table acct pk 1 pos binlog.000001:4 ts "
    )
    assert acct.stream.endswith("after.id 1 after.owner ann after.bal 50")
    assert acct.stream_entry_bytes == len(
        "opinserttableacctpk1posbinlog.000001:4ts"
        + acct.stream.split(" ts ")[1].split()[0]
        + "after.id1after.ownerannafter.bal50"
    )
    assert note.stream is not None and " op delete " in note.stream
    assert note.stream.endswith("before.id 1 before.body hi")  # NULL left out
    assert all(not k.startswith("XADD") for t in report.tables for k in t.sample)


def test_metrics_count_the_entries_appended_to_each_stream(
    binlog_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis
) -> None:
    writer, mapping = _loaded(binlog_db, redis_url, 5, 3)  # loaded, not appended
    for _ in range(30):
        writer.step()
    figures = SyncFigures()
    sync(mapping, source=binlog_db.url, target=redis_url, until_caught_up=True,
         server_id=next(_ids), figures=figures)  # fmt: skip
    want = Counter(s.decode() for s, _ in writer.log)
    assert want["feed"] and want["acct:changes"]
    assert figures.as_dict()["stream_entries"] == dict(sorted(want.items()))
    assert {s.decode(): redis_client.xlen(s) for s in STREAM_OF.values()} == want
    registry = CollectorRegistry()
    registry.register(FiguresCollector(figures, {"mapping": "streams"}))
    text = generate_latest(registry).decode()
    for stream, n in want.items():
        line = f'migrator_sync_stream_entries_total{{mapping="streams",stream="{stream}"}} {n}.0'
        assert line in text, text


def consumer_code() -> str:
    """The consumer docs/sync.md shows (the first python block of "Change streams")."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "sync.md").read_text("utf-8")
    section = text.split("## Change streams", 1)[1].split("\n## ", 1)[0]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_documented_consumer_killed_9_sees_each_change_once_in_order(
    binlog_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    writer, mapping = _loaded(binlog_db, redis_url, 11, 10)
    script = tmp_path / "consumer.py"
    script.write_text(
        consumer_code() + "\nimport sys\nconsume(redis.Redis.from_url(sys.argv[1]))\n"
    )
    stop = threading.Event()
    following = threading.Thread(target=lambda: sync(
        mapping, source=binlog_db.url, target=redis_url, stop=stop, server_id=next(_ids)),
        daemon=True)  # fmt: skip
    following.start()
    writing = threading.Thread(target=writer.run, args=(100_000,), daemon=True)
    writing.start()
    audited, pending = [], []
    try:
        for i in range(3):
            done = redis_client.llen("audit:acct")
            wait_for("a backlog", lambda n=done: redis_client.xlen("acct:changes") > n + 150, 30)
            proc = subprocess.Popen([sys.executable, str(script), redis_url],
                                    stderr=subprocess.PIPE, text=True)  # fmt: skip
            try:  # killed in the middle of the backlog, most often in the middle of a batch
                wait_for("entries handled",
                         lambda p=proc, n=done: redis_client.llen("audit:acct") > n + 5
                         or p.poll() is not None, 30, every=0.001)  # fmt: skip
                time.sleep(random.Random(i).uniform(0.0, 0.01))
            finally:
                proc.kill()
                _, err = proc.communicate(timeout=30)
            assert proc.returncode == -9, err[-2000:]
            audited.append(redis_client.llen("audit:acct"))
            pending.append(redis_client.xpending("acct:changes", "audit")["pending"])
    finally:
        writer.stop.set()
        writing.join(30)
        stop.set()
        following.join(60)
    assert writer.error is None, writer.error
    _caught_up(mapping, binlog_db, redis_url)
    namespace: dict[str, Any] = {}
    exec(compile(consumer_code(), "docs/sync.md", "exec"), namespace)
    last = redis_client.xrevrange("acct:changes", count=1)[0][0]

    def drained() -> bool:
        info = redis_client.xinfo_groups("acct:changes")[0]
        return bool(info["last-delivered-id"] == last and info["pending"] == 0)

    deadline = time.monotonic() + 20  # a consumer that never drains fails, not hangs
    namespace["consume"](redis.Redis.from_url(redis_url),
                         stop=lambda: drained() or time.monotonic() > deadline)  # fmt: skip
    want = [b" ".join(c[:3]) for s, c in writer.log if s == b"acct:changes"]
    assert audited[0] < audited[-1] <= len(want), audited
    assert any(pending), pending  # a kill left entries delivered and not acknowledged
    assert redis_client.lrange("audit:acct", 0, -1) == want  # each once, in commit order


def test_maxlen_and_maxage_trim_a_stream_on_a_real_server(redis_client: redis.Redis) -> None:
    """``~`` trims whole nodes of the stream (100 entries each by default): about, not exact."""
    for setting in ("{maxlen: 100}", "{maxage: 1h}"):
        text = f"version: 1\ntables:\n  dept: {{streams: {setting}}}\n"
        plan = TablePlan(resolve(parse_mapping(text), sample_schema(), ["dept"])[0])
        stream = streams_of({"dept": plan})["dept"]
        redis_client.delete(stream.key)
        for i in range(1, 1001):  # entries of 1970
            redis_client.xadd(stream.key, {b"op": b"insert"}, id=f"{i}-0")
        entry = stream.entry(None, (b"d1", b"c1", b"n1"), b"f:1", b"", 1)
        assert entry is not None
        redis_client.execute_command(*entry)
        assert 1 <= redis_client.xlen(stream.key) <= 201, setting  # of 1,001
        assert redis_client.xrevrange(stream.key, count=1)[0][1][b"pk"] == b"d1"


def test_verify_checks_the_entries_form_and_the_newest_position(
    binlog_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis
) -> None:
    writer, mapping = _loaded(binlog_db, redis_url, 7, 3)
    for _ in range(10):
        writer.step()
    _caught_up(mapping, binlog_db, redis_url)
    report = verify(mapping, source=binlog_db.url, target=redis_url)
    assert report.exit_code == 0, report.as_dict()  # what sync wrote is well formed
    stored = redis_client.hgetall(state_key("streams"))
    good = dict(redis_client.xrevrange(b"feed", count=1)[0][1])
    redis_client.xadd(b"acct:changes", {**good, b"op": b"upsert", b"table": b"acct"})
    redis_client.xadd(b"acct:changes", {**good, b"table": b"note"})  # note writes to feed
    later = b"%s:%d" % (stored[b"file"], int(stored[b"pos"]) + 1000)
    redis_client.xadd(b"feed", {**good, b"pos": later})
    report = verify(mapping, source=binlog_db.url, target=redis_url)
    assert report.exit_code == 1
    acct, note = ({t.table: t for t in report.tables}[n] for n in ("acct", "note"))
    assert acct.counts["stream entry malformed"] == 1, acct.as_dict()
    assert note.counts["stream entry malformed"] == 1, note.as_dict()  # the table it names
    assert note.counts["stream entry past the stored position"] == 1, note.as_dict()
    shown = [d.redis for t in (acct, note) for d in t.examples["stream entry malformed"]]
    assert shown == ["op 'upsert' is not one of insert, update, delete, snapshot, truncate",
                     "table b'note' does not write to this stream"]  # fmt: skip
    lengths = [redis_client.xlen(k) for k in STREAM_OF.values()]
    fixed = verify(mapping, source=binlog_db.url, target=redis_url, fix=True)
    assert fixed.exit_code == 1  # a stream is history: --fix leaves it as it is
    assert [redis_client.xlen(k) for k in STREAM_OF.values()] == lengths


def _compare(client: redis.Redis, writer: Writer) -> None:
    """Each committed change once, none rolled back, in commit order, per stream."""
    for stream in STREAM_OF.values():
        got = [_parsed(f) for _, f in _entries(client, stream)]
        assert got == [c for s, c in writer.log if s == stream], stream


@pytest.mark.skipif(redis_server_problem() is not None, reason=f"{redis_server_problem()}")
def test_redis_killed_9_and_back_from_its_aof_keeps_each_change_once(
    binlog_db: MySQLDatabase, tmp_path: Path
) -> None:
    """The AOF holds whole MULTI/EXECs (appendfsync always): after each restart Redis has the
    entries of exactly the groups whose position it has, and sync goes on from there."""
    with redis_process(tmp_path, appendonly=True) as server:
        url, client = server.url, server.client()
        writer, mapping = _loaded(binlog_db, url, 23, 10)
        stop = threading.Event()
        errors: list[BaseException] = []

        def follow() -> None:
            try:
                sync(mapping, source=binlog_db.url, target=url, stop=stop, server_id=next(_ids))
            except BaseException as e:  # checked below
                errors.append(e)

        following = threading.Thread(target=follow, daemon=True)
        following.start()
        writing = threading.Thread(target=writer.run, args=(100_000,), daemon=True)
        writing.start()
        try:
            for i in range(2):
                wait_for("entries", lambda n=i: _total(server.client()) > 100 * (n + 1), 30)
                server.restart(down=random.Random(i).uniform(0.1, 0.5), kill=True)
        finally:
            writer.stop.set()
            writing.join(30)
            wait_for("sync past the restarts", lambda: errors or _total(server.client()) >=
                     len(writer.log), 60)  # fmt: skip
            stop.set()
            following.join(60)
        assert not errors and writer.error is None, (errors, writer.error)
        _caught_up(mapping, binlog_db, url)
        client = server.client()
        _compare(client, writer)


@pytest.mark.skipif(missing() is not None, reason=f"{missing()}")
def test_a_mysql_restart_while_following_keeps_each_change_once(redis_url: str) -> None:
    """A private MariaDB restarted between two bursts of writes: sync reconnects and resumes
    after the last whole transaction it applied, appending nothing twice and nothing less."""
    server = PrivateMariaDB()
    server.start()
    try:
        db = create_database(server.url, "mig_t_streams_restart")
        writer, mapping = _loaded(db, redis_url, 29, 10)
        stop = threading.Event()
        statuses: list[Any] = []
        following = threading.Thread(target=lambda: sync(
            mapping, source=db.url, target=redis_url, stop=stop, server_id=next(_ids),
            on_status=statuses.append, status_interval=0.2), daemon=True)  # fmt: skip
        following.start()
        client = redis.Redis.from_url(redis_url)
        try:
            writer.run(60)
            wait_for("some applied", lambda: _total(client) > 20, 30)
            server.restart(down=0.5)
            writer.conn = db.connect(client_flag=0)
            writer.conn.autocommit(False)
            writer.run(60)
            wait_for("all applied", lambda: _total(client) >= len(writer.log), 60)
        finally:
            stop.set()
            following.join(60)
        assert any(s.note and "retry" in s.note and "MySQL" in s.note for s in statuses)
        _compare(client, writer)
    finally:
        server.stop()
