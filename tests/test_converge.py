"""Converging on a source that is being written (issue 11 items 1-4, 8), on real servers.

A writer thread moves stock between rows of two tables (one transaction each, so the total
never changes), moves unique, index, score and order values, deletes, inserts and changes a
join table, while ``migrate`` runs. With one worker the load is one snapshot: the total in
Redis is the total in MySQL, and the counter and latest list agree with the loaded rows.
Then ``verify --fix`` repairs what the writes changed, and ``verify`` passes.
"""

from __future__ import annotations

import random
import sys
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis

from migrator.commands.migrate import migrate
from migrator.commands.verify import verify
from migrator.errors import ConnectError, MigratorError
from tests.faults import wait_for
from tests.services import MySQLDatabase

# outcome decided by migrate's worker count: again in CI with MIGRATOR_WORKERS=4
pytestmark = pytest.mark.workers

ROWS = 6000
TOTAL = 10 * ROWS + 1000

SCHEMA = """
CREATE TABLE warehouse (id INT PRIMARY KEY, stock INT NOT NULL);
CREATE TABLE item (
  id INT PRIMARY KEY, sku VARCHAR(20) NOT NULL UNIQUE, cat INT, score INT,
  updated DATETIME(6), stock INT NOT NULL, KEY (cat));
CREATE TABLE tag (id INT PRIMARY KEY, name VARCHAR(20));
CREATE TABLE item_tag (item_id INT, tag_id INT, PRIMARY KEY (item_id, tag_id));
INSERT INTO warehouse VALUES (1, 500), (2, 500);
INSERT INTO tag VALUES (1, 'red'), (2, 'green'), (3, 'blue');
"""

MAPPING = """
version: 1
options:
  batch_size: 100
tables:
  warehouse: {}
  tag: {}
  item:
    unique: [sku]
    indexes: [cat]
    sorted:
      - key: "item:by:score"
        score: score
    latest:
      - key: "item:latest"
        order_by: updated
        limit: 20
  item_tag:
    as: none
    sets:
      - key: "item_tag:item_id:{item_id}"
        member: "{tag_id}"
      - key: "item_tag:tag_id:{tag_id}"
        member: "{item_id}"
"""


class Writer(threading.Thread):
    """Writes to the source until stopped; every transaction keeps the stock total."""

    def __init__(self, db: MySQLDatabase, seed: int) -> None:
        super().__init__(daemon=True)
        self.db, self.rand = db, random.Random(seed)
        self.stop = threading.Event()
        self.done = 0
        self.error: BaseException | None = None
        self.next_id = ROWS + 1
        #: inserted ids with the server's time just before and just after their commit
        self.inserted: list[tuple[int, str, str]] = []
        self.deleted: set[int] = set()

    def run(self) -> None:
        conn = self.db.connect(autocommit=False)
        try:
            cur = conn.cursor()
            while not self.stop.is_set():
                new = self.one(cur)
                before = _now(cur) if new else ""
                conn.commit()
                if new:
                    self.inserted.append((new, before, _now(cur)))
                self.done += 1
        except BaseException as e:  # handed to the test
            self.error = e
        finally:
            conn.close()

    def one(self, cur: Any) -> int | None:
        """One transaction's writes; the id it inserted, if it did."""
        r = self.rand
        a = r.randint(1, self.next_id - 1)
        op = r.randrange(8)
        if op == 0:  # stock between two items, or an item and a warehouse
            b = r.randint(1, self.next_id - 1)
            cur.execute("UPDATE item SET stock = stock - 1 WHERE id = %s", (a,))
            if cur.rowcount:
                if r.random() < 0.5:
                    cur.execute("UPDATE warehouse SET stock = stock + 1 WHERE id = %s",
                                (r.randint(1, 2),))  # fmt: skip
                else:
                    cur.execute("UPDATE item SET stock = stock + 1 WHERE id = %s", (b,))
                    if not cur.rowcount:
                        cur.execute("UPDATE warehouse SET stock = stock + 1 WHERE id = 1")
        elif op == 1:  # the unique value moves
            cur.execute("UPDATE item SET sku = CONCAT('u', id, '-', %s) WHERE id = %s",
                        (self.done, a))  # fmt: skip
        elif op == 2:  # the index value moves
            cur.execute("UPDATE item SET cat = %s WHERE id = %s", (r.randrange(40), a))
        elif op == 3:  # score and order values move
            cur.execute(
                "UPDATE item SET score = %s, updated = TIMESTAMPADD(SECOND, %s, '2030-01-01') "
                "WHERE id = %s", (r.randrange(5000), self.done, a),
            )  # fmt: skip
        elif op == 4:  # delete, giving its stock to a warehouse
            cur.execute("SELECT stock FROM item WHERE id = %s FOR UPDATE", (a,))
            row = cur.fetchone()
            if row is not None:
                self.deleted.add(a)
                cur.execute("DELETE FROM item WHERE id = %s", (a,))
                cur.execute("DELETE FROM item_tag WHERE item_id = %s", (a,))
                cur.execute("UPDATE warehouse SET stock = stock + %s WHERE id = 2", (row[0],))
        elif op == 5:  # insert, taking its stock from a warehouse
            new = self.next_id
            self.next_id += 1
            cur.execute("UPDATE warehouse SET stock = stock - 3 WHERE id = 1")
            cur.execute(
                "INSERT INTO item VALUES (%s, %s, %s, %s, TIMESTAMPADD(SECOND, %s, '2031-01-01'),"
                " 3)", (new, f"new-{new}", r.randrange(40), r.randrange(5000), new),
            )  # fmt: skip
            cur.execute("INSERT INTO item_tag VALUES (%s, %s)", (new, r.randint(1, 3)))
            return new
        elif op == 6:  # join-table rows come and go
            cur.execute("DELETE FROM item_tag WHERE item_id = %s", (a,))
            cur.execute("INSERT IGNORE INTO item_tag VALUES (%s, %s)", (a, r.randint(1, 3)))
        else:  # a tag renamed
            cur.execute(
                "UPDATE tag SET name = %s WHERE id = %s", (f"t{self.done}", r.randint(1, 3))
            )
        return None


