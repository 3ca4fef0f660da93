"""The Redis server a test run targets (README.md, "Tests"; docs/connections.md, "Targets").

``MIGRATOR_TEST_TARGET`` names it for the whole run:

* unset or ``redis7``: the configured server (``MIGRATOR_TEST_REDIS_URL``, Redis 7 on our
  machines) and the ``redis-server`` / ``redis-cli`` on PATH;
* ``redis8`` or ``valkey8``: ``scripts/redis-server.sh --flavor F`` fetches that server once
  (cached), its ``redis-server`` and ``redis-cli`` wrappers go first on PATH for the run (so
  every server a test starts itself, the Cluster's nodes and the fault tests' servers, is of
  the flavor too), and the session's Redis is a server of it on a free port, stopped at the
  end. The run checks that the server is the flavor asked for (``identity``).

``-m targets`` selects the tests that make up the target matrix (pyproject.toml's markers).
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.reaper import register

TARGET_ENV = "MIGRATOR_TEST_TARGET"
FLAVORS = ("redis8", "valkey8")
SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "redis-server.sh"
#: what INFO server says on each target: (server name, major version of that server)
EXPECTED = {"redis7": ("redis", 7), "redis8": ("redis", 8), "valkey8": ("valkey", 8)}


class TargetProblem(Exception):
    """The target asked for cannot be had (unknown name, fetch or start failed)."""


def target() -> str:
    """The run's target: ``redis7`` (the default), ``redis8`` or ``valkey8``."""
    name = os.environ.get(TARGET_ENV, "").strip() or "redis7"
    if name not in EXPECTED:
        raise TargetProblem(
            f"{TARGET_ENV}={name!r} is not a target: write one of {', '.join(EXPECTED)}"
        )
    return name


def _script(flavor: str, *args: str, timeout: float = 600) -> str:
    done = subprocess.run(
        ["bash", str(SCRIPT), "--flavor", flavor, *args],
        capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
    if done.returncode != 0:
        tail = " ".join(done.stderr.strip().splitlines()[-3:])
        raise TargetProblem(f"scripts/redis-server.sh --flavor {flavor} {args[0]} failed: {tail}")
    return done.stdout.strip()


def use_flavor_binaries(flavor: str) -> Path:
    """Fetch the flavor (once; cached) and put its redis-server/redis-cli first on PATH."""
    wrap = Path(_script(flavor, "fetch"))
    path = os.environ.get("PATH", "")
    if not path.startswith(f"{wrap}{os.pathsep}"):
        os.environ["PATH"] = f"{wrap}{os.pathsep}{path}"
    return wrap


@dataclass
class FlavorServer:
    """A server of the flavor on ``port``, its pid file and log in ``directory``."""

    flavor: str
    port: int
    directory: Path

    def start(self) -> str:
        url = _script(self.flavor, "--port", str(self.port), "--dir", str(self.directory), "start")
        client = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=10)
        try:  # setsid'd by the script: the run's watcher kills it if we die (tests/reaper.py)
            register(int(client.info("server")["process_id"]))
        finally:
            client.close()
        return url

    def stop(self) -> None:
        _script(self.flavor, "--port", str(self.port), "--dir", str(self.directory), "stop")

    def not_the_flavor(self) -> str | None:
        """Why the server on the port is not the flavor asked for, or None."""
        client = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=10)
        try:
            found = identity(client.info("server"))
        finally:
            client.close()
        if found != EXPECTED[self.flavor]:
            return f"{TARGET_ENV}={self.flavor}, but the server on {self.port} says {found}"
        return None


def identity(info: dict[str, Any]) -> tuple[str, int]:
    """(server name, major version) from ``INFO server``: Valkey says ``server_name:valkey``
    and ``valkey_version:8.0.1`` besides ``redis_version:7.2.4``; Redis has neither."""
    name = str(info.get("server_name") or "redis")
    version = str(info.get(f"{name}_version") or info.get("redis_version") or "0")
    return name, int(version.split(".")[0])


