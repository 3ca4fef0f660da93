"""A ``--replace`` stopped before its removal began is never finished by a ``--resume`` that
removes nothing (issue 27 item 1). The replace's intent is written with its run's marker, in
one transaction, so no earlier table state is ever seen without it; a ``--replace --resume``
resumes only a replace's checkpoint (any other: the replace starts over); and a plain
``--resume`` refuses a checkpoint whose run had finished, since a run stopped before its first
write (kill -9 in its first second) leaves no checkpoint of its own."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

from migrator.commands.migrate import migrate
from migrator.commands.verify import verify
from migrator.errors import ConnectError, MigratorError
from tests.services import MySQLDatabase

ROWS = 3000
SCHEMA = """
CREATE TABLE item (id INT PRIMARY KEY, sku VARCHAR(20) NOT NULL UNIQUE, cat INT, KEY (cat));
CREATE TABLE tag (id INT PRIMARY KEY, name VARCHAR(20));
INSERT INTO tag VALUES (1, 'red'), (2, 'green');
"""
MAPPING = """
version: 1
options:
  batch_size: 200
tables:
  tag: {}
  item:
    unique: [sku]
    indexes: [cat]
"""
CHECKPOINT = "migrator:shop:checkpoint"


@pytest.fixture
def shop(mysql_db: MySQLDatabase, tmp_path: Path) -> tuple[MySQLDatabase, Path]:
    mysql_db.run(SCHEMA)
    conn = mysql_db.connect(autocommit=True)
    with conn.cursor() as cur:
        cur.executemany("INSERT INTO item VALUES (%s, %s, %s)",
                        [(i, f"sku-{i}", i % 13) for i in range(1, ROWS + 1)])  # fmt: skip
    conn.close()
    path = tmp_path / "shop.yaml"
    path.write_text(MAPPING)
    return mysql_db, path


def _loaded_then_changed(db: MySQLDatabase, path: Path, url: str) -> None:
    """A plain load, finished; then MySQL deletes, inserts and updates rows (the keys of
    the deleted rows, the old unique and index entries become stale in Redis)."""
    migrate(path, source=db.url, target=url, workers=1)
    db.run(
        "DELETE FROM item WHERE id % 7 = 0; UPDATE item SET cat = cat + 100 WHERE id % 5 = 0;"
        f"INSERT INTO item VALUES ({ROWS + 1}, 'sku-new', 1); UPDATE tag SET name = 'blue';"
    )


def _killed_in_its_first_second(db: MySQLDatabase, path: Path, url: str) -> None:
    """``migrate --replace`` as the CLI, kill -9 before it could write (its imports are not
    over): the target holds the earlier plain run's finished checkpoint and nothing else."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "migrator", "migrate", str(path), "--source", db.url,
         "--target", url, "--replace"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def test_replace_resume_after_a_replace_killed_before_writing_ends_exact(
    shop: tuple[MySQLDatabase, Path], redis_url: str, redis_client: redis.Redis
) -> None:
    """The earlier plain run's finished checkpoint is no replace to finish: the replace
    starts over (removal, then every table) and says so. Before: every table 'done earlier',
    exit 0, the stale keys kept."""
    db, path = shop
    _loaded_then_changed(db, path, redis_url)
    _killed_in_its_first_second(db, path, redis_url)
    report = migrate(path, source=db.url, target=redis_url, workers=1, replace=True, resume=True)
    assert report.removed and all(t.status == "done" for t in report.tables)
    assert any("no --replace to finish" in n for n in report.notes), report.notes
    assert verify(path, source=db.url, target=redis_url).ok


def test_resume_after_a_replace_killed_before_writing_refuses_to_guess(
    shop: tuple[MySQLDatabase, Path], redis_url: str, redis_client: redis.Redis
) -> None:
    """A plain --resume cannot tell the finished plain run from a replace that left no trace:
    it refuses (exit 2) and says how to load again; following the hint ends exact."""
    db, path = shop
    _loaded_then_changed(db, path, redis_url)
    _killed_in_its_first_second(db, path, redis_url)
    with pytest.raises(MigratorError, match="nothing is left to resume") as refused:
        migrate(path, source=db.url, target=redis_url, workers=1, resume=True)
    assert refused.value.exit_code == 2 and "--replace" in (refused.value.hint or "")
    migrate(path, source=db.url, target=redis_url, workers=1, replace=True)
    assert verify(path, source=db.url, target=redis_url).ok


@pytest.mark.parametrize("again", ["--resume", "--replace --resume"])
def test_a_replace_stopped_before_its_removal_is_finished_by_either_resume(
    shop: tuple[MySQLDatabase, Path],
    redis_url: str,
    redis_client: redis.Redis,
    monkeypatch: pytest.MonkeyPatch,
    again: str,
) -> None:
    """Stopped after its marker was written, before the removal's first command: the
    checkpoint already records the removal to do (written in the same transaction as the
    marker), so a --resume removes first. Before: the marker alone, an empty state, and a
    plain --resume loaded everything over the stale keys."""
    db, path = shop
    _loaded_then_changed(db, path, redis_url)
    module = sys.modules["migrator.commands.migrate"]

    def stopped(*args: object, **kwargs: object) -> int:
        raise ConnectError("lost the connection to Redis (test)")

    monkeypatch.setattr(module, "_replace", stopped)
    with pytest.raises(ConnectError, match="--resume"):
        migrate(path, source=db.url, target=redis_url, workers=1, replace=True)
    monkeypatch.undo()
    assert redis_client.hexists(CHECKPOINT, "#replace")
    report = migrate(path, source=db.url, target=redis_url, workers=1, resume=True,
                     replace=again.startswith("--replace"))  # fmt: skip
    assert report.removed and not report.notes
    assert verify(path, source=db.url, target=redis_url).ok