def _now(cur: Any) -> str:
    cur.execute("SELECT DATE_FORMAT(UTC_TIMESTAMP(6), '%Y-%m-%d %H:%i:%s.%f')")
    return str(cur.fetchone()[0])


def _shifted(moment: str, seconds: float) -> str:
    at = datetime.strptime(moment, "%Y-%m-%d %H:%M:%S.%f") + timedelta(seconds=seconds)
    return at.strftime("%Y-%m-%d %H:%M:%S.%f")


@pytest.fixture
def shop(mysql_db: MySQLDatabase, tmp_path: Path) -> Iterator[tuple[MySQLDatabase, Path]]:
    mysql_db.run(SCHEMA)
    conn = mysql_db.connect(autocommit=True)
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO item VALUES (%s, %s, %s, %s, %s, %s)",
            [(i, f"sku-{i}", i % 17, i % 1000, f"2020-01-01 {i // 3600 % 24:02}:{i // 60 % 60:02}:"
              f"{i % 60:02}.{i:06}", 10) for i in range(1, ROWS + 1)],
        )  # fmt: skip
        cur.executemany("INSERT INTO item_tag VALUES (%s, %s)",
                        [(i, 1 + i % 3) for i in range(1, ROWS + 1)])  # fmt: skip
    conn.close()
    path = tmp_path / "shop.yaml"
    path.write_text(MAPPING)
    yield mysql_db, path


def _writing(db: MySQLDatabase, seed: int = 1) -> Writer:
    """A writer started, with a row inserted (and committed) a while before anything the
    test does next: on the server's clock, so that however fast the load starts, a row
    committed before its snapshot is there to be found."""
    writer = Writer(db, seed)
    writer.start()
    wait_for("a row inserted", lambda: writer.error or writer.inserted, 30)
    assert writer.error is None, writer.error
    _server_past(db, _shifted(writer.inserted[0][2], 0.2))
    return writer


def _server_past(db: MySQLDatabase, moment: str) -> None:
    """Wait until the server's clock is past ``moment`` (its UTC_TIMESTAMP(6) format)."""
    conn = db.connect(autocommit=True)
    try:
        with conn.cursor() as cur:
            wait_for(f"the server's clock past {moment}", lambda: _now(cur) > moment, 30,
                     every=0.01)  # fmt: skip
    finally:
        conn.close()


def _written_after(writer: Writer, moment: str) -> None:
    """Wait until the writer inserted (and committed) a row it began after ``moment``."""

    def inserted() -> bool:
        return writer.error is not None or any(b > moment for _, b, _ in writer.inserted)

    wait_for(f"a row inserted after {moment}", inserted, 30)
    assert writer.error is None, writer.error


