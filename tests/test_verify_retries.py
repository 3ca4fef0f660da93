"""verify retries like migrate (issue 16 item 7): the mapping's ``options.retries`` and
``--retries N`` bound how often a lost connection is tried again, against a redis-server of the
test's own that dies (or restarts) while verify reads it; the hint after the retries ran out
names options that verify has."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from migrator.commands import migrate, verify
from migrator.errors import EXIT_CONNECT, ConnectError, MigratorError
from migrator.progress import NullProgress
from migrator.source.drivers import RAW_DRIVER_ENV
from tests.faults import (
    KillMySQLAfter,
    RedisProcess,
    redis_process,
    redis_server_problem,
    wait_for,
)
from tests.services import MySQLDatabase

pytestmark = pytest.mark.skipif(bool(redis_server_problem()), reason=str(redis_server_problem()))

ROWS = 30_000
MAPPING = """\
version: 1
options:
  batch_size: 20
  retries: {{attempts: {attempts}, backoff: 0.1, max_backoff: 0.5}}
tables:
  t:
    indexes: [grp]
"""


def loaded(db: MySQLDatabase, server: RedisProcess, tmp_path: Path, attempts: int) -> Path:
    """A table of ROWS rows, its mapping (batches of 20 rows: a long verify) and its load."""
    db.run(
        "CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(40), grp INT, KEY (grp));"
        f"INSERT INTO t SELECT seq, CONCAT('name ', seq), seq % 97 FROM seq_1_to_{ROWS};"
    )
    path = tmp_path / "t.yaml"
    path.write_text(MAPPING.format(attempts=attempts))
    migrate(path, source=db.url, target=server.url, workers=1)
    return path


def commands_done(server: RedisProcess) -> int:
    client = server.client()
    try:
        return int(client.info("stats")["total_commands_processed"])
    finally:
        client.close()


class KillAfter(NullProgress):
    """Kills the server (SIGKILL, for good) once verify has read ``rows`` rows."""

    def __init__(self, server: RedisProcess, rows: int) -> None:
        self.server, self.rows, self.seen = server, rows, 0

    def advance(self, table: str, n: int) -> None:
        self.seen += n
        if self.seen >= self.rows:
            self.server.stop(kill=True)  # (once: a stopped server is left as it is)


def test_verify_follows_the_mappings_retries(mysql_db: MySQLDatabase, tmp_path: Path) -> None:
    with redis_process(tmp_path) as server:
        path = loaded(mysql_db, server, tmp_path, attempts=1)
        started = time.monotonic()
        with pytest.raises(ConnectError) as stopped:
            verify(path, source=mysql_db.url, target=server.url, progress=KillAfter(server, 200))
        assert "still failing after 1 retries" in stopped.value.message
        assert time.monotonic() - started < 30  # not the default 8 retries (~45 s of waits)
        assert "--retries N (migrate, verify)" in (stopped.value.hint or "")


@pytest.mark.parametrize("reader", ["asyncmy", "pymysql"])
def test_verify_reads_mysql_again_as_retries_says(
    mysql_db: MySQLDatabase, tmp_path: Path, reader: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A KILL of the reading connection, through either reader: exit 3 without retries; with
    them verify reads on from where it was, every row once, through the same reader."""
    monkeypatch.setenv(RAW_DRIVER_ENV, reader)
    with redis_process(tmp_path) as server:
        path = loaded(mysql_db, server, tmp_path, attempts=8)
        killer = KillMySQLAfter(mysql_db, 200)
        with pytest.raises(ConnectError, match="still failing after 0 retries"):
            verify(path, source=mysql_db.url, target=server.url, retries=0, progress=killer)
        assert killer.killed
        killer = KillMySQLAfter(mysql_db, 200)
        report = verify(path, source=mysql_db.url, target=server.url, retries=2, progress=killer)
        assert killer.killed and report.exit_code == 0, report.as_dict()
        assert [t.readers for t in report.tables] == [{reader: ROWS}]


def test_verify_retries_overrides_the_mapping_and_outlasts_a_restart(
    mysql_db: MySQLDatabase, tmp_path: Path
) -> None:
    with redis_process(tmp_path, appendonly=True) as server:
        path = loaded(mysql_db, server, tmp_path, attempts=0)
        base = commands_done(server)
        with server.bounce_when(lambda: commands_done(server) > base + 300, down=1.0):
            report = verify(path, source=mysql_db.url, target=server.url, retries=30)
        assert server.restarts == 1
        assert report.exit_code == 0, report.as_dict()


def cli(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "migrator", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def test_verify_retries_0_stops_at_once_when_redis_dies_mid_run(
    mysql_db: MySQLDatabase, tmp_path: Path
) -> None:
    with redis_process(tmp_path) as server:
        path = loaded(mysql_db, server, tmp_path, attempts=8)
        base = commands_done(server)
        args = ["verify", str(path), "--source", mysql_db.url, "--target", server.url]
        proc = cli(*args, "--retries", "0")
        try:
            wait_for("verify reading Redis", lambda: commands_done(server) > base + 300, 60)
            server.stop(kill=True)  # gone for good
            stopped = time.monotonic()
            _, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == EXIT_CONNECT, err
        assert time.monotonic() - stopped < 30  # no retry: not the mapping's 8 (~45 s of waits)
        assert "still failing after 0 retries" in err and "Traceback" not in err
        assert "--retries N (migrate, verify)" in err and "--resume" not in err


def test_verify_retries_is_checked_before_connecting(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(MAPPING.format(attempts=1))
    with pytest.raises(MigratorError, match="--retries must be 0 or more"):
        verify(path, source="mysql+pymysql://root@127.0.0.1:1/x", retries=-1)


def test_verify_fix_on_a_full_redis_is_exit_4_with_a_hint(
    mysql_db: MySQLDatabase, tmp_path: Path
) -> None:
    """Redis at its maxmemory refuses the repairs of ``verify --fix`` (issue 35 item 3): exit
    4 and a hint that says what to fix, as migrate and sync (before: exit 1, no hint)."""
    values = ", ".join(f"({i}, 'name {i}', {i % 7})" for i in range(1, 301))
    mysql_db.run(f"CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(40), grp INT, KEY (grp));"
                 f"INSERT INTO t VALUES {values};")  # fmt: skip
    path = tmp_path / "t.yaml"
    path.write_text(MAPPING.format(attempts=1))
    with redis_process(tmp_path, extra=("--maxmemory-policy", "noeviction")) as server:
        migrate(path, source=mysql_db.url, target=server.url, workers=1)
        client = server.client()
        try:
            client.delete(*[f"t:{i}" for i in range(1, 301, 3)])  # rows --fix writes again
            client.config_set("maxmemory", "1")  # below what it uses: every write refused
        finally:
            client.close()
        args = ["verify", str(path), "--source", mysql_db.url, "--target", server.url, "--fix"]
        proc = cli(*args)
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 4, err
    text = " ".join(err.split())
    assert "maxmemory" in text and "hint" in text.lower() and "Traceback" not in err, err