#: The tests of the target matrix (marked ``targets`` by tests/conftest.py): what the tool asks
#: of Redis, once each, at the least cost. Each file's entries name tests (every parameter of
#: each); a name that matches no test of its file is an error, so a rename cannot drop one.
MATRIX: dict[str, tuple[str, ...]] = {
    # what the tool reads from INFO, and that the run really is on the flavor
    "tests/test_targets.py": ("*",),
    # core migrate: every structure (strings, hashes, sets, sorted sets, lists, counters,
    # indexes) of the demo and Sakila, resume from the checkpoint (Lua), the JSON summary
    "tests/test_samples.py": ("*",),
    "tests/test_acceptance.py": ("test_sakila_init_then_migrate_matches_mysql",),
    "tests/test_migrate.py": (
        "test_reserved_and_odd_identifiers_are_quoted",
        "test_resume_continues_after_the_checkpoint",
        "test_cli_json_summary",
    ),
    # verify: clean, each kind of tampering, the exit codes; --fix of strays, of counters and
    # after writes during migrate
    "tests/test_verify.py": (
        "test_clean_migrate_verifies",
        "test_tampering_is_found",
        "test_cli_exit_codes",
    ),
    "tests/test_stray_keys.py": ("test_fix_removes_a_stray_key_and_keeps_the_ignored_ones",),
    "tests/test_counters.py": (
        "test_a_counter_below_max_or_not_a_number_is_wrong_and_fix_sets_max",
    ),
    "tests/test_converge.py": ("test_fix_converges_after_writes_during_migrate",),
    # the server's own replies: a restart (run_id guard), an AOF reload (LOADING), a busy
    # script (BUSY), connection kills by a user without INFO, maxmemory, NOAUTH, a missing ACL
    # permission (NOPERM), TLS with a client certificate and the documented ACL user, WRONGPASS
    "tests/test_faults.py": (
        "test_target_restarted_empty_mid_run_is_reloaded",
        "test_target_restarted_from_its_aof_continues_from_its_checkpoint",
        "test_busy_script_is_waited_out",
        "test_redis_connection_resets_are_retried_by_a_user_without_info",
        "test_moved_storm_is_waited_out",
    ),
    "tests/test_safety.py": (
        "test_a_load_that_will_not_fit_maxmemory_is_refused_before_writing",
        "test_an_acl_user_without_a_permission",
    ),
    "tests/test_userinfo.py": ("test_noauth_says_a_password_is_required",),
    "tests/test_tls.py": (
        "test_tls_with_ca_client_certificate_and_acl_user",
        "test_wrong_acl_password_is_refused",
    ),
    # dry-run: its memory model against the flavor's used_memory, its RESP file through the
    # flavor's redis-cli --pipe
    "tests/test_dryrun.py": (
        "test_memory_estimate_within_30_percent",
        "test_resp_export_loads_exactly_what_migrate_writes",
    ),
    # JSON documents as text in STRINGs (as: json-string), which every target must run: every
    # type, verify and --fix, the structures beside them, the RESP export; sync of random
    # writes and of every type through the binary log; as: json refused where JSON is absent
    "tests/test_documents.py": (
        "test_every_type_as_a_json_string",
        "test_verify_finds_a_wrong_document_and_fix_repairs_it",
        "test_structures_beside_documents_are_those_beside_hashes",
        "test_a_json_table_is_refused_where_the_target_has_no_json_type",
        "test_dry_run_resp_loads_exactly_the_documents_migrate_writes",
        "test_memory_estimate_of_json_string_documents_within_30_percent",
        "test_documents_into_a_redis_cluster",
    ),
    "tests/sync/test_sync_documents.py": (
        "test_random_writes_keep_json_string_documents_exact",
        "test_every_type_synced_is_the_document_migrate_writes",
    ),
    # a Redis Cluster of the flavor: detection, routing, MOVED and ASK, verify, --fix, resume
    "tests/test_cluster.py": ("*",),
    # sync: the first load then following, random writes, into a Cluster; and faults of the
    # target while following: restarted empty, back from its AOF; the lease (Lua) of a second
    "tests/sync/test_sync.py": (
        "test_first_run_loads_the_snapshot_then_follows",
        "test_random_writes_while_sync_runs",
        "test_sync_into_a_redis_cluster",
    ),
    "tests/sync/test_sync_faults.py": (
        "test_redis_restarted_empty_while_following_is_reloaded",
        "test_redis_restarted_from_its_aof_continues_from_the_position_it_holds",
        "test_a_second_sync_is_refused_and_the_first_goes_on",
    ),
}


def in_matrix(path: str, name: str) -> bool:
    """Whether the test ``name`` (without its parameters) of ``path`` is in MATRIX."""
    names = MATRIX.get(path, ())
    return "*" in names or name in names


def mark_the_matrix(items: list[pytest.Item]) -> None:
    """Mark ``targets`` the tests MATRIX names; a name there that its (collected) test file
    does not define is a usage error."""
    modules: dict[str, Any] = {}
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        if getattr(item, "module", None) is not None:
            modules.setdefault(path, item.module)  # type: ignore[attr-defined]
        if in_matrix(path, getattr(item, "originalname", item.name)):
            item.add_marker(pytest.mark.targets)
    missing = [
        f"{path}::{name}"
        for path, names in MATRIX.items()
        if path in modules
        for name in names
        if name != "*" and not callable(getattr(modules[path], name, None))
    ]
    if missing:
        raise pytest.UsageError(f"tests/targets.py names tests that do not exist: {missing}")