def _stopped(writer: Writer) -> int:
    writer.stop.set()
    writer.join(30)
    assert writer.error is None, writer.error
    return writer.done


def _stock_in_redis(r: redis.Redis) -> int:
    """The total stock over the row hashes, as Redis holds them."""
    total = 0
    for pattern in ("item:*", "warehouse:*"):
        keys = [k for k in r.scan_iter(match=pattern, count=5000) if k.split(b":")[1].isdigit()]
        pipe = r.pipeline(transaction=False)
        for k in keys:
            pipe.hget(k, "stock")
        values = pipe.execute()
        total += sum(int(v) for v in values if v is not None)
    return total


def test_one_worker_loads_one_moment_while_the_source_is_written(
    shop: tuple[MySQLDatabase, Path], redis_url: str, redis_client: redis.Redis
) -> None:
    db, path = shop
    writer = _writing(db)
    before = writer.done
    report = migrate(path, source=db.url, target=redis_url, workers=1)
    during = writer.done - before
    assert report.snapshot is not None and report.snapshot.moment
    early, late = _shifted(report.snapshot.moment, -0.05), _shifted(report.snapshot.moment, 0.05)
    _written_after(writer, late)  # a row committed after the snapshot, to be found absent
    _stopped(writer)
    assert during > 0, "no write happened while migrate ran"
    assert report.as_dict()["snapshot"]["moment"] == report.snapshot.moment
    total = _stock_in_redis(redis_client)
    assert total == TOTAL, f"the load mixes moments: stock {total} != {TOTAL}"
    # the end-of-table structures are read in the same snapshot as the rows
    latest = redis_client.lrange("item:latest", 0, -1)
    assert latest and all(redis_client.exists(b"item:" + pk) for pk in latest)
    ids = [int(k.split(b":")[1]) for k in redis_client.scan_iter(match="item:*", count=5000)
           if k.split(b":")[1].isdigit()]  # fmt: skip
    assert int(redis_client.get("item:id")) == max(ids)
    newest = sorted(((redis_client.hget(f"item:{i}", "updated"), i) for i in ids), reverse=True)
    assert [int(x) for x in latest] == [i for _, i in newest[:20]]
    # rows committed before the reported moment are there, rows committed after are not
    judged = [(i, b, a) for i, b, a in writer.inserted if i not in writer.deleted]
    before = [i for i, _, a in judged if a < early]
    after = [i for i, b, _ in judged if b > late]
    assert before and after, (len(before), len(after))
    assert all(redis_client.exists(f"item:{i}") for i in before)
    assert not any(redis_client.exists(f"item:{i}") for i in after)


def test_fix_converges_after_writes_during_migrate(
    shop: tuple[MySQLDatabase, Path], redis_url: str
) -> None:
    db, path = shop
    writer = _writing(db, seed=2)
    report = migrate(path, source=db.url, target=redis_url, workers=1)
    assert report.snapshot is not None and report.snapshot.moment
    _written_after(writer, _shifted(report.snapshot.moment, 0.05))
    _stopped(writer)
    first = verify(path, source=db.url, target=redis_url)
    assert not first.ok  # the writes after the snapshot are not in Redis
    fixed = verify(path, source=db.url, target=redis_url, fix=True)
    assert fixed.repaired and sum(sum(t.counts.values()) for t in fixed.repaired) > 0
    assert fixed.ok and fixed.exit_code == 0, [t.as_dict() for t in fixed.tables if not t.ok]
    assert verify(path, source=db.url, target=redis_url).ok


@pytest.mark.long  # neighbour: test_fix_converges_after_writes_during_migrate
def test_fix_while_the_source_is_written_converges_on_a_rerun(
    shop: tuple[MySQLDatabase, Path], redis_url: str
) -> None:
    db, path = shop
    migrate(path, source=db.url, target=redis_url, workers=1)
    writer = _writing(db, seed=3)
    verify(path, source=db.url, target=redis_url, fix=True)  # the table changes under it
    _stopped(writer)
    again = verify(path, source=db.url, target=redis_url, fix=True)
    assert again.ok, [t.as_dict() for t in again.tables if not t.ok]
    assert verify(path, source=db.url, target=redis_url).ok


