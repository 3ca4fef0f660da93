"""Helpers behind the service fixtures in conftest.py: real MySQL/MariaDB and Redis servers.

Nothing here is a mock. The fixtures find servers (README.md, "Tests") in this order:
``MIGRATOR_TEST_MYSQL_URL`` / ``MIGRATOR_TEST_REDIS_URL`` (where unset, tests/local_servers.py
fills them in with the servers of scripts/services.sh or the local ones); else Docker through
testcontainers (``mysql:8``, ``redis:7``); else the test is skipped with the reason, or fails
when ``MIGRATOR_REQUIRE_SERVICES=1``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pymysql
import pymysql.cursors
import redis
from pymysql.constants import CLIENT
from sqlalchemy.engine import URL, make_url

MYSQL_ENV = "MIGRATOR_TEST_MYSQL_URL"
REDIS_ENV = "MIGRATOR_TEST_REDIS_URL"
REQUIRE_ENV = "MIGRATOR_REQUIRE_SERVICES"
REQUIRE_TESTDATA_ENV = "MIGRATOR_REQUIRE_TESTDATA"
TESTDATA_ENV = "MIGRATOR_TESTDATA_DIR"

MYSQL_IMAGE = "mysql:8"
REDIS_IMAGE = "redis:7"
# like the project's shared server: no binary log (MySQL 8 turns it on by default), so the
# tests that expect a snapshot without a log position hold; tests/binlog_server.py has the
# container with the row log
MYSQL_OPTIONS = ("--character-set-server=utf8mb4", "--disable-log-bin")

REPO = Path(__file__).resolve().parent.parent
LOCK_WAIT_SECONDS = 120  # metadata-lock wait of the loading client


class Unavailable(Exception):
    """A server, a client program or the test data cannot be had; the message says why."""


def services_required() -> bool:
    return os.environ.get(REQUIRE_ENV, "").strip() in {"1", "true", "yes"}


def testdata_required() -> bool:
    return os.environ.get(REQUIRE_TESTDATA_ENV, "").strip() in {"1", "true", "yes"}


# -- URLs --------------------------------------------------------------------------------------


def url_text(url: URL) -> str:
    """The URL as text, password included (test servers only; never printed)."""
    return url.render_as_string(hide_password=False)


def server_url(url: str) -> str:
    """The SQLAlchemy URL without its database: ``mysql+pymysql://root@127.0.0.1:3306``."""
    u = make_url(url)
    if u.get_backend_name() != "mysql":
        raise Unavailable(f"{MYSQL_ENV} must be a mysql:// or mysql+driver:// URL, got {u!r}")
    if u.drivername == "mysql":
        u = u.set(drivername="mysql+pymysql")
    return url_text(u._replace(database=None))


def database_url(server: str, database: str) -> str:
    return url_text(make_url(server).set(database=database))


def mysql_connect_args(url: str, **extra: Any) -> dict[str, Any]:
    """pymysql.connect() keyword arguments for a SQLAlchemy MySQL URL."""
    u = make_url(url)
    args: dict[str, Any] = {
        "host": u.host or "127.0.0.1",
        "port": u.port or 3306,
        "user": u.username or "root",
        "password": u.password or "",
        "charset": "utf8mb4",
        "connect_timeout": 5,
    }
    if u.database:
        args["database"] = u.database
    socket = u.query.get("unix_socket")
    if isinstance(socket, str):
        args["unix_socket"] = socket
    args.update(extra)
    return args


def mysql_connect(url: str, **extra: Any) -> pymysql.connections.Connection[Any]:
    return pymysql.connect(**mysql_connect_args(url, **extra))


def redis_db_url(base: str, db: int) -> str:
    """``base`` (``redis://host:port[/n]``) pointed at logical database ``db``."""
    parts = urlsplit(base)
    if parts.scheme not in ("redis", "rediss"):
        raise Unavailable(f"{REDIS_ENV} must be a redis:// or rediss:// URL")
    return urlunsplit(parts._replace(path=f"/{db}"))


def redis_base_db(base: str) -> int:
    """The first logical database tests may use: the URL's own if it names one above 0, else 1."""
    db = redis.connection.parse_url(base).get("db")
    return int(db) if db else 1


def xdist_worker_number() -> int:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")  # "gw0", "gw1", ...
    return int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0


# -- reachability ------------------------------------------------------------------------------


