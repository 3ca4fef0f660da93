"""The test server with the JSON type and search (tests/modules_server.py, issue 29 item 4)."""

from __future__ import annotations

import os
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
