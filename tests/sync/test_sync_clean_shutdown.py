"""A clean MySQL shutdown while ``sync`` follows (issue 35 item 1), on a private server of
each engine: a server that shuts down cleanly ends the binary-log stream the way a
non-blocking dump ends at the log's end, and MySQL 9.7 does so (before: ``"stopped": "end of
log"`` and exit 0, the code of a stop someone asked for: ``Restart=on-failure`` left sync
down). An end nobody asked for is a lost connection: ridden out by ``options.retries``
with either reader, then exit 3 when the server stays down.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pymysql
import pytest
import redis

from migrator.commands import verify
from migrator.mapping.loader import parse_mapping
from tests.binlog_server import PrivateMariaDB
from tests.faults import redis_server_problem, wait_for
from tests.mysql_server import PrivateMySQL
from tests.services import create_database
from tests.sync.helpers import following, master_position, write_random
from tests.sync.workload import MAPPING, SCHEMA

pytestmark = pytest.mark.skipif(
    redis_server_problem() is not None, reason=f"{redis_server_problem()}"
)

_ids = iter(range(9700, 9800))
RETRIES = "options:\n  retries: {attempts: %d, backoff: 0.2, max_backoff: 1}\n"
STATE = "migrator:m:sync"


class Writes(threading.Thread):
    """The sync workload's random transactions until ``stop``; a refused or lost connection
    (the server down) is tried again after a short pause."""

    def __init__(self, db: Any) -> None:
        super().__init__(name="writes", daemon=True)
        self.db, self.stop, self.done = db, threading.Event(), 0

    def run(self) -> None:
        seed = 350
        while not self.stop.is_set():
            seed += 1
            try:
                write_random(self.db, seed, 5)
                self.done += 1
            except pymysql.MySQLError:
                self.stop.wait(0.2)


def _setup(
    db: Any, url: str, tmp_path: Path, attempts: int, reader: str
) -> tuple[list[str], dict[str, str]]:
    db.run(SCHEMA)
    mapping = tmp_path / "m.yaml"
    mapping.write_text(MAPPING + RETRIES % attempts)
    env = {**os.environ, "MIGRATOR_SYNC_SERVER_ID": str(next(_ids)), "MIGRATOR_SYNC_READER": reader}
    return ["sync", str(mapping), "--source", db.url, "--target", url], env


@pytest.mark.parametrize("reader", ["process", "thread"])
def test_a_clean_shutdown_while_following_is_ridden_out(
    own_source: PrivateMariaDB | PrivateMySQL, reader: str, redis_url: str, tmp_path: Path
) -> None:
    db = create_database(own_source.url, "mig_t_shutdown")
    base, env = _setup(db, redis_url, tmp_path, 60, reader)
    client = redis.Redis.from_url(redis_url)
    writes = Writes(db)
    with following(base, env) as proc:
        writes.start()
        try:
            wait_for("writes applied", lambda: writes.done >= 3 and client.hget(STATE, "pos"), 60)
            own_source.halt()  # SIGTERM: a clean shutdown
            time.sleep(1.0)
            own_source.start()
            before = writes.done
            wait_for("writes after the restart", lambda: writes.done >= before + 5, 60)
        finally:
            writes.stop.set()
            writes.join(30)
        head = master_position(db)
        at = [head.file.encode(), b"%d" % head.pos]

        def at_head() -> bool:
            return proc.poll() is not None or client.hmget(STATE, ["file", "pos"]) == at

        wait_for(f"sync at {head}", at_head, 120)
        assert proc.poll() is None, (
            f"sync ended by itself ({proc.returncode}): {proc.communicate()}"
        )
        proc.send_signal(signal.SIGTERM)  # the stop someone asks for: exit 0
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err[-2000:]
    last = json.loads(out.splitlines()[-1])
    assert last["stopped"] == "stopped", last
    assert "unexpected" not in err
    m = parse_mapping(MAPPING, name="m")
    assert verify(m, source=db.url, target=redis_url).exit_code == 0


def test_a_clean_shutdown_left_down_is_exit_3_after_the_retries(
    own_source: PrivateMariaDB | PrivateMySQL, redis_url: str, tmp_path: Path
) -> None:
    db = create_database(own_source.url, "mig_t_shutdown_down")
    base, env = _setup(db, redis_url, tmp_path, 3, "process")
    with following(base, env) as proc:
        write_random(db, 360, 5)
        own_source.halt()  # SIGTERM, and not started again
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, (out[-2000:], err[-2000:])
    last = json.loads(out.splitlines()[-1])
    assert last["exit_code"] == 3 and "migrator sync" in last["hint"], last
    assert "unexpected" not in err
