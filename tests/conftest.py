"""Fixtures for real MySQL/MariaDB and Redis servers (README.md, "Tests").

Every test that uses a MySQL-compatible server runs on each engine (tests/engines.py): the
``engine`` fixture's params ``mariadb`` and ``mysql`` (Oracle MySQL) appear in the test ids;
``MIGRATOR_TEST_ENGINES=mariadb`` (or ``mysql``) keeps one. A test that holds on one engine only
says why: ``@pytest.mark.engine("mariadb", why="...")`` skips its other variant with that reason.
Servers are found once per session:

1. MariaDB: ``MIGRATOR_TEST_MYSQL_URL`` (e.g. ``mysql+pymysql://root@127.0.0.1:3306``; where
   unset, tests/local_servers.py fills it and ``MIGRATOR_TEST_REDIS_URL`` with the servers
   ``make test`` uses: scripts/services.sh's private ones, else the local ones that let root
   in), else a ``mariadb:10.11`` container where Docker answers; Oracle MySQL:
   ``MIGRATOR_TEST_ORACLE_MYSQL_URL``, else a private MySQL 9.7 the session starts
   (scripts/mysql-server.sh; binary log and GTIDs on), else a ``mysql:8.0`` container where
   Docker answers; Redis: ``MIGRATOR_TEST_REDIS_URL``, else a ``redis:7`` container;
2. otherwise the test is skipped with the reason, or fails when ``MIGRATOR_REQUIRE_SERVICES=1``
   (CI). ``MIGRATOR_REQUIRE_TESTDATA=1`` does the same for the Sakila/employees files and the
   client that loads them.

``MIGRATOR_TEST_TARGET=redis8`` or ``valkey8`` makes the session's Redis a server of that flavor
instead, started by scripts/redis-server.sh, and puts its ``redis-server``/``redis-cli`` first
on PATH for the servers tests start themselves (tests/targets.py; ``-m targets`` selects the
target matrix). ``MIGRATOR_TEST_REDIS_PORTS=FIRST-LAST`` keeps the tests' own Redis servers to
that port range.

Fixtures:

* ``engine`` (session) -> ``"mariadb"`` or ``"mysql"``.
* ``mysql_server_url`` (session) -> str: SQLAlchemy URL of the engine's server, no database.
* ``mysql_db`` -> :class:`tests.services.MySQLDatabase`: a fresh utf8mb4 database of its own
  (``.name``, ``.url``, ``.run(sql)``, ``.query(sql)``), dropped after the test.
* ``oracle_mysql`` (session) -> the session's Oracle MySQL (tests/engines.py ``OracleMySQL``).
* ``redis_server_url`` (session) -> str: the Redis server URL as configured.
* ``redis_url`` -> str: an empty logical database of this session's own (claimed with a lock
  key in db 0, so side-by-side sessions never flush each other; or the URL's own if above 0,
  plus the xdist worker number), flushed before and after the test.
* ``redis_client`` -> ``redis.Redis`` on ``redis_url`` (bytes, ``decode_responses=False``).
* ``binlog_server`` (session, per engine) -> a server of the tests' own with the row binary
  log: ``.kind`` (``mariadb``/``mysql``), ``.url`` (root, empty password), ``.reader_url`` (an
  account with only the grants sync needs). ``mariadb``: a private mariadbd (skipped when it is
  not installed); ``mysql``: the session's Oracle MySQL (the ``mysql_server_url`` one).
* ``modules_server`` (session) -> :class:`tests.modules_server.ModulesServer`: a private Valkey
  8.1 with the RedisJSON and RediSearch modules (from the test wheels of the ``dev`` extra),
  on a free port, stopped after the session; skipped without the wheels (failed under
  ``MIGRATOR_REQUIRE_SERVICES=1``).
* ``modules_redis_url`` -> str: its db 0, emptied of keys and search indexes before and after.
* ``testdata_dir`` (session) -> Path of ``tests/data`` (or ``$MIGRATOR_TESTDATA_DIR``).
* ``sakila_url`` / ``employees_url`` (session) -> str: URL of a database of this session's own
  (``mig_t_sakila_<hex>``, ``mig_t_employees_<hex>``), loaded with the mariadb/mysql client
  at first use (by the engine's own client) and dropped at the end of the session.

The run's first process starts a watcher (tests/reaper.py) that kills every server the run
started once the run is gone, however it ended (``kill -9`` included). ``make test`` runs the
suite on xdist workers (``-n 4``): each worker has its own session servers (Oracle MySQL,
private mariadbd, Cluster, modules server), its own Redis database and database names.

Tests that use a server fixture are marked ``integration``; those that use Sakila or
employees also ``acceptance`` (``pytest -m "not integration"`` runs the pure tests only).
Tests marked ``long`` are left out unless asked for (``make test-long``: ``pytest -m long``;
or their node id); ``workers`` marks those whose outcome depends on the worker count, which
CI runs again with ``MIGRATOR_WORKERS=4`` (pyproject.toml's markers say more).
"""