def probe_mysql(url: str, timeout: float = 3.0) -> str | None:
    """None when the server answers, else the reason."""
    try:
        conn = mysql_connect(url, connect_timeout=timeout, database=None)
    except pymysql.MySQLError as e:
        return f"{type(e).__name__}: {e}"
    conn.close()
    return None


def probe_redis(url: str, timeout: float = 2.0) -> str | None:
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=timeout, socket_timeout=timeout)
        try:
            client.ping()
        finally:
            client.close()
    except (redis.RedisError, OSError) as e:
        return f"{type(e).__name__}: {e}"
    return None


@cache
def docker_problem() -> str | None:
    """None when a Docker engine answers and testcontainers is installed, else the reason."""
    try:
        import docker  # optional: only the testcontainers path needs it
        import testcontainers.core.container  # noqa: F401
    except ImportError as e:
        return f"testcontainers/docker is not installed ({e}); pip install -e '.[dev]'"
    try:
        client = docker.from_env(timeout=3)
        try:
            client.ping()
        finally:
            client.close()
    except Exception as e:  # the SDK raises several unrelated types here
        return f"no Docker engine answers ({type(e).__name__}: {e})"
    return None


def wait_until(probe: Any, url: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while True:
        problem = probe(url)
        if problem is None:
            return
        if time.monotonic() > deadline:
            raise Unavailable(
                f"server at {make_safe(url)} did not answer in {seconds:.0f} s: {problem}"
            )
        time.sleep(1.0)


def make_safe(url: str) -> str:
    """A URL for messages: the password masked."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return url.split("@")[-1]


# -- containers (laptops and hosted CI; never on the project's machines) ------------------------


@contextmanager
def mysql_container(
    image: str = MYSQL_IMAGE, options: Sequence[str] = MYSQL_OPTIONS
) -> Iterator[str]:
    """A MySQL container (``mysql:8``, no binary log, unless told otherwise) with an empty root
    password; ``options`` are mysqld's command line. Yields its server URL."""
    from testcontainers.core.container import DockerContainer

    container = (
        DockerContainer(image)
        .with_env("MYSQL_ALLOW_EMPTY_PASSWORD", "yes")
        .with_command(" ".join(options))  # the image's entrypoint passes them to mysqld
        .with_exposed_ports(3306)
    )
    container.start()
    try:
        host = container.get_container_host_ip()
        port = int(container.get_exposed_port(3306))
        url = f"mysql+pymysql://root@{host}:{port}"
        # The image runs a temporary server without networking while it initialises, so the
        # first TCP login that works is the real server.
        wait_until(probe_mysql, url, 180)
        yield url
    finally:
        container.stop()


@contextmanager
def redis_container() -> Iterator[str]:
    """A ``redis:7`` container; yields ``redis://host:port``."""
    from testcontainers.core.container import DockerContainer

    container = DockerContainer(REDIS_IMAGE).with_exposed_ports(6379)
    container.start()
    try:
        host = container.get_container_host_ip()
        port = int(container.get_exposed_port(6379))
        url = f"redis://{host}:{port}"
        wait_until(probe_redis, url, 60)
        yield url
    finally:
        container.stop()


# -- a fresh database per test -----------------------------------------------------------------


@dataclass(frozen=True)
class MySQLDatabase:
    """A database of its own for one test (the ``mysql_db`` fixture)."""

    name: str  # mig_t_<hex>
    url: str  # SQLAlchemy URL including the database
    server_url: str  # the same server, no database

    def connect(self, **extra: Any) -> pymysql.connections.Connection[Any]:
        """A pymysql connection to this database (utf8mb4, multi-statements allowed)."""
        extra.setdefault("client_flag", CLIENT.MULTI_STATEMENTS)
        return mysql_connect(self.url, **extra)

    def run(self, sql: str) -> None:
        """Execute a script of one or more ``;``-separated statements, then commit.

        Every result set is consumed, so an error in any statement is raised here. MariaDB's
        sequence tables (``FROM seq_1_to_500``) work on both engines: :func:`with_seq_rows`.
        DELIMITER and ``source`` are client commands and do not work here (use
        :func:`run_cli_file`).
        """
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                cur.execute(with_seq_rows(sql))
                while True:
                    cur.fetchall()
                    if not cur.nextset():
                        break
            conn.commit()
        finally:
            conn.close()

    def insert(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """``sql`` (an INSERT with ``%s`` placeholders) for each of ``rows``, then commit."""
        conn = self.connect(client_flag=0)
        try:
            with conn.cursor() as cur:
                cur.executemany(sql, rows)
            conn.commit()
        finally:
            conn.close()

    def query(self, sql: str, args: Any = None) -> list[tuple[Any, ...]]:
        """The rows of one statement, as tuples (pymysql's own Python types)."""
        conn = self.connect(client_flag=0)
        try:
            with conn.cursor() as cur:
                cur.execute(sql, args)
                return list(cur.fetchall())
        finally:
            conn.close()


_SEQ = re.compile(r"\bseq_(\d+)_to_(\d+)\b")
_DIGIT = " UNION ALL ".join(f"SELECT {d}" + (" AS d" if d == 0 else "") for d in range(10))


def seq_rows(first: int, last: int) -> str:
    """A derived table of the numbers first..last in column ``seq`` that both engines run
    (MariaDB's ``seq_1_to_n`` is of its SEQUENCE engine; MySQL has none, and its recursive
    CTEs stop at 1000 levels by default)."""
    n = last - first + 1
    places = len(str(max(n, 1)))
    digits = " CROSS JOIN ".join(f"({_DIGIT}) AS d{i}" for i in range(places))
    number = " + ".join(f"d{i}.d * {10**i}" for i in range(places))
    return f"(SELECT {number} + {first} AS seq FROM {digits} WHERE {number} < {n})"


def with_seq_rows(sql: str) -> str:
    """``sql`` with each ``seq_A_to_B`` table replaced by :func:`seq_rows` (same name)."""
    return _SEQ.sub(lambda m: f"{seq_rows(int(m[1]), int(m[2]))} AS {m[0]}", sql)


def new_database_name() -> str:
    return f"mig_t_{uuid.uuid4().hex[:12]}"


def create_database(server: str, name: str) -> MySQLDatabase:
    conn = mysql_connect(server)
    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
    finally:
        conn.close()
    return MySQLDatabase(name=name, url=database_url(server, name), server_url=server)


def drop_database(server: str, name: str) -> None:
    conn = mysql_connect(server)
    try:
        with conn.cursor() as cur:
            # A test that leaks an open transaction would block DROP forever; fail instead.
            cur.execute("SET SESSION lock_wait_timeout = 30")
            cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
    finally:
        conn.close()


@contextmanager
def shard_databases(server: str, schema: str, n: int = 2) -> Iterator[list[MySQLDatabase]]:
    """``n`` fresh databases on ``server``, each with ``schema``: the shards of a sharded
    source's tests (docs/sharding.md); dropped at the end."""
    dbs: list[MySQLDatabase] = []
    try:
        for _ in range(n):
            dbs.append(create_database(server, new_database_name()))
            dbs[-1].run(schema)
        yield dbs
    finally:
        for db in dbs:
            drop_database(server, db.name)


# -- the command-line client (the sample dumps use DELIMITER and `source`) ----------------------


def cli_program() -> str:
    for name in ("mariadb", "mysql"):
        path = shutil.which(name)
        if path:
            return path
    raise Unavailable(
        "neither the 'mariadb' nor the 'mysql' command-line client is on PATH; it is needed to "
        "load the sample test databases (apt-get install mariadb-client, or mysql-client)"
    )


def cli_argv(url: str) -> list[str]:
    """The engine's own client for the server at ``url``: MySQL's ``mysql`` of
    scripts/mysql-server.sh for an Oracle MySQL (when it can be had), else the mariadb/mysql
    client on PATH."""
    if not is_mariadb(url):
        from tests.mysql_server import client_argv, mysql_problem

        if mysql_problem() is None:  # `source` in a script wants --commands since MySQL 8.4
            return [*client_argv(), "--commands"]
    return [cli_program()]


def cli_args(url: str) -> list[str]:
    """Connection options for the mariadb/mysql client, taken from a SQLAlchemy URL.

    The password is not among them: see :func:`cli_env`.
    """
    a = mysql_connect_args(url)
    args = [f"--user={a['user']}"]
    if "unix_socket" in a:
        args += ["--protocol=SOCKET", f"--socket={a['unix_socket']}"]
    else:
        args += ["--protocol=TCP", f"--host={a['host']}", f"--port={a['port']}"]
    args.append("--default-character-set=utf8mb4")
    if "database" in a:
        args.append(f"--database={a['database']}")
    return args


def cli_env(url: str) -> dict[str, str]:
    """The environment for the client: the password, if any, goes in MYSQL_PWD, not argv."""
    env = dict(os.environ)
    env.pop("MYSQL_PWD", None)
    password = make_url(url).password
    if password:
        env["MYSQL_PWD"] = str(password)
    return env


def run_cli_file(url: str, script: Path, cwd: Path | None = None, timeout: float = 300) -> None:
    """Feed ``script`` to the mariadb/mysql client, as ``mariadb ... < script`` would."""
    # A DROP that another connection's open transaction blocks fails after a while, not never.
    init = f"SET SESSION lock_wait_timeout = {LOCK_WAIT_SECONDS}"
    argv = [*cli_argv(url), *cli_args(url), "--batch", "--silent", f"--init-command={init}"]
    with script.open("rb") as stdin:
        proc = subprocess.run(
            argv,
            stdin=stdin,
            capture_output=True,
            cwd=cwd or script.parent,
            env=cli_env(url),
            timeout=timeout,
            check=False,
        )
    if proc.returncode != 0:
        err = proc.stderr.decode(errors="replace").strip()[-2000:]
        hint = ""
        if "Lock wait timeout" in err:
            hint = (
                " (another connection keeps a transaction open on that database: a test"
                " process that did not close its connection? see SHOW PROCESSLIST)"
            )
        raise RuntimeError(
            f"loading {script} into {make_safe(url)} failed (exit {proc.returncode}): {err}{hint}"
        )


# -- the sample databases (Sakila, employees; tests/data) ----------------------------------------

SAKILA_COUNTS = {
    "actor": 200, "address": 603, "category": 16, "city": 600, "country": 109,
    "customer": 599, "film": 1000, "film_actor": 5462, "film_category": 1000,
    "film_text": 1000, "inventory": 4581, "language": 6, "payment": 16044,
    "rental": 16044, "staff": 2, "store": 2,
}  # fmt: skip
EMPLOYEES_COUNTS = {
    "departments": 9, "dept_emp": 11051, "dept_manager": 24, "employees": 10000,
    "salaries": 94917, "titles": 14782,
}  # fmt: skip


def testdata_dir() -> Path:
    """``tests/data`` of this checkout, or ``$MIGRATOR_TESTDATA_DIR``."""
    env = os.environ.get(TESTDATA_ENV)
    path = Path(env) if env else Path(__file__).resolve().parent / "data"
    if not (path / "sakila").is_dir() or not (path / "employees").is_dir():
        raise Unavailable(
            f"the test data is not at {path} (expected sakila/ and employees/ there); "
            f"set {TESTDATA_ENV}"
        )
    return path


def sample_database_name(dataset: str) -> str:
    """A name of this session's own for a sample database: ``mig_t_sakila_<hex>``, so
    sessions side by side on one server never load into, or drop, each other's copy."""
    return f"mig_t_{dataset}_{uuid.uuid4().hex[:10]}"


def is_mariadb(server: str) -> bool:
    conn = mysql_connect(server)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT VERSION()")
            row = cur.fetchone()
    finally:
        conn.close()
    return row is not None and "mariadb" in str(row[0]).lower()


def renamed_script(sql: str, old: str, new: str) -> str:
    """A dump script that names database ``old`` rewritten for database ``new``: its
    ``DROP``/``CREATE SCHEMA|DATABASE`` and ``USE`` statements and its ``old.`` qualifiers
    (Sakila's views). Table names are untouched, ``employees.employees`` included."""
    statement = re.compile(
        r"(?im)^(\s*(?:DROP\s+(?:SCHEMA|DATABASE)\s+IF\s+EXISTS"
        r"|CREATE\s+(?:SCHEMA|DATABASE)(?:\s+IF\s+NOT\s+EXISTS)?|USE)\s+)"
        rf"`?{re.escape(old)}`?(\s*;)"
    )
    out = statement.sub(lambda m: f"{m[1]}`{new}`{m[2]}", sql)
    out = re.sub(rf"(?<![\w.`]){re.escape(old)}\.(?=`?\w)", f"`{new}`.", out)
    left = re.search(rf"(?i)\b(?:SCHEMA|DATABASE|USE)\s+`?{re.escape(old)}`?\s*;", out)
    if left:  # never let a test run DROP the fixed-name database of someone else
        raise RuntimeError(f"could not rename database {old!r} in: {left[0]!r}")
    return out


def _is_loaded(cur: pymysql.cursors.Cursor, database: str, counts: dict[str, int]) -> bool:
    cur.execute(
        "SELECT table_name FROM information_schema.tables"
        " WHERE table_schema = %s AND table_type = 'BASE TABLE'",
        (database,),
    )
    if {str(r[0]) for r in cur.fetchall()} != set(counts):
        return False
    for table, expected in counts.items():
        cur.execute(f"SELECT COUNT(*) FROM `{database}`.`{table}`")
        row = cur.fetchone()
        if row is None or row[0] != expected:
            return False
    return True


def _has_location(cur: pymysql.cursors.Cursor, database: str) -> bool:
    """Sakila loaded with GEOMETRY (not the MariaDB-stripped plain variant)."""
    cur.execute(
        "SELECT COUNT(*) FROM information_schema.columns"
        " WHERE table_schema = %s AND table_name = 'address' AND column_name = 'location'",
        (database,),
    )
    row = cur.fetchone()
    return row is not None and row[0] == 1


def _load(
    server: str,
    name: str,
    scripts: list[tuple[Path, str]],
    cwd: Path,
    complete: Callable[[pymysql.cursors.Cursor], bool],
) -> str:
    """Feed each (file, text) to the client from ``cwd``, then check with ``complete(cur)``."""
    with tempfile.TemporaryDirectory(prefix="migrator-testdata-") as tmp:
        for path, text in scripts:
            script = Path(tmp) / path.name
            script.write_text(text, encoding="utf-8")
            run_cli_file(server, script, cwd=cwd)
    conn = mysql_connect(server)
    try:
        with conn.cursor() as cur:
            if not complete(cur):
                raise RuntimeError(f"{name} loaded without error but its tables or rows differ")
    finally:
        conn.close()
    return database_url(server, name)


def load_sakila(server: str, data: Path, name: str) -> str:
    """Load Sakila (``sakila/sakila-{schema,data}.sql``) as database ``name``; returns its URL.

    On MariaDB the files' ``/*!50705`` markers become ``/*M!50705`` on the way in, so
    ``address.location`` (GEOMETRY) and its SPATIAL index are created as on MySQL, which runs
    ``/*!50705`` itself (sakila/SOURCE.md, "MariaDB 10.11 compatibility").
    """
    folder = data / "sakila"
    mariadb = is_mariadb(server)
    scripts = []
    for part in ("schema", "data"):
        path = folder / f"sakila-{part}.sql"
        text = renamed_script(path.read_text(encoding="utf-8"), "sakila", name)
        if mariadb:
            text = text.replace("/*!50705 ", "/*M!50705 ")
        scripts.append((path, text))
    return _load(
        server,
        name,
        scripts,
        folder,
        lambda cur: _is_loaded(cur, name, SAKILA_COUNTS) and _has_location(cur, name),
    )


def load_employees(server: str, data: Path, name: str) -> str:
    """Load the 10k-employee cut as database ``name``; returns its URL. ``employees.sql``
    runs ``source load_*.dump`` relative to the client's directory, so it runs from
    ``employees/``."""
    folder = data / "employees"
    path = folder / "employees.sql"
    text = renamed_script(path.read_text(encoding="utf-8"), "employees", name)
    return _load(
        server, name, [(path, text)], folder, lambda cur: _is_loaded(cur, name, EMPLOYEES_COUNTS)
    )


def key_values(client: Any, skip: Callable[[bytes], bool], ttl: bool = False) -> dict[bytes, Any]:
    """Every key of the client's database but those ``skip`` names, with its whole value
    (by its type), and with ``ttl`` as ``(value, PTTL in ms; -1: none)``."""
    read: dict[bytes, Callable[[bytes], Any]] = {
        b"string": client.get, b"hash": client.hgetall, b"set": client.smembers,
        b"zset": lambda k: client.zrange(k, 0, -1, withscores=True),
        b"list": lambda k: client.lrange(k, 0, -1),
    }  # fmt: skip
    out: dict[bytes, Any] = {}
    for key in client.scan_iter(count=1000):
        if skip(key):
            continue
        value = read[client.type(key)](key)
        out[key] = (value, client.pttl(key)) if ttl else value
    return out
