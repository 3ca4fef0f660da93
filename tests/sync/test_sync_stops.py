"""A stopped first ``sync`` load never says "done" (issue 27 item 2): SIGTERM or Ctrl-C while
the first load (or ``--reload``) removes the mapping's old keys is exit 130 with the command
that continues (before: exit 0, "first load done online ... 0 rows in 0 table(s)", Redis
emptied); a stop is acted on between two pages of a removal or of a chunk's read, not after
them; the removal says what it is doing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest
import redis

from migrator.commands.sync import sync
from migrator.errors import LoadInterrupted
from migrator.mapping.loader import parse_mapping
from migrator.progress import NullProgress
from tests.binlog_server import missing
from tests.faults import redis_server_problem
from tests.sync.helpers import cli
from tests.sync.workload import MAPPING, SCHEMA

pytestmark = pytest.mark.skipif(
    redis_server_problem() is not None or missing() is not None,
    reason=f"{redis_server_problem() or missing()}",
)

_ids = iter(range(9400, 9500))
STALE = 200_000  # old keys in the mapping's key space: a removal of a few seconds
MAKE = "for i = 1, tonumber(ARGV[1]) do redis.call('SET', 'emp:old:' .. i, 'x') end return 1"


def _old_keys(client: redis.Redis, n: int = STALE) -> None:
    for at in range(0, n, 50_000):
        client.eval(MAKE.replace("i = 1", f"i = {at + 1}"), 0, at + min(50_000, n - at))


def test_sigterm_while_the_first_load_removes_old_keys_is_130_with_the_command(
    binlog_db: Any, redis_url: str, tmp_path: Path
) -> None:
    binlog_db.run(SCHEMA)
    client = redis.Redis.from_url(redis_url)
    _old_keys(client)
    mapping = tmp_path / "m.yaml"
    mapping.write_text(MAPPING)
    env = {**os.environ, "MIGRATOR_SYNC_SERVER_ID": str(next(_ids)),
           "MIGRATOR_PROGRESS_SECONDS": "1"}  # fmt: skip
    proc = subprocess.Popen(
        cli("sync", str(mapping), "--source", binlog_db.url, "--target", redis_url, "--json"),
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    watchdog = threading.Timer(120, proc.kill)  # no note ever: the readline ends
    watchdog.start()
    try:
        assert proc.stdout is not None
        seen = []
        while "removing the mapping's old keys" not in (line := proc.stdout.readline()):
            assert line, f"no note of the removal: {seen[-3:]}"  # (the removal shows it)
            seen.append(line)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, (out[-2000:], err[-2000:])
    last = json.loads(out.splitlines()[-1])
    assert last["error"] == "interrupted" and "migrator sync" in last["hint"], last
    assert "first load done" not in out and "Traceback" not in err
    assert client.dbsize() > 1000, "stopped at once, not after the whole removal"
    done = sync(parse_mapping(MAPPING, name="m"), source=binlog_db.url, target=redis_url,
                until_caught_up=True, server_id=next(_ids))  # fmt: skip
    assert done.stopped == "caught up" and not client.keys("emp:old:*")


class StopAtStart(NullProgress):
    """Sets ``stop`` when the first table's load starts; counts the rows read after."""

    def __init__(self, stop: threading.Event) -> None:
        self.stop, self.rows = stop, 0

    def start(self, table: str, total: int | None) -> None:
        self.stop.set()

    def advance(self, table: str, rows: int) -> None:
        self.rows += rows


def test_a_stop_as_a_table_starts_reads_none_of_its_rows(binlog_db: Any, redis_url: str) -> None:
    """The online load: a stop that comes as the first table begins (its removal, then its
    chunk) is acted on before any of its rows are read; exit 130 (LoadInterrupted) with the
    command that resumes it, and the next run finishes the load."""
    binlog_db.run(SCHEMA)
    client = redis.Redis.from_url(redis_url)
    _old_keys(client, 20_000)
    stop = threading.Event()
    bars = StopAtStart(stop)
    m = parse_mapping(MAPPING, name="m")
    with pytest.raises(LoadInterrupted, match="resumes it there"):
        sync(m, source=binlog_db.url, target=redis_url, stop=stop, progress=bars,
             server_id=next(_ids))  # fmt: skip
    assert bars.rows == 0
    done = sync(m, source=binlog_db.url, target=redis_url, until_caught_up=True,
                server_id=next(_ids))  # fmt: skip
    assert done.stopped == "caught up" and not client.keys("emp:old:*")