from __future__ import annotations

import os
import signal
import socket
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any, NoReturn

import pytest
import redis

from tests.binlog_server import PrivateMariaDB, add_reader, missing
from tests.cluster import free_ports
from tests.engines import (
    ENGINES,
    MARIADB_IMAGE,
    MARIADB_OPTIONS,
    ORACLE_ENV,
    BinlogServer,
    OracleMySQL,
    engines_selected,
    start_oracle_mysql,
    wrong_engine,
)
from tests.local_servers import find_local_servers
from tests.modules_server import ModulesServer, ModulesUnavailable
from tests.modules_server import start as start_modules_server
from tests.reaper import start_watcher
from tests.services import (
    MYSQL_ENV,
    REDIS_ENV,
    REQUIRE_ENV,
    REQUIRE_TESTDATA_ENV,
    MySQLDatabase,
    Unavailable,
    create_database,
    docker_problem,
    drop_database,
    load_employees,
    load_sakila,
    make_safe,
    mysql_container,
    new_database_name,
    probe_mysql,
    probe_redis,
    redis_base_db,
    redis_container,
    redis_db_url,
    sample_database_name,
    server_url,
    services_required,
    testdata_required,
    xdist_worker_number,
)
from tests.services import testdata_dir as find_testdata_dir
from tests.targets import (
    FLAVORS,
    TARGET_ENV,
    FlavorServer,
    TargetProblem,
    mark_the_matrix,
    target,
    use_flavor_binaries,
)

_INTEGRATION = {
    "engine", "oracle_mysql", "mysql_server_url", "mysql_db", "redis_server_url", "redis_url",
    "redis_client",
    "sakila_url", "employees_url", "binlog_server", "modules_server", "modules_redis_url",
}  # fmt: skip
_ACCEPTANCE = {"sakila_url", "employees_url"}


def _unavailable(reason: str) -> NoReturn:
    if services_required():
        pytest.fail(f"{reason} [{REQUIRE_ENV}=1: a missing server is a failure]", pytrace=False)
    pytest.skip(reason)


def pytest_configure(config: pytest.Config) -> None:
    """Ctrl-C as a terminal gives it. A suite started in the background of a shell without
    job control (``nohup ... &``, a script's ``&``, some CI runners) inherits SIGINT
    ignored, and so would every command the tests start: Python then installs no
    KeyboardInterrupt handler, and the tests of Ctrl-C (a SIGINT to ``migrate``) see it
    ignored, exit 0 instead of 130. Caught here, it is the default again in children."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    _keep_bytecode()
    if not hasattr(config, "workerinput"):  # the run's first process, not an xdist worker
        start_watcher()  # servers die with the run, however it ends (tests/reaper.py)
    _use_target_binaries()
    find_local_servers()  # the servers `make test` uses, where the environment names none


def _keep_bytecode() -> None:
    """Compiled modules are written and reused during the run, whatever PYTHONDONTWRITEBYTECODE
    says: without them every ``migrator`` the tests start (hundreds: sync's reader process,
    migrate's workers, the commands) compiles the package from source again (~0.4 s of CPU
    each), and every xdist worker rewrites every test module's asserts again (most of a
    collection's time). ``__pycache__`` is in .gitignore."""
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    sys.dont_write_bytecode = False


def _use_target_binaries() -> None:
    """``MIGRATOR_TEST_TARGET=redis8|valkey8``: that flavor's redis-server and redis-cli first
    on PATH for the whole run (tests/targets.py), before any test starts a server."""
    try:
        flavor = target()
        if flavor in FLAVORS:
            use_flavor_binaries(flavor)
    except TargetProblem as e:
        raise pytest.UsageError(str(e)) from None


