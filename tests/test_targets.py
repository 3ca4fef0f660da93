"""The target matrix (tests/targets.py): a run with ``MIGRATOR_TEST_TARGET`` really talks to
that server, and what the tool reads from ``INFO`` means the same on Redis 7, Redis 8 and
Valkey 8 (docs/connections.md, "Targets")."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import redis

from migrator.plan.estimate import target_limits
from migrator.store.cluster import cluster_enabled
from migrator.store.guard import run_id
from tests.targets import EXPECTED, SCRIPT, TARGET_ENV, identity, target

pytestmark = pytest.mark.targets


def test_the_run_targets_the_server_it_names(redis_client: redis.Redis) -> None:
    """Under MIGRATOR_TEST_TARGET the session's server is that flavor (never silently the
    shared Redis 7); without it, whatever server is configured."""
    found = identity(redis_client.info("server"))
    if not os.environ.get(TARGET_ENV):
        pytest.skip(f"{TARGET_ENV} is not set: the configured server is {found}")
    assert found == EXPECTED[target()]


@pytest.mark.parametrize(
    ("info", "found"),
    [
        ({"redis_version": "7.0.15"}, ("redis", 7)),
        ({"redis_version": "8.0.2"}, ("redis", 8)),
        # Valkey 8 reports the Redis version it is compatible with, and its own beside
        ({"redis_version": "7.2.4", "server_name": "valkey", "valkey_version": "8.0.1"},
         ("valkey", 8)),
    ],
)  # fmt: skip
def test_identity_reads_valkey_s_own_version(info: dict[str, str], found: tuple[str, int]) -> None:
    assert identity(info) == found


def test_what_the_tool_reads_from_info_on_this_target(redis_client: redis.Redis) -> None:
    """The three INFO sections the tool reads (docs/connections.md, "Targets"): a single
    server is not a cluster (INFO cluster), has a run_id for the restart guard (INFO server),
    and used_memory/maxmemory for the memory check (INFO memory)."""
    assert cluster_enabled(redis_client) is False
    found = run_id(redis_client)
    assert len(found) == 40 and all(c in "0123456789abcdef" for c in found), found
    memory = redis_client.info("memory")
    assert int(memory["used_memory"]) > 0 and "maxmemory" in memory


def test_the_script_refuses_an_unknown_flavor() -> None:
    done = subprocess.run(
        ["bash", str(SCRIPT), "--flavor", "redis9", "url"], capture_output=True, text=True
    )
    assert done.returncode == 1
    assert "--flavor wants redis8 or valkey8, not 'redis9'" in done.stderr


@pytest.mark.parametrize(
    ("server", "listpack_sets", "key_overhead"),
    [
        ({"redis_version": "7.0.15"}, 0, 0),
        ({"redis_version": "7.2.5"}, 128, 0),
        ({"redis_version": "8.0.2"}, 128, 0),
        # Valkey 8 says 7.2.4 as redis_version: its own version decides the key layout
        ({"redis_version": "7.2.4", "server_name": "valkey", "valkey_version": "8.0.1"}, 128, -16),
        ({"redis_version": "7.2.4", "server_name": "valkey", "valkey_version": "7.2.5"}, 128, 0),
        ({}, 0, 0),  # INFO server refused: Redis 7.0's layout
        ({"redis_version": "unknown"}, 0, 0),
    ],
)  # fmt: skip
def test_the_memory_model_follows_the_server(
    server: dict[str, str], listpack_sets: int, key_overhead: int
) -> None:
    limits = target_limits(server)
    assert (limits.set_max_listpack_entries, limits.key_overhead) == (listpack_sets, key_overhead)


def test_a_version_the_suite_no_longer_has_stops_the_fetch_and_says_so(tmp_path: Path) -> None:
    """Pinned: a version neither the cache nor the suite has is refused with the way out
    (--version any), and the unpacked server is left as it was. Reads the package lists an
    earlier fetch left in the cache (none: skipped, as nothing would be downloaded but them)."""
    work = Path(
        os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache", "migrator", "redis-server",
        "valkey8",
    )  # fmt: skip
    if not list((work / "apt" / "lists").glob("*_Packages*")):
        pytest.skip(f"no package lists in {work}: scripts/redis-server.sh --flavor valkey8 fetch")
    before = (work / "prefix" / ".redis-server-sh").read_bytes()
    done = subprocess.run(
        ["bash", str(SCRIPT), "--flavor", "valkey8", "--version", "0.0.1-1", "fetch"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "has no valkey-tools 0.0.1-1 any more" in done.stderr
    assert "--version any" in done.stderr
    assert (work / "prefix" / ".redis-server-sh").read_bytes() == before
