"""The benchmark refuses targets it must not empty (issue 9 item 7): a Redis database that
holds keys (unless --force), one a test session has claimed, and an ``emp`` table it did not
make. Each check runs on this session's own Redis database or MySQL database."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from types import ModuleType

import pytest
import redis

from tests.services import REPO, MySQLDatabase

BENCH = REPO / "benchmarks"


def bench_module(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # a dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


def test_a_target_that_holds_keys_is_refused_unless_forced(
    redis_url: str, redis_client: redis.Redis
) -> None:
    run = bench_module("run")
    run.refuse_non_empty(redis_client, redis_url, force=False)  # empty: fine
    redis_client.set("someone:else", "precious")
    with pytest.raises(SystemExit, match=r"holds 1 key\(s\).*--force"):
        run.refuse_non_empty(redis_client, redis_url, force=False)
    run.refuse_non_empty(redis_client, redis_url, force=True)
    assert redis_client.get("someone:else") == b"precious"  # refusing touched nothing


def test_a_database_claimed_by_a_test_session_is_refused(redis_url: str) -> None:
    # this session claimed its database (conftest's redis_test_db), as another session would
    result = subprocess.run(
        [sys.executable, str(BENCH / "run.py"), "--rows", "10", "--target", redis_url],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 1
    assert "is in use by a test session or another benchmark" in result.stderr


def test_generate_refuses_an_emp_table_it_did_not_make(mysql_db: MySQLDatabase) -> None:
    mysql_db.run("CREATE TABLE emp (id INT PRIMARY KEY); INSERT INTO emp VALUES (7);")
    with pytest.raises(SystemExit, match="did not make it"):
        bench_module("generate").generate(10, mysql_db.url)
    assert mysql_db.query("SELECT id FROM emp") == [(7,)]


def test_generate_replaces_its_own_table(mysql_db: MySQLDatabase) -> None:
    generate = bench_module("generate")
    mysql_db.run("CREATE TABLE emp (id INT PRIMARY KEY);")
    generate.generate(10, mysql_db.url, force=True)
    generate.generate(12, mysql_db.url)  # its own table: replaced without --force
    assert mysql_db.query("SELECT COUNT(*), COUNT(DISTINCT email) FROM emp") == [(12, 12)]
    assert mysql_db.query("SELECT MIN(emp_id), MAX(emp_id) FROM emp") == [(1, 12)]


def test_cli_bench_times_every_command_s_help_and_checks_each_output() -> None:
    """benchmarks/cli_bench.py (issue 34 item 5) covers every command's --help, and a run that
    does not print what its case expects stops it (a broken case is no fast figure)."""
    bench = bench_module("cli_bench")
    labels = [case.label for case in bench.cases()]
    assert {f"migrator {c} --help" for c in bench.commands()} <= set(labels)
    assert "migrator --help" in labels and any(label.startswith("TAB: ") for label in labels)
    program = [str(bench.PROGRAM)]
    wall, cpu = bench.run_once(bench.tab("migrator mi", "migrate"), program)
    assert wall > 0 and cpu >= 0
    with pytest.raises(SystemExit, match="no 'dry-run' in the output"):
        bench.run_once(bench.tab("migrator mi", "dry-run"), program)


def test_the_lag_probe_counts_each_write_to_the_first_moment_redis_held_it_or_a_later_one() -> None:
    probe = bench_module("lag_probe")
    written = [1_000, 51_000, 101_000, 151_000]
    # seen at 9,000 µs (the first write); the 2nd never seen alone: the 3rd replaced it
    # before a poll (one group) at 130,000; the 4th not seen at all
    seen = [(0, 0), (9_000, 1_000), (130_000, 101_000)]
    assert probe.lags(written, seen) == [8_000, 79_000, 29_000]
    result = probe.ProbeResult([8.0, 79.0, 29.0], 4, [1.0, 2.0, 3.0])
    assert result.percentile(result.lags_ms, 0.5) == 29.0
    assert result.percentile(result.lags_ms, 0.99) == 79.0
    assert "4 writes, 1 never seen" in result.summary()
    assert "lag p50 29 ms, p99 79 ms, max 79 ms" in result.summary()
