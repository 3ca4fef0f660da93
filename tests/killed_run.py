"""The run tests/test_reaper.py starts and kills: one test that starts a server of every kind
the suite starts (a private mariadbd, the session's Oracle MySQL, a Redis Cluster, the modules
server, a Dask scheduler and worker), writes their pids to a file, and waits to be killed. Its
name does not match ``test_*.py``: only a run that names it collects it, and it skips unless
``MIGRATOR_KILLED_RUN_DIR`` says where to write."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pymysql
import pytest
import redis
from sqlalchemy.engine import make_url

from tests.cluster import ClusterServers
from tests.dask_cluster import dask_cluster
from tests.engines import BinlogServer, OracleMySQL
from tests.modules_server import ModulesServer

DIR_ENV = "MIGRATOR_KILLED_RUN_DIR"


def _mysql_pid(url: str) -> int:
    u = make_url(url)
    conn = pymysql.connect(host=u.host, port=u.port or 3306, user=u.username or "root")
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT @@pid_file")
            (pid_file,) = cur.fetchone() or ("",)
    finally:
        conn.close()
    return int(Path(str(pid_file)).read_text().strip())


def _redis_pid(port: int) -> int:
    client = redis.Redis(host="127.0.0.1", port=port)
    try:
        return int(client.info("server")["process_id"])
    finally:
        client.close()


@pytest.mark.skipif(not os.environ.get(DIR_ENV), reason=f"run by tests/test_reaper.py ({DIR_ENV})")
def test_start_every_kind_of_server_then_wait(
    binlog_server: BinlogServer,
    oracle_mysql: OracleMySQL,
    redis_cluster: ClusterServers,
    modules_server: ModulesServer,
    tmp_path: Path,
) -> None:
    with dask_cluster(tmp_path / "dask", workers=1) as dask:
        pids = {
            "mariadbd": [_mysql_pid(binlog_server.url)],
            "mysqld": [_mysql_pid(oracle_mysql.url)],
            "redis-server (Cluster nodes)": [_redis_pid(p) for p in redis_cluster.ports],
            "valkey-server (modules)": [_redis_pid(modules_server.port)],
            "dask scheduler and worker": dask.pids(),
        }
        ready = Path(os.environ[DIR_ENV], "ready")
        ready.with_suffix(".tmp").write_text(json.dumps(pids))
        ready.with_suffix(".tmp").rename(ready)
        time.sleep(600)  # killed long before
