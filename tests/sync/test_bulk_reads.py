"""Every bulk read goes through the default reader, asyncmy (issue 18 item 3): ``migrate`` with
one and with two workers, ``verify``, ``dry-run``'s estimate pass, and the snapshot load of
``sync``, each run as the command line runs them (workers are processes of their own).

A ``sitecustomize`` module on ``PYTHONPATH`` (loaded by every interpreter of the run, spawned
workers included) notes, in each process, the driver of every raw connection opened and the
driver module that handed out every batch of ``Source.batches``; the real drivers do the
reading. The server is the private MariaDB with the binary log (``binlog_db``), as sync needs.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import redis

from migrator.source.drivers import RAW_DRIVER_ENV

SPY = """
import os
_out = os.environ.get("MIGRATOR_TEST_READER_SPY")
if _out:
    import migrator.source.mysql as _m

    _connect, _batches = _m.raw_connect, _m.Source.batches

    def _note(line):
        with open(_out, "a") as f:
            f.write(f"{os.getpid()} {line}\\n")

    def raw_connect(url, timeout):
        conn = _connect(url, timeout)
        _note(f"connect {type(conn).__module__}")
        return conn

    def batches(self, *args, **kwargs):
        for rows in _batches(self, *args, **kwargs):
            _note(f"batch {type(self._raw).__module__} {len(rows)}")
            yield rows

    _m.raw_connect, _m.Source.batches = raw_connect, batches
"""
SCHEMA = """
CREATE TABLE emp (id INT PRIMARY KEY, name VARCHAR(40) NOT NULL, mgr INT NULL, KEY (mgr));
INSERT INTO emp SELECT seq, CONCAT('e', seq), seq % 7 FROM seq_1_to_3000;
ANALYZE TABLE emp;
"""
MAPPING = "version: 1\ntables:\n  emp:\n    indexes: [mgr]\n"
ASYNCMY = "migrator.source.asyncmy_sync"
_ids = itertools.count(7300)


def run(tmp_path: Path, *args: str) -> tuple[int, list[tuple[int, str, str, int]]]:
    """Run ``migrator ARGS`` with the spy; (exit code, the notes as (pid, what, module, rows))."""
    out = tmp_path / f"notes-{next(_ids)}.txt"
    env = {k: v for k, v in os.environ.items() if k != RAW_DRIVER_ENV}
    env.update(
        PYTHONPATH=os.pathsep.join([str(tmp_path / "spy"), os.getcwd()]),
        MIGRATOR_TEST_READER_SPY=str(out),
        MIGRATOR_SYNC_SERVER_ID=str(next(_ids)),
    )
    done = subprocess.run(
        [sys.executable, "-m", "migrator", *args], env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    notes = []
    for line in out.read_text().splitlines() if out.exists() else []:
        pid, what, module, *n = line.split()
        notes.append((int(pid), what, module, int(n[0]) if n else 0))
    return done.returncode, notes


def test_every_bulk_read_goes_through_asyncmy(
    binlog_db: Any, redis_url: str, tmp_path: Path
) -> None:
    binlog_db.run(SCHEMA)
    (tmp_path / "spy").mkdir()
    (tmp_path / "spy" / "sitecustomize.py").write_text(SPY)
    mapping = tmp_path / "m.yaml"
    mapping.write_text(MAPPING)
    where = ["--source", binlog_db.url, "--target", redis_url]
    commands = {
        "migrate, 1 worker": ["migrate", str(mapping), *where, "--workers", "1"],
        "migrate, 2 workers": [
            "migrate",
            str(mapping),
            *where,
            "--workers",
            "2",
            "--replace",
            "--batch-size",
            "500",
            "--chunk-rows",
            "1000",
        ],  # (3 chunks of the table: the chunks run on both workers)
        "verify": ["verify", str(mapping), *where],
        "dry-run": ["dry-run", str(mapping), "--source", binlog_db.url],
        "sync's snapshot load": ["sync", str(mapping), *where, "--until-caught-up"],
    }
    for what, args in commands.items():
        if what.startswith("sync"):  # a first run, on an empty target
            redis.Redis.from_url(redis_url).flushdb()
        _, notes = run(tmp_path, *args)
        batches = [n for n in notes if n[1] == "batch"]
        modules = Counter(n[2] for n in notes)
        assert modules and set(modules) == {ASYNCMY}, (what, modules)  # no other raw reader
        assert sum(n[3] for n in batches) >= 3000, (what, len(batches))  # every row
        if what == "migrate, 2 workers":  # the ranges were read by other processes
            assert len({n[0] for n in batches}) >= 2, notes[:5]
