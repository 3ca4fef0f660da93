"""``migrator dry-run``: the plan, sample commands, the memory estimate and the RESP export.

Pure tests cover quoting and the memory model; integration tests prove that dry-run never
touches Redis, that its RESP file loads exactly what migrate writes, and that its memory
estimate is within ±30% of the real ``used_memory`` growth on Sakila and employees.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from typer.testing import CliRunner

from migrator.cli import app
from migrator.commands import init, migrate
from migrator.commands.dryrun import command_line, dry_run, quote
from migrator.plan.estimate import (
    Aggregate,
    Limits,
    MemoryModel,
    jemalloc,
    lp_entry,
    string_value,
    target_limits,
)
from tests.services import MySQLDatabase

WRITES = ("set", "hset", "sadd", "zadd", "rpush", "del", "multi", "exec", "flushdb", "flushall")

SAMPLE_SQL = """
CREATE TABLE emp (
  emp_id INT PRIMARY KEY, ename VARCHAR(40) NOT NULL, email VARCHAR(80) UNIQUE,
  mgr_id INT NULL, dept_id INT NULL, salary DECIMAL(10,2) NULL, hired DATETIME NULL,
  note VARBINARY(40) NULL, KEY (mgr_id)
);
INSERT INTO emp VALUES
  (1, 'SMITH', 'smith@example.com', 8, 20, 800.00, '1980-12-17 00:00:00', NULL),
  (2, 'ALLEN', 'allen@example.com', 6, 30, 1600.00, '1981-02-20 00:00:00', 'two words'),
  (3, 'WARD', NULL, 6, 30, 1250.00, '1981-02-22 00:00:00', X'FF00FE'),
  (4, 'JONES', 'jones@example.com', NULL, 20, NULL, NULL, 'say "hi", it''s \\\\ ok'),
  (5, 'O''BRIEN', 'ob@example.com', 8, NULL, 950.50, '1982-01-23 10:00:00', '');
CREATE TABLE login (
  id INT PRIMARY KEY, name VARCHAR(40) NOT NULL UNIQUE, login_times INT NOT NULL,
  last_login DATETIME NOT NULL
);
INSERT INTO login VALUES (1, 'ken thompson', 5, '2011-01-01 00:00:00'),
  (2, 'dennis ritchie', 1, '2011-01-02 00:00:00'), (3, 'Joe Armstrong', 2, '2011-01-03 00:00:00');
CREATE TABLE book_tag (
  book_id INT NOT NULL, tagname VARCHAR(40) NOT NULL, PRIMARY KEY (book_id, tagname)
);
INSERT INTO book_tag VALUES (1, 'ruby'), (1, 'programming'), (2, 'ruby'), (2, 'web'), (3, 'web');
"""

SAMPLE_MAPPING = """
version: 1
tables:
  emp:
    columns: [ename, mgr_id, note]
    unique: [email]
    indexes: [mgr_id, [dept_id, mgr_id]]
    sorted:
      - key: "emp:by:salary"
        score: salary
    latest:
      - key: "emp:latest:hired"
        order_by: hired
        limit: 3
  login:
    as: columns
    columns: [login_times]
    unique:
      - columns: [name]
        key: "login:{name}:id"
    sorted:
      - key: "login:login_times"
        score: login_times
    latest:
      - key: "login:last_login_times"
        order_by: last_login
        limit: 2
  book_tag:
    as: none
    sets:
      - key: "tag:{tagname}"
        member: "{book_id}"
