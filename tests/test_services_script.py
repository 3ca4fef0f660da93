"""scripts/services.sh and scripts/demo.sh where no server runs (issue 34), for real.

The shared MariaDB and Redis cannot be stopped for a test, so the script is pointed at ports
where nothing listens (``MIGRATOR_MYSQL_PORT``, ``MIGRATOR_REDIS_PORT``) and a work directory
of the test's (``MIGRATOR_SERVICES_DIR``): it starts a private mariadbd (mariadb-install-db,
a few seconds) and redis-server on other free ports, records them in urls.env, and ``stop``
ends them, leaving no process. The same servers then stand in for a running server that
refuses root without a password: the script says what the demo needs, exits 1 and changes
nothing. Plain pytest finds them too (tests/local_servers.py). Marked ``integration``: it
starts servers (one mariadb-install-db; the test takes ~20-40 s, most of it the demo and the
pytest it starts).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pymysql
import pytest
import redis

from tests.binlog_server import free_port, missing
from tests.local_servers import find_local_servers, recorded_urls
from tests.reaper import register

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "scripts" / "services.sh"


def _ports(n: int) -> list[int]:
    ports: set[int] = set()
    while len(ports) < n:
        ports.add(free_port())
    return sorted(ports)


def _run(
    env: dict[str, str], *args: str, script: Path = SCRIPT
) -> subprocess.CompletedProcess[str]:
    argv = ["bash", str(script), *args]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, cwd=REPO)


def _pid(path: Path) -> int:
    return int(path.read_text().strip())


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _processes_in(root: Path) -> list[int]:
    """Processes whose working directory is under ``root`` (the private servers chdir there)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cwd = Path(os.readlink(proc / "cwd"))
            except OSError:
                continue
            if cwd == root or root in cwd.parents:
                found.append(int(proc.name))
    return found


@pytest.fixture
def work(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str], list[int]]]:
    """The work directory, the script's environment (nothing runs on its 'local' ports) and
    the ports (local mysql, local redis, private mysql, private redis); whatever the test
    leaves running is stopped after it."""
    why = missing() or next(
        (f"{p} is not on PATH" for p in ("redis-server", "mariadb") if not shutil.which(p)), None
    )
    if why:
        pytest.skip(f"no private servers here: {why}")
    root = (tmp_path / "svc").resolve()
    ports = _ports(4)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MIGRATOR_")}
    env.update(
        MIGRATOR_SERVICES_DIR=str(root), MIGRATOR_MYSQL_PORT=str(ports[0]),
        MIGRATOR_REDIS_PORT=str(ports[1]), MIGRATOR_PRIVATE_MYSQL_PORT=str(ports[2]),
        MIGRATOR_PRIVATE_REDIS_PORT=str(ports[3]),
    )  # fmt: skip
    try:
        yield root, env, ports
    finally:
        _run(env, "stop")
        for pid in _processes_in(root):
            os.kill(pid, signal.SIGKILL)


