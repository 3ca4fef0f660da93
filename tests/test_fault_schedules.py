"""Randomized fault schedules (issue 17 item 8; the harness and what a schedule is:
tests/schedules.py). One short schedule is part of the default suite, three more are ``long``
(``make test-long``); the long run is behind the ``fault_schedules`` marker:

    .venv/bin/pytest tests/test_fault_schedules.py -m fault_schedules
    MIGRATOR_FAULT_SCHEDULES=40 MIGRATOR_FAULT_SEED=7 ...   # how many per command, first seed

A failing schedule prints its seed, its events and how to replay it:

    MIGRATOR_FAULT_SEEDS=migrate:123,sync:9 .venv/bin/pytest tests/test_fault_schedules.py -k replay
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.binlog_server import PrivateMariaDB, missing
from tests.faults import redis_process, redis_server_problem
from tests.mysql_server import PrivateMySQL, mysql_problem
from tests.schedules import Servers, run_schedule

pytestmark = [
    pytest.mark.skipif(bool(redis_server_problem()), reason=str(redis_server_problem())),
]

#: the default suite's schedules, (command, seed), chosen so that together they meet every
#: fault: migrate 13: MySQL restart, Redis restarted empty, kill -9 (one worker); migrate 3:
#: over an older load with --replace, two workers, Redis clients killed, kill -9, Redis
#: paused; verify 72: Redis restarted from its AOF, MySQL KILL, Redis clients killed; sync 104:
#: Redis paused, MySQL restart, Redis restarted empty, MySQL KILL; replace 1: a --replace
#: killed in its first second over an older load, then --replace --resume (before issue 27
#: item 1 it skipped the removal: 2,040 keys of deleted rows left at exit 0); sync-restart 1:
#: MySQL restarted as sync's online first load runs (before issue 27 item 3: exit 3, "cannot
#: reach MySQL", after one try: the load's connection was opened outside the retries);
#: sync-shutdown 1: MySQL shut down cleanly (SIGTERM) and started again a second later while
#: sync follows (before issue 35 item 1, on MySQL 9.7: exit 0 "end of log", by itself);
#: sync-redis-stop 1: SIGTERM to sync as Redis comes back from its AOF (exit 0; issue 35 item
#: 2 was exit 1, an IndexError, when the stop met the recovery: a narrow window this schedule
#: does not always meet; tests/sync/test_sync_exit_codes.py meets it every time);
#: early-signal 1, verify-oom 1, sync-load-swap 1: issue 35's other cases (tests/schedule_own.py;
#: each also has a deterministic test: tests/test_startup.py, tests/test_verify_retries.py,
#: tests/sync/test_load_swaps.py).
SHORT = [
    ("migrate", 13), ("migrate", 3), ("verify", 72), ("sync", 104), ("replace", 1),
    ("sync-restart", 1), ("sync-shutdown", 1), ("sync-redis-stop", 1), ("early-signal", 1),
    ("verify-oom", 1), ("sync-load-swap", 1),
]  # fmt: skip
#: all but the first are long (make test-long): each fault they meet has a test of its own in
#: tests/test_faults*.py and tests/sync/test_sync_faults.py, and migrate 13 keeps the harness
#: in the default suite
SHORT_PARAMS = [
    pytest.param(k, s, id=f"{k}-{s}", marks=[pytest.mark.long] if i else [])
    for i, (k, s) in enumerate(SHORT)
]


@pytest.fixture(scope="module")
def servers(engine: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    """A source of the schedules' own on each engine (they restart and kill it)."""
    mysql: PrivateMariaDB | PrivateMySQL
    if engine == "mysql":
        problem = mysql_problem()
        if problem:
            pytest.skip(f"no private MySQL: {problem}")
        mysql = PrivateMySQL(server_id=1)
    else:
        problem = missing()
        if problem:
            pytest.skip(problem)
        mysql = PrivateMariaDB(server_id=1)
    mysql.start()
    try:
        with redis_process(tmp_path_factory.mktemp("schedules"), appendonly=True) as redis:
            yield Servers(mysql, redis)
    finally:
        mysql.stop()


def judge_schedule(seed: int, kind: str, servers: Servers, tmp_path: Path) -> None:
    outcome = run_schedule(seed, kind, servers, tmp_path)
    print(outcome.report())  # (with -s: the events of a schedule that passed, its figures)
    assert not outcome.problems and not outcome.differences, outcome.report()


@pytest.mark.parametrize(("kind", "seed"), SHORT_PARAMS)
def test_short_schedule(kind: str, seed: int, servers: Servers, tmp_path: Path) -> None:
    judge_schedule(seed, kind, servers, tmp_path)


#: sync's schedules that failed before sync rode out target losses and lost connections
#: (issue 17 items 1-2; they pass since): 8: MySQL KILL -> exit 1 "unexpected error:
#: OperationalError (2013)", and SIGTERM during the first load -> killed by the signal (-15);
#: 12 and 105: Redis restarted empty -> sync --until-caught-up exited 0 over thousands of
#: missing keys; 13 and 104: MySQL restart -> exit 1 "unexpected error: InterfaceError".
SYNC = [("sync", 8), ("sync", 12), ("sync", 13), ("sync", 104), ("sync", 105)]


#: issue 35's cases, each with a fault of its own (tests/schedule_own.py): SIGINT or SIGTERM
#: while the interpreter starts, verify --fix on a Redis at maxmemory, gh-ost's swap during
#: sync's consistent first load
NEW_KINDS = ["early-signal", "verify-oom", "sync-load-swap"]


def long_run(request: pytest.FixtureRequest) -> None:
    if "fault_schedules" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("the long run: pytest -m fault_schedules")


@pytest.mark.fault_schedules
@pytest.mark.parametrize(("kind", "seed"), SYNC, ids=[f"{k}-{s}" for k, s in SYNC])
def test_sync_schedule(
    kind: str, seed: int, servers: Servers, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    long_run(request)
    judge_schedule(seed, kind, servers, tmp_path)


@pytest.mark.fault_schedules
@pytest.mark.parametrize("kind", ["migrate", "verify", "sync", *NEW_KINDS])
def test_long_schedules(
    kind: str, servers: Servers, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    long_run(request)
    count = int(os.environ.get("MIGRATOR_FAULT_SCHEDULES", "20"))
    first = int(os.environ.get("MIGRATOR_FAULT_SEED", "1000"))
    failed = []
    for seed in range(first, first + count):
        outcome = run_schedule(seed, kind, servers, tmp_path)
        print(outcome.report())  # (with -s: every schedule's events, its figures)
        if outcome.problems or outcome.differences:
            failed.append(outcome.report())
    assert not failed, f"{len(failed)} of {count} schedules failed:\n\n" + "\n\n".join(failed)


def test_replay(servers: Servers, tmp_path: Path) -> None:
    wanted = os.environ.get("MIGRATOR_FAULT_SEEDS", "")
    if not wanted:
        pytest.skip("replays MIGRATOR_FAULT_SEEDS=command:seed[,...]")
    for item in wanted.split(","):
        kind, seed = item.split(":")
        judge_schedule(int(seed), kind, servers, tmp_path)