"""


# -- pure: quoting ------------------------------------------------------------------------------


def test_plain_arguments_stay_bare() -> None:
    cmd = (b"HSET", b"emp:1", b"ename", b"SMITH", b"mgr_id", b"8")
    assert command_line(cmd) == "HSET emp:1 ename SMITH mgr_id 8"


@pytest.mark.parametrize(
    ("arg", "shown"),
    [
        (b"two words", '"two words"'),
        (b"", '""'),
        (b'say "hi"', '"say \\"hi\\""'),
        (b"it's", '"it\'s"'),
        (b"back\\slash", "back\\slash"),
        (b"a\\ b", '"a\\\\ b"'),
        (b"\xff\x00", '"\\xff\\x00"'),
        (b"line\nbreak\t", '"line\\nbreak\\t"'),
        ("é".encode(), "é"),  # UTF-8 text stays text
    ],
)
def test_quoting_follows_redis_cli(arg: bytes, shown: str) -> None:
    assert quote(arg) == shown


# -- pure: the memory model ---------------------------------------------------------------------


def test_jemalloc_size_classes() -> None:
    got = [jemalloc(n) for n in (1, 8, 9, 24, 48, 49, 129, 160, 161, 257, 536, 4097, 20000)]
    assert got == [8, 8, 16, 32, 48, 64, 160, 160, 192, 320, 640, 5120, 20480]


def test_listpack_entry_sizes() -> None:
    assert lp_entry(b"7") == 2  # 7-bit integer + back-length
    assert lp_entry(b"4095") == 3
    assert lp_entry(b"1600000000") == 6
    assert lp_entry(b"007") == 5  # not canonical: a 3-byte string
    assert lp_entry(b"x" * 63) == 65
    assert lp_entry(b"x" * 64) == 67


def test_strings_shared_int_embstr_raw() -> None:
    assert string_value(b"42") == 0  # shared integer object
    assert string_value(b"123456") == 16
    assert string_value(b"x" * 44) == 64
    assert string_value(b"x" * 45) == 16 + 64


def test_hash_encoding_follows_the_thresholds() -> None:
    small = Aggregate("hash")
    small.add_pairs([b"f%d" % i for i in range(20)])
    long_value = Aggregate("hash")
    long_value.add_pairs([b"f", b"v" * 65])
    limits = Limits()
    assert small.size(limits) < long_value.size(limits)
    many = Aggregate("hash")
    many.add_pairs([b"%d" % i for i in range(2 * 513)])
    assert many.size(limits) > many.size(Limits(hash_max_listpack_entries=1024))


def test_sets_intset_then_hashtable() -> None:
    model = MemoryModel()
    assert model.add((b"SADD", b"s", b"1", b"2"), once=False) is True
    assert model.add((b"SADD", b"s", b"3"), once=False) is False
    assert model.keys == 1
    ints = model.bytes
    model.add((b"SADD", b"s", b"x"), once=False)
    assert model.bytes > ints + 100  # a hashtable now


# -- integration helpers ------------------------------------------------------------------------


@pytest.fixture
def sample_db(mysql_db: MySQLDatabase, tmp_path: Path) -> tuple[MySQLDatabase, Path]:
    mysql_db.run(SAMPLE_SQL)
    mapping = tmp_path / "sample.yaml"
    mapping.write_text(SAMPLE_MAPPING)
    return mysql_db, mapping


@pytest.fixture
def private_redis() -> Iterator[redis.Redis]:
    """A Redis server of this test's own on a unix socket, so that its command counters and
    used_memory see nobody else's traffic. Skipped without a redis-server binary."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed (a private server keeps the counters exact)")
    folder = tempfile.mkdtemp(prefix="mig-redis-", dir="/tmp")
    sock = os.path.join(folder, "redis.sock")
    proc = subprocess.Popen(
        [binary, "--port", "0", "--unixsocket", sock, "--save", "", "--appendonly", "no",
         "--dir", folder],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    client = redis.Redis(unix_socket_path=sock)
    try:
        for _ in range(100):
            try:
                client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        yield client
    finally:
        client.close()
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(folder, ignore_errors=True)


def url_of(client: redis.Redis) -> str:
    return "unix://" + client.connection_pool.connection_kwargs["path"]


def write_calls(client: redis.Redis) -> dict[str, int]:
    stats = client.info("commandstats")
    return {c: int(stats.get(f"cmdstat_{c}", {}).get("calls", 0)) for c in WRITES}


def dump(client: redis.Redis) -> dict[bytes, tuple[bytes, Any]]:
    """Every key with its type and full value (read in pipelines of 1,000 keys)."""
    read = {
        b"string": lambda p, k: p.get(k),
        b"hash": lambda p, k: p.hgetall(k),
        b"set": lambda p, k: p.smembers(k),
        b"zset": lambda p, k: p.zrange(k, 0, -1, withscores=True),
        b"list": lambda p, k: p.lrange(k, 0, -1),
    }
    out: dict[bytes, tuple[bytes, Any]] = {}
    keys = list(client.scan_iter(count=1000))
    for i in range(0, len(keys), 1000):
        chunk = keys[i : i + 1000]
        pipe = client.pipeline(transaction=False)
        for key in chunk:
            pipe.type(key)
        kinds = pipe.execute()
        for key, kind in zip(chunk, kinds):
            assert kind in read, f"unexpected type {kind!r} at {key!r}"
            read[kind](pipe, key)
        for key, kind, value in zip(chunk, kinds, pipe.execute()):
            out[key] = (kind, value)
    return out


def redis_cli_pipe(client: redis.Redis, resp_file: Path) -> None:
    cli = shutil.which("redis-cli")
    if cli is None:
        pytest.skip("redis-cli is not installed (needed for redis-cli --pipe)")
    sock = client.connection_pool.connection_kwargs["path"]
    with resp_file.open("rb") as stdin:
        done = subprocess.run([cli, "-s", sock, "--pipe"], stdin=stdin, capture_output=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert b"errors: 0" in done.stdout, done.stdout


def scaffolded(url: str, folder: Path, name: str) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(init(url).render())
    return path


# -- integration: never touches Redis -----------------------------------------------------------


@pytest.mark.smoke
def test_dry_run_never_writes_and_needs_no_redis(
    sample_db: tuple[MySQLDatabase, Path], private_redis: redis.Redis, monkeypatch: Any
) -> None:
    db, mapping = sample_db
    private_redis.set("existing", "1")
    before = (private_redis.dbsize(), write_calls(private_redis))
    connections = private_redis.info("stats")["total_connections_received"]
    monkeypatch.setenv("MIGRATOR_TARGET_URL", url_of(private_redis))
    runner = CliRunner()
    live = runner.invoke(app, ["dry-run", str(mapping), "--source", db.url])
    assert live.exit_code == 0, live.output
    gone = runner.invoke(
        app, ["dry-run", str(mapping), "--source", db.url, "--target", "redis://127.0.0.1:1/0"]
    )
    assert gone.exit_code == 0, gone.output
    monkeypatch.setenv("MIGRATOR_TARGET_URL", "redis://:pw@no-such-host.invalid:6379/0")
    env_gone = runner.invoke(app, ["dry-run", str(mapping), "--source", db.url, "--json"])
    assert env_gone.exit_code == 0, env_gone.output
    assert (private_redis.dbsize(), write_calls(private_redis)) == before
    assert private_redis.info("stats")["total_connections_received"] == connections
    assert "HSET emp:1 ename SMITH mgr_id 8" in live.output
    assert "pw" not in env_gone.output


# -- integration: the plan and the samples ------------------------------------------------------


def test_report_counts_every_structure_and_shows_samples(
    sample_db: tuple[MySQLDatabase, Path], private_redis: redis.Redis
) -> None:
    db, mapping = sample_db
    report = dry_run(mapping, source=db.url, sample=3)
    emp, login, tags = report.tables
    assert (emp.rows, login.rows, tags.rows) == (5, 3, 5)
    assert emp.patterns["hash"] == ["emp:{emp_id}"]
    assert emp.patterns["index"] == ["emp:indices:mgr_id:{mgr_id}",
                                     "emp:indices:dept_id:{dept_id}:mgr_id:{mgr_id}"]  # fmt: skip
    assert emp.keys == {"hash": 5, "unique": 1, "index": 4, "sorted": 1, "counter": 1,
                        "latest": 1}  # fmt: skip
    assert login.keys == {"columns": 3, "unique-string": 3, "sorted": 1, "counter": 1,
                          "latest": 1}  # fmt: skip
    assert tags.keys == {"set": 3}
    assert emp.sample[:3] == [
        "HSET emp:1 ename SMITH mgr_id 8",
        'HSET emp:2 ename ALLEN mgr_id 6 note "two words"',
        'HSET emp:3 ename WARD mgr_id 6 note "\\xff\\x00\\xfe"',
    ]
    assert emp.sample[-5:] == [
        "SET emp:id 5",
        "MULTI",
        "DEL emp:latest:hired",
        "RPUSH emp:latest:hired 5 3 2",
        "EXEC",
    ]
    assert 'SET "login:ken thompson:id" 1' in login.sample
    # what migrate really creates
    migrate(mapping, source=db.url, target=url_of(private_redis))
    real = {k for k in private_redis.scan_iter() if not k.startswith(b"migrator:")}
    assert report.keys == len(real) == 25


def test_json_output(sample_db: tuple[MySQLDatabase, Path]) -> None:
    db, mapping = sample_db
    result = CliRunner().invoke(
        app, ["dry-run", str(mapping), "--source", db.url, "--json", "--sample", "1"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["rows"] == 13 and data["keys"] == 25 and data["memory_bytes"] > 0
    assert data["tables"][0]["sample"][0] == "HSET emp:1 ename SMITH mgr_id 8"
    assert data["tables"][0]["keys"]["hash"] == 5


# -- integration: the RESP export ---------------------------------------------------------------


def _resp_equals_migrate(mapping: Path, source: str, client: redis.Redis, tmp_path: Path) -> int:
    migrate(mapping, source=source, target=url_of(client))
    migrated = dump(client)
    checkpoints = [k for k in migrated if k.startswith(b"migrator:")]
    assert checkpoints, "migrate keeps its run state under migrator:<mapping>:checkpoint"
    for k in checkpoints:  # run state, not data: the export leaves it out
        del migrated[k]
    client.flushdb()
    out = tmp_path / "load.resp"
    report = dry_run(mapping, source=source, resp_file=out, sample=0)
    assert out.stat().st_size == report.resp_bytes
    redis_cli_pipe(client, out)
    piped = dump(client)
    assert piped.keys() == migrated.keys()
    for key, value in migrated.items():
        assert piped[key] == value, key
    return len(piped)


def test_resp_export_loads_exactly_what_migrate_writes(
    sample_db: tuple[MySQLDatabase, Path], private_redis: redis.Redis, tmp_path: Path
) -> None:
    db, mapping = sample_db
    n = _resp_equals_migrate(mapping, db.url, private_redis, tmp_path)
    assert n == 25
    kinds = {kind for kind, _ in dump(private_redis).values()}
    assert kinds == {b"hash", b"string", b"set", b"zset", b"list"}


@pytest.mark.long  # neighbour: test_resp_export_loads_exactly_what_migrate_writes
def test_resp_export_on_sakila(sakila_url: str, private_redis: redis.Redis, tmp_path: Path) -> None:
    mapping = scaffolded(sakila_url, tmp_path, "sakila")
    assert _resp_equals_migrate(mapping, sakila_url, private_redis, tmp_path) > 40_000


class Boom(Exception):
    pass


class FailOnSecondTable:
    def __init__(self) -> None:
        self.started = 0

    def start(self, table: str, total: int | None) -> None:
        self.started += 1
        if self.started == 2:
            raise Boom

    def advance(self, table: str, rows: int) -> None:
        pass

    def finish(self, table: str) -> None:
        pass


def test_resp_file_is_replaced_atomically(
    sample_db: tuple[MySQLDatabase, Path], tmp_path: Path
) -> None:
    db, mapping = sample_db
    out = tmp_path / "out" / "load.resp"
    out.parent.mkdir()
    out.write_bytes(b"previous export")
    with pytest.raises(Boom):
        dry_run(mapping, source=db.url, resp_file=out, progress=FailOnSecondTable())
    assert out.read_bytes() == b"previous export"
    assert sorted(p.name for p in out.parent.iterdir()) == ["load.resp"]
    dry_run(mapping, source=db.url, resp_file=out)
    assert out.read_bytes().startswith(b"*")


# -- integration: errors as in migrate ----------------------------------------------------------


def test_mapping_error_exits_2(sample_db: tuple[MySQLDatabase, Path], tmp_path: Path) -> None:
    db, _ = sample_db
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\ntables:\n  emp:\n    columns: [ename, emial]\n")
    out = tmp_path / "x.resp"
    result = CliRunner().invoke(app, ["dry-run", str(bad), "--source", db.url, "--resp", str(out)])
    assert result.exit_code == 2, result.output
    assert "emial" in result.output and "email" in result.output
    assert "Traceback" not in result.output
    assert not out.exists()


def test_unreachable_mysql_exits_3(sample_db: tuple[MySQLDatabase, Path], tmp_path: Path) -> None:
    _, mapping = sample_db
    source = "mysql+pymysql://root:s3cret@127.0.0.1:1/nowhere"
    result = CliRunner().invoke(app, ["dry-run", str(mapping), "--source", source])
    assert result.exit_code == 3, result.output
    assert "s3cret" not in result.output
    assert "Traceback" not in result.output


# -- integration: the memory estimate against reality ------------------------------------------


@pytest.mark.integration
@pytest.mark.acceptance  # its fixture is requested by name, so conftest cannot mark it
@pytest.mark.parametrize("database", ["sakila", "employees"])
def test_memory_estimate_within_30_percent(
    database: str,
    engine: str,  # on each engine: the sample database's fixture is requested by name
    request: pytest.FixtureRequest,
    private_redis: redis.Redis,
    tmp_path: Path,
) -> None:
    source: str = request.getfixturevalue(f"{database}_url")
    mapping = scaffolded(source, tmp_path, database)
    before = private_redis.info("memory")["used_memory"]
    migrate(mapping, source=source, target=url_of(private_redis))
    for key in private_redis.scan_iter(match="migrator:*"):
        private_redis.delete(key)  # migrate's run state is not part of the load
    time.sleep(0.3)  # let the server finish rehashing its key table
    real = private_redis.info("memory")["used_memory"] - before
    server = private_redis.info("server")  # the layout of this target (Redis 7, 8, Valkey 8)
    estimate = dry_run(mapping, source=source, sample=0, limits=target_limits(server)).memory
    ratio = estimate / real
    kind = server.get("server_name", "redis")
    name = f"{kind} {server.get(f'{kind}_version', server['redis_version'])}"
    print(f"{database} on {name}: estimate {estimate:,} B, used_memory growth {real:,} B, "
          f"ratio {ratio:.3f}")  # fmt: skip
    assert 0.7 <= ratio <= 1.3