def test_private_servers_start_serve_the_tests_and_the_demo_and_stop(
    work: tuple[Path, dict[str, str], list[int]], capsys: pytest.CaptureFixture[str]
) -> None:
    root, env, (_, _, mysql_port, redis_port) = work
    # nothing runs: the tests find no server, and say why in one line each
    bare: dict[str, str] = {k: v for k, v in env.items() if k.startswith("MIGRATOR_")}
    find_local_servers(bare)
    assert "MIGRATOR_TEST_MYSQL_URL" not in bare and "MIGRATOR_TEST_REDIS_URL" not in bare
    said = capsys.readouterr().err.splitlines()
    assert [line.split(";")[0] for line in said] == [
        "tests: MIGRATOR_TEST_MYSQL_URL is not set",
        "tests: MIGRATOR_TEST_REDIS_URL is not set",
    ], said
    assert all("no private server in" in line and "scripts/services.sh" in line for line in said)

    started = _run(env)
    assert started.returncode == 0, started.stderr
    mysql_url = f"mysql+pymysql://root@127.0.0.1:{mysql_port}"
    redis_url = f"redis://127.0.0.1:{redis_port}"
    assert recorded_urls(root / "urls.env") == {
        "MIGRATOR_SERVICES_MYSQL_URL": mysql_url,
        "MIGRATOR_SERVICES_REDIS_URL": redis_url,
    }
    conn = pymysql.connect(host="127.0.0.1", port=mysql_port, user="root", password="")
    with conn.cursor() as cur:  # root with an empty password, on the server's own datadir
        cur.execute("SELECT @@character_set_server, @@log_bin, @@datadir")
        charset, log_bin, datadir = cur.fetchone() or ()
    conn.close()
    assert (charset, log_bin) == ("utf8mb4", 0) and Path(datadir).resolve() == root / "mariadb/data"
    assert redis.Redis(port=redis_port).ping()
    pids = [_pid(root / "mariadb/mariadb.pid"), _pid(root / "redis/redis.pid")]
    for pid in pids:  # they left the process tree: the run's watcher kills them if it dies
        register(pid)
    assert sorted(_processes_in(root)) == sorted(pids)

    again = _run(env)  # a second start uses them
    assert again.returncode == 0 and "the private one" in again.stderr, again.stderr
    assert [_pid(root / "mariadb/mariadb.pid"), _pid(root / "redis/redis.pid")] == pids
    assert _run(env, "url", "mysql").stdout.strip() == mysql_url

    # plain pytest, no MIGRATOR_TEST_* variable, finds them (its report header names them)
    test = "tests/test_services.py::test_redis_url_is_an_empty_database"
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", test]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, cwd=REPO)
    assert "1 passed" in done.stdout, done.stdout + done.stderr
    assert f"MIGRATOR_TEST_REDIS_URL={redis_url}" in done.stdout, done.stdout
    assert f"MIGRATOR_TEST_MYSQL_URL={mysql_url}" in done.stdout, done.stdout

    # `make demo` on a machine without servers: loads, migrates and verifies on them
    demo = _run({**env, "VENV": sys.prefix}, script=REPO / "scripts" / "demo.sh")
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    assert "Redis matches MySQL" in demo.stdout, demo.stdout[-3000:]
    assert redis.Redis(port=redis_port).exists("login:1:name")

    _refused_and_left_as_they_are(env, root.parent / "other", mysql_port, redis_port)

    stopped = _run(env, "stop")
    assert stopped.returncode == 0, stopped.stderr
    assert not (root / "urls.env").exists()
    assert not any(_alive(pid) for pid in pids) and _processes_in(root) == []
    with pytest.raises(pymysql.err.OperationalError):
        pymysql.connect(host="127.0.0.1", port=mysql_port, user="root", connect_timeout=2)
    with pytest.raises(redis.ConnectionError):
        redis.Redis(port=redis_port, socket_connect_timeout=2).ping()


def _refused_and_left_as_they_are(
    env: dict[str, str], other: Path, mysql_port: int, redis_port: int
) -> None:
    """The private servers, made to want a password for root (MariaDB) and for everyone
    (Redis), stand in for a user's running servers: services.sh started from another work
    directory says in one message each what the demo needs, exits 1, starts nothing and
    changes nothing on them; the demo stops there."""
    conn = pymysql.connect(host="127.0.0.1", port=mysql_port, user="root", autocommit=True)
    with conn.cursor() as cur:
        cur.execute("SELECT user, host FROM mysql.user WHERE user = 'root'"
                    " AND host IN ('localhost', '127.0.0.1', '::1')")  # fmt: skip
        for user, host in cur.fetchall():
            cur.execute(f"ALTER USER '{user}'@'{host}' IDENTIFIED BY 'secret'")
    conn.close()
    redis.Redis(port=redis_port).config_set("requirepass", "secret")
    user_env = {
        **env,
        "MIGRATOR_SERVICES_DIR": str(other),
        "MIGRATOR_MYSQL_PORT": str(mysql_port),
        "MIGRATOR_REDIS_PORT": str(redis_port),
    }
    for name, words in (
        ("mysql", ("refused root with an empty password", "migrator_demo", "MIGRATOR_SOURCE_URL")),
        ("redis", ("-NOAUTH", "MIGRATOR_TARGET_URL")),
    ):
        done = _run(user_env, "start", name)
        assert done.returncode == 1, done.stderr
        lines = done.stderr.splitlines()
        assert len(lines) == 1 and "Nothing was changed on it" in lines[0], lines
        assert all(word in lines[0] for word in words), lines[0]
    demo = _run({**user_env, "VENV": sys.prefix}, script=REPO / "scripts" / "demo.sh")
    assert demo.returncode == 1 and "refused root" in demo.stderr, demo.stderr
    assert "loading" not in demo.stdout, demo.stdout
    assert not (other / "mariadb").exists() and not (other / "redis").exists()
    assert _processes_in(other.resolve()) == []
    # root still wants its password, Redis too: nothing was changed
    with pytest.raises(pymysql.err.OperationalError):
        pymysql.connect(host="127.0.0.1", port=mysql_port, user="root", connect_timeout=2)
    pymysql.connect(host="127.0.0.1", port=mysql_port, user="root", password="secret").close()
    with pytest.raises(redis.AuthenticationError):
        redis.Redis(port=redis_port).ping()