@pytest.hookimpl(tryfirst=True)  # before xdist's, which reads the xdist_group markers
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        if names & _INTEGRATION:
            item.add_marker(pytest.mark.integration)
        if names & _ACCEPTANCE:
            item.add_marker(pytest.mark.acceptance)
        _only_engine(item)
        _group_by_module_and_engine(item)
    mark_the_matrix(items)
    _leave_out_long(config, items)
    _leave_out_engines(config, items)


def _only_engine(item: pytest.Item) -> None:
    """``@pytest.mark.engine("mariadb", why="...")``: the test holds on that engine only; its
    variant on the other is skipped with the reason."""
    mark = item.get_closest_marker("engine")
    if mark is None:
        return
    if not mark.args or mark.args[0] not in ENGINES or not mark.kwargs.get("why"):
        raise pytest.UsageError(
            f'{item.nodeid}: @pytest.mark.engine wants one of {ENGINES} and why="..."'
        )
    callspec = getattr(item, "callspec", None)
    running = callspec.params.get("engine") if callspec is not None else None
    if running is not None and running != mark.args[0]:
        item.add_marker(pytest.mark.skip(reason=f"{mark.args[0]} only: {mark.kwargs['why']}"))


def _group_by_module_and_engine(item: pytest.Item) -> None:
    """Meant for ``--dist loadgroup`` (``make test TEST_WORKERS=N``): a module's tests of one
    engine on one xdist worker, its module fixtures made once per engine. As measured
    (pytest-xdist 3.8), the markers do not take effect from here: the workers still get a
    module's tests of both engines (docs/performance.md, "The test suite")."""
    callspec = getattr(item, "callspec", None)
    running = callspec.params.get("engine") if callspec is not None else None
    if running is not None:
        item.add_marker(pytest.mark.xdist_group(f"{item.nodeid.split('::')[0]}-{running}"))


