"""Exit codes that mean what the docs say (issue 27 item 3): Redis refusing writes for
``maxmemory`` is exit 4 — a condition to fix in Redis — with the position kept, so a plain
start goes on once Redis has room (before: exit 1, documented as "a DDL: fix the mapping, do
not restart"); the systemd unit of docs/sync.md does not restart on it (tests/
test_sync_service.py)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from migrator.commands import verify
from migrator.commands.sync import sync
from migrator.errors import EXIT_TARGET
from migrator.mapping.loader import parse_mapping
from tests.binlog_server import missing
from tests.faults import redis_process, redis_server_problem
from tests.sync.helpers import cli, following
from tests.sync.workload import MAPPING, SCHEMA

pytestmark = pytest.mark.skipif(
    redis_server_problem() is not None or missing() is not None,
    reason=f"{redis_server_problem() or missing()}",
)

_ids = iter(range(9500, 9600))


def test_redis_out_of_memory_while_following_is_exit_4_with_the_position_kept(
    binlog_db: Any, tmp_path: Path
) -> None:
    binlog_db.run(SCHEMA)
    with redis_process(tmp_path, extra=("--maxmemory-policy", "noeviction")) as server:
        mapping = tmp_path / "m.yaml"
        mapping.write_text(MAPPING)
        base = ["sync", str(mapping), "--source", binlog_db.url, "--target", server.url]
        env = {**os.environ, "MIGRATOR_SYNC_SERVER_ID": str(next(_ids))}
        client = server.client()
        with following(base, env) as proc:
            stored = client.hget("migrator:m:sync", "pos")
            client.config_set("maxmemory", "1")  # below what it uses: every write refused
            binlog_db.run("INSERT INTO emp (email, login) VALUES ('oom@x', 'oom')")
            out, err = proc.communicate(timeout=120)
        assert proc.returncode == EXIT_TARGET, (out[-2000:], err[-2000:])
        last = json.loads(out.splitlines()[-1])
        assert last["exit_code"] == EXIT_TARGET and "OOM" in last["error"], last
        hint = " ".join(last["hint"].split())
        assert "maxmemory" in hint and "migrator sync" in hint and "Redis holds" in hint, hint
        assert client.hget("migrator:m:sync", "pos") == stored, "the position is kept"
        client.config_set("maxmemory", "0")
        done = subprocess.run(cli(*base, "--until-caught-up"), env=env, capture_output=True,
                              text=True, timeout=120)  # fmt: skip
        assert done.returncode == 0, done.stderr
        m = parse_mapping(MAPPING, name="m")
        assert verify(m, source=binlog_db.url, target=server.url).exit_code == 0
        assert sync(m, source=binlog_db.url, target=server.url, until_caught_up=True,
                    server_id=next(_ids)).stopped == "caught up"  # fmt: skip