def test_a_rerun_overwrites_and_says_how_to_remove(
    shop: tuple[MySQLDatabase, Path], redis_url: str
) -> None:
    db, path = shop
    migrate(path, source=db.url, target=redis_url, workers=1)
    db.run(
        "UPDATE item SET cat = 39, sku = CONCAT('moved-', id), score = 4999 WHERE id <= 50;"
        "DELETE FROM item WHERE id BETWEEN 100 AND 120; DELETE FROM item_tag WHERE item_id < 30;"
        "INSERT INTO item VALUES (99999, 'fresh', 1, 1, '2040-01-01', 0);"
    )
    second = migrate(path, source=db.url, target=redis_url, workers=1)
    assert second.rerun and any("verify" in n and "--fix" in n and "--replace" in n
                                for n in second.notes), second.notes  # fmt: skip
    after = verify(path, source=db.url, target=redis_url)
    item = next(t for t in after.tables if t.table == "item")
    assert item.missing == 0 and item.different == 0  # changed rows were overwritten
    assert item.stale == 21  # the deleted rows' keys stay: removals are not applied
    assert verify(path, source=db.url, target=redis_url, fix=True).ok
    assert verify(path, source=db.url, target=redis_url).ok


def test_replace_after_deletes(
    shop: tuple[MySQLDatabase, Path], redis_url: str, redis_client: redis.Redis
) -> None:
    db, path = shop
    migrate(path, source=db.url, target=redis_url, workers=1)
    db.run("DELETE FROM item WHERE id > 100; DELETE FROM item_tag WHERE item_id > 100;")
    redis_client.set("unrelated:key", "kept")
    redis_client.set("item:junk:1", "x")  # in the mapping's key space: removed
    owned = redis_client.dbsize() - 2  # all but the unrelated key and the checkpoint
    report = migrate(path, source=db.url, target=redis_url, workers=1, replace=True)
    assert report.removed == owned
    assert redis_client.get("unrelated:key") == b"kept"
    assert not redis_client.exists("item:junk:1")
    assert verify(path, source=db.url, target=redis_url).ok


def test_an_interrupted_replace_is_finished_by_resume(
    shop: tuple[MySQLDatabase, Path],
    redis_url: str,
    redis_client: redis.Redis,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """--replace marks its removal in the checkpoint before it starts: a --resume of a run
    interrupted there removes what the mapping owns first, then loads."""
    db, path = shop
    migrate(path, source=db.url, target=redis_url, workers=1)
    db.run("DELETE FROM item WHERE id > 100; DELETE FROM item_tag WHERE item_id > 100;")

    def lost(*args: object, **kwargs: object) -> int:
        raise ConnectError("lost the connection to Redis (test)")

    module = sys.modules["migrator.commands.migrate"]  # (the package exports the function)
    monkeypatch.setattr(module, "remove_owned", lost)
    with pytest.raises(ConnectError, match="--resume"):
        migrate(path, source=db.url, target=redis_url, workers=1, replace=True)
    assert redis_client.hexists("migrator:shop:checkpoint", "#replace")
    monkeypatch.undo()
    report = migrate(path, source=db.url, target=redis_url, workers=1, resume=True)
    assert report.removed is not None and report.removed > ROWS - 100
    assert b'"done": true' in redis_client.hget("migrator:shop:checkpoint", "#replace")
    assert verify(path, source=db.url, target=redis_url).ok
    with pytest.raises(MigratorError, match="nothing is left to resume"):
        migrate(path, source=db.url, target=redis_url, workers=1, resume=True)


def test_one_worker_reads_everything_on_the_snapshots_one_connection(
    shop: tuple[MySQLDatabase, Path], redis_url: str, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """Rows, counters and latest lists of every table, with one worker, come through the one
    connection that holds the snapshot (so they are the reported moment and position)."""
    import migrator.source.mysql as mysql_source

    opened: list[object] = []
    real = mysql_source.raw_connect

    def counted(*args: Any) -> Any:
        conn = real(*args)
        opened.append(conn)
        return conn

    monkeypatch.setattr(mysql_source, "raw_connect", counted)
    db, path = shop
    migrate(path, source=db.url, target=redis_url, workers=1)
    assert len(opened) == 1
    verify(path, source=db.url, target=redis_url)
    assert len(opened) == 2
    from migrator.commands.dryrun import dry_run

    dry_run(path, source=db.url, resp_file=tmp_path / "load.resp")
    assert len(opened) == 3