def _leave_out_engines(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``MIGRATOR_TEST_ENGINES=mariadb`` (or ``mysql``) deselects the other engine's variants."""
    wanted = engines_selected()
    keep, left = [], []
    for item in items:
        callspec = getattr(item, "callspec", None)
        running = callspec.params.get("engine") if callspec is not None else None
        (left if running is not None and running not in wanted else keep).append(item)
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = keep


def _leave_out_long(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``long`` run only when asked for: a ``-m`` expression that names them
    (``make test-long`` is ``pytest -m long``), or their node id on the command line; else
    they are deselected."""
    if "long" in (config.getoption("markexpr") or ""):
        return
    named = []
    for arg in config.args:
        path, sep, rest = arg.partition("::")
        if sep:
            rel = Path(os.path.relpath(os.path.abspath(path), config.rootpath)).as_posix()
            named.append(f"{rel}::{rest}")
    keep, left = [], []
    for item in items:
        asked = any(item.nodeid == n or item.nodeid.startswith((n + "[", n + "::")) for n in named)
        (left if item.get_closest_marker("long") and not asked else keep).append(item)
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = keep


def pytest_report_header() -> list[str]:
    def source(env: str) -> str:
        value = os.environ.get(env)
        return f"{env}={make_safe(value)}" if value else "testcontainers if Docker answers"

    required = " (required)" if services_required() else ""
    oracle = os.environ.get(ORACLE_ENV)
    mysql = f"{ORACLE_ENV}={make_safe(oracle)}" if oracle else "scripts/mysql-server.sh"
    redis_source = source(REDIS_ENV)
    flavor = target()
    if flavor in FLAVORS:
        redis_source = f"{flavor} of scripts/redis-server.sh ({TARGET_ENV}; its binaries on PATH)"
    return [
        f"services{required}: engines {','.join(engines_selected())};"
        f" mariadb: {source(MYSQL_ENV)}; mysql: {mysql}; redis: {redis_source}"
    ]


# -- the two engines: MariaDB and Oracle MySQL ---------------------------------------------------


@pytest.fixture(scope="session", params=ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    """``mariadb`` or ``mysql``: every test that uses a MySQL-compatible server runs on each
    (``MIGRATOR_TEST_ENGINES`` keeps some: ``mariadb``, ``mysql``)."""
    return str(request.param)


@pytest.fixture(scope="session")
def oracle_mysql() -> Iterator[OracleMySQL]:
    """The session's Oracle MySQL, binary log and GTIDs on (tests/engines.py says which)."""
    with ExitStack() as stack:
        try:
            server = stack.enter_context(start_oracle_mysql())
        except Unavailable as e:
            _unavailable(str(e))
        yield server


@pytest.fixture(scope="session")
def mysql_server_url(engine: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """SQLAlchemy URL of the engine's server, without a database: MariaDB at
    ``MIGRATOR_TEST_MYSQL_URL`` (else a ``mariadb:10.11`` container); Oracle MySQL at
    ``MIGRATOR_TEST_ORACLE_MYSQL_URL``, else one of the session's own (``oracle_mysql``)."""
    if engine == "mysql":
        server: OracleMySQL = request.getfixturevalue("oracle_mysql")
        yield server.url
        return
    configured = os.environ.get(MYSQL_ENV)
    if configured:
        try:
            url = server_url(configured)
        except (Unavailable, ValueError) as e:
            _unavailable(f"{MYSQL_ENV} is not usable: {e}")
        problem = probe_mysql(url) or wrong_engine(url, "mariadb", MYSQL_ENV)
        if problem:
            _unavailable(f"{MYSQL_ENV}={make_safe(url)}: {problem}")
        yield url
        return
    problem = docker_problem()
    if problem:
        _unavailable(f"no MariaDB server: {MYSQL_ENV} is not set, and {problem}")
    with ExitStack() as stack:
        try:
            url = stack.enter_context(mysql_container(MARIADB_IMAGE, MARIADB_OPTIONS))
        except Exception as e:
            _unavailable(f"could not start a {MARIADB_IMAGE} container: {type(e).__name__}: {e}")
        yield url


@pytest.fixture
def mysql_db(mysql_server_url: str) -> Iterator[MySQLDatabase]:
    """A fresh, empty utf8mb4 database for this test only; dropped afterwards."""
    db = create_database(mysql_server_url, new_database_name())
    try:
        yield db
    finally:
        drop_database(mysql_server_url, db.name)


# -- servers with the row binary log (sync, snapshot positions) -------------------------------


@pytest.fixture(scope="session")
def per_engine() -> Iterator[dict[object, object]]:
    """What the session keeps of each engine until it ends: a session fixture that depends on
    ``engine`` is torn down whenever the tests switch engines (an xdist worker switches several
    times), so the costly ones (a private mariadbd, the sample databases' loads) keep what they
    made here, made once, stopped or dropped at the session's end."""
    kept: dict[object, object] = {}
    with ExitStack() as stack:
        kept[ExitStack] = stack
        yield kept


def _kept(
    per_engine: dict[object, object], key: object, make: Callable[[ExitStack], object]
) -> Any:
    if key not in per_engine:
        stack = per_engine[ExitStack]
        assert isinstance(stack, ExitStack)
        per_engine[key] = make(stack)
    return per_engine[key]


@pytest.fixture(scope="session")
def binlog_server(
    engine: str, request: pytest.FixtureRequest, per_engine: dict[object, object]
) -> BinlogServer:
    """A server of this session's own with the row binary log, of each engine in turn: a
    private mariadbd; the session's Oracle MySQL (the same as ``mysql_server_url``'s)."""
    if engine == "mysql":
        mysql: OracleMySQL = request.getfixturevalue("oracle_mysql")
        if not mysql.reader_url:
            mysql.reader_url = add_reader(mysql.url)
        return mysql
    problem = missing()
    if problem:
        pytest.skip(f"no private MariaDB with a binary log: {problem}")

    def start(stack: ExitStack) -> PrivateMariaDB:
        server = PrivateMariaDB()
        stack.callback(server.stop)
        server.start()
        server.reader_url = add_reader(server.url)
        return server

    server: PrivateMariaDB = _kept(per_engine, "binlog-mariadb", start)
    return server


# -- Redis -------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def redis_server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The Redis server URL: a server of ``MIGRATOR_TEST_TARGET``'s flavor started for this
    session; else as configured (or of the container)."""
    flavor = target()
    if flavor in FLAVORS:
        server = FlavorServer(flavor, free_ports(1)[0], tmp_path_factory.mktemp(f"redis-{flavor}"))
        try:
            try:
                url = server.start()
            except TargetProblem as e:
                _unavailable(f"{TARGET_ENV}={flavor}: {e}")
            problem = server.not_the_flavor()
            if problem:
                pytest.fail(problem, pytrace=False)
            yield url
        finally:
            server.stop()
        return
    configured = os.environ.get(REDIS_ENV)
    if configured:
        problem = probe_redis(configured)
        if problem:
            _unavailable(f"{REDIS_ENV}={make_safe(configured)} does not answer: {problem}")
        yield configured
        return
    problem = docker_problem()
    if problem:
        _unavailable(f"no Redis server: {REDIS_ENV} is not set, and {problem}")
    with ExitStack() as stack:
        try:
            url = stack.enter_context(redis_container())
        except Exception as e:
            _unavailable(f"could not start a redis:7 container: {type(e).__name__}: {e}")
        yield url


@pytest.fixture(scope="session")
def redis_test_db(redis_server_url: str) -> Iterator[int]:
    """The logical database this pytest session owns. Sessions running side by side on one
    server (several developers, xdist workers) each claim their own with a lock key in db 0;
    a URL that names a database above 0 is used as given."""
    named = redis.connection.parse_url(redis_server_url).get("db")
    if named:
        yield redis_base_db(redis_server_url) + xdist_worker_number()
        return
    lock = redis.Redis.from_url(redis_db_url(redis_server_url, 0), socket_timeout=10)
    token = f"{socket.gethostname()}:{os.getpid()}"
    claimed = None
    for db in range(1, 16):
        if lock.set(f"migrator-tests:db:{db}", token, nx=True, ex=3 * 3600):
            claimed = db
            break
    for db in range(1, 16) if claimed is None else ():
        if _take_over_a_dead_claim(lock, f"migrator-tests:db:{db}", token):
            claimed = db
            break
    if claimed is None:
        lock.close()
        _unavailable("every Redis database 1-15 is claimed by another test session")
    try:
        yield claimed
    finally:
        if lock.get(f"migrator-tests:db:{claimed}") == token.encode():
            lock.delete(f"migrator-tests:db:{claimed}")
        lock.close()


_TAKE_OVER = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
    redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3])
    return 1
end
return 0
"""


def _take_over_a_dead_claim(lock: redis.Redis, key: str, token: str) -> bool:
    """Claim ``key`` if the process that holds it is gone from this host: a run killed with
    ``kill -9`` (its watcher kills the servers, not the claims) kept its database claimed
    for three hours, and 15 of them left no database to the next run."""
    held = lock.get(key)
    if held is None:
        return bool(lock.set(key, token, nx=True, ex=3 * 3600))
    host, _, pid = held.decode(errors="replace").rpartition(":")
    if host not in ("", socket.gethostname()) or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
        return False  # its owner runs
    except ProcessLookupError:
        pass
    except PermissionError:
        return False
    return bool(lock.eval(_TAKE_OVER, 1, key, held, token, 3 * 3600))


@pytest.fixture
def redis_url(redis_server_url: str, redis_test_db: int) -> Iterator[str]:
    """A URL of an empty logical database, for this test (and session) only."""
    db = redis_test_db
    url = redis_db_url(redis_server_url, db)
    client = redis.Redis.from_url(url, socket_timeout=30)
    try:
        client.flushdb()
    except redis.ResponseError as e:
        client.close()
        pytest.fail(f"cannot use Redis database {db} for tests: {e}", pytrace=False)
    try:
        yield url
    finally:
        client.flushdb()
        client.close()


@pytest.fixture
def redis_client(redis_url: str) -> Iterator[redis.Redis]:
    """A client of the test's empty Redis database (replies as bytes)."""
    client = redis.Redis.from_url(redis_url, decode_responses=False)
    try:
        yield client
    finally:
        client.close()


# -- the sample databases (tests/data) --------------------------------------------------------


def _testdata_unavailable(reason: str) -> NoReturn:
    if testdata_required():
        pytest.fail(f"{reason} [{REQUIRE_TESTDATA_ENV}=1]", pytrace=False)
    _unavailable(reason)


@pytest.fixture(scope="session")
def testdata_dir() -> Path:
    try:
        return find_testdata_dir()
    except Unavailable as e:
        _testdata_unavailable(str(e))


def _drop_if_up(server: str, name: str) -> None:
    """Drop the database, unless its server is gone: a private one (Oracle MySQL) may be
    stopped first at the session's end, and its databases with it."""
    if probe_mysql(server) is None:
        drop_database(server, name)


def _sample_database(
    server: str,
    data: Path,
    dataset: str,
    load: Callable[[str, Path, str], str],
    per_engine: dict[object, object],
) -> str:
    """``dataset`` loaded into a database of this session's own (once per server, kept across
    engine switches: ``per_engine``); dropped at the session's end."""

    def made(stack: ExitStack) -> str:
        name = sample_database_name(dataset)
        stack.callback(_drop_if_up, server, name)
        try:
            return load(server, data, name)
        except Unavailable as e:
            _testdata_unavailable(str(e))

    url: str = _kept(per_engine, (dataset, server), made)
    return url


@pytest.fixture(scope="session")
def sakila_url(mysql_server_url: str, testdata_dir: Path, per_engine: dict[object, object]) -> str:
    """URL of this session's Sakila database (GEOMETRY included on MariaDB too)."""
    return _sample_database(mysql_server_url, testdata_dir, "sakila", load_sakila, per_engine)


@pytest.fixture(scope="session")
def employees_url(
    mysql_server_url: str, testdata_dir: Path, per_engine: dict[object, object]
) -> str:
    """URL of this session's employees database (10,000 employees)."""
    return _sample_database(mysql_server_url, testdata_dir, "employees", load_employees, per_engine)


# -- a Redis Cluster (tests/cluster.py) --------------------------------------------------------


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A 3-primary Redis Cluster of this session's own on free local ports
    (:class:`tests.cluster.ClusterServers`: ``.url``, ``.seeds_url``, ``.ports``,
    ``.flush()``); shut down after the session. Skipped when redis-server/redis-cli are
    missing; when they exist but the cluster does not form, skipped, or failed under
    ``MIGRATOR_REQUIRE_SERVICES=1``."""
    from tests.cluster import ClusterUnavailable, cluster_problem, start_cluster

    problem = cluster_problem()
    if problem:
        pytest.skip(problem)
    try:
        servers = start_cluster(tmp_path_factory.mktemp("redis-cluster"))
    except ClusterUnavailable as e:
        _unavailable(f"no Redis Cluster for the tests: {e}")
    try:
        yield servers
    finally:
        servers.stop()


# -- a server with the JSON type and search (tests/modules_server.py) -----------------------------


@pytest.fixture(scope="session")
def modules_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModulesServer]:
    """Valkey 8.1 with RedisJSON 2.8 and RediSearch 2.10 loaded, of this session's own."""
    try:
        server = start_modules_server(tmp_path_factory.mktemp("modules-server"))
    except ModulesUnavailable as e:
        _unavailable(str(e))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def modules_redis_url(modules_server: ModulesServer) -> Iterator[str]:
    """db 0 of the modules server, without keys or search indexes before and after the test."""
    modules_server.empty()
    try:
        yield modules_server.url
    finally:
        modules_server.empty()


# -- a Redis 8 server (vector sets), of this session's own -----------------------------------------


@pytest.fixture(scope="session")
def redis8_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of a Redis 8 (scripts/redis-server.sh --flavor redis8) on a free port, for the
    features only Redis 8 has (vector sets), whatever the run's target; stopped at the end."""
    server = FlavorServer("redis8", free_ports(1)[0], tmp_path_factory.mktemp("redis8-own"))
    try:
        url = server.start()
    except TargetProblem as e:
        _unavailable(f"no Redis 8 for vector sets: {e}")
    try:
        yield url
    finally:
        server.stop()


@pytest.fixture
def redis8_url(redis8_server: str) -> Iterator[str]:
    """db 0 of the session's Redis 8, empty before and after the test."""
    client = redis.Redis.from_url(redis8_server)
    try:
        client.flushdb()
        yield redis8_server + "/0"
    finally:
        client.flushdb()
        client.close()
