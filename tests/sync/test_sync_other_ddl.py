"""sync's stored position advances past DDL of other databases (issue 27 item 6): such a
statement commits by itself, with no XID, and was never applied, so the stored position stayed
at the last transaction of the mapped database (lag and health were fine)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.binlog_server import missing
from tests.faults import redis_server_problem, wait_for
from tests.services import create_database, drop_database
from tests.sync.helpers import following, master_position
from tests.sync.workload import MAPPING, SCHEMA

pytestmark = pytest.mark.skipif(
    redis_server_problem() is not None or missing() is not None,
    reason=f"{redis_server_problem() or missing()}",
)


def test_the_stored_position_moves_past_another_databases_ddl(
    binlog_db: Any, redis_url: str, tmp_path: Path
) -> None:
    binlog_db.run(SCHEMA)
    mapping = tmp_path / "m.yaml"
    mapping.write_text(MAPPING)
    env = {**os.environ, "MIGRATOR_SYNC_SERVER_ID": "9731"}
    base = ["sync", str(mapping), "--source", binlog_db.url, "--target", redis_url]
    other = create_database(binlog_db.server_url, binlog_db.name + "_other")
    client = redis.Redis.from_url(redis_url)
    try:
        with following(base, env) as proc:
            other.run("CREATE TABLE t (id INT PRIMARY KEY); ALTER TABLE t ADD COLUMN v INT;")
            end = master_position(binlog_db)

            def stored() -> tuple[str, int]:
                raw = client.hmget("migrator:m:sync", ["file", "pos"])
                return (raw[0] or b"").decode(), int(raw[1] or 0)

            wait_for("the stored position at the log's end", lambda: stored() >= (end.file,
                     end.pos), 30)  # fmt: skip
            proc.terminate()
            proc.communicate(timeout=60)
        assert proc.returncode == 0
    finally:
        drop_database(binlog_db.server_url, other.name)
