"""``verify --fix`` keeps the ``@keys`` hint up to date (issue 16 item 7): once Redis matches
MySQL, the hint is the keys the mapping's tables hold, so the next verify needs no stray-key
SCAN at all; a fix that does not end in a match, or of some tables only, leaves it alone."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from migrator.commands import migrate, verify
from migrator.store.checkpoint import held_keys, keys_hint
from tests.keys_hint import CHANGES, SCHEMA, Scans, write_mapping
from tests.services import MySQLDatabase

# outcome decided by migrate's worker count: again in CI with MIGRATOR_WORKERS=4
pytestmark = pytest.mark.workers


@pytest.fixture
def scans(monkeypatch: pytest.MonkeyPatch) -> Scans:
    return Scans(monkeypatch)


def test_verify_fix_leaves_the_key_count_of_what_it_proved(
    mysql_db: MySQLDatabase,
    redis_url: str,
    redis_client: redis.Redis,
    tmp_path: Path,
    scans: Scans,
) -> None:
    mysql_db.run(SCHEMA)
    path = write_mapping(tmp_path)
    name = path.stem
    loaded = migrate(path, source=mysql_db.url, target=redis_url, workers=1).keys
    assert keys_hint(redis_client, name) == loaded == held_keys(redis_client, name)
    mysql_db.run(CHANGES)
    redis_client.set("member:uniques:zzz", "1")  # a stray key in the table's key space
    fixed = verify(path, source=mysql_db.url, target=redis_url, fix=True)
    assert fixed.ok and fixed.repaired, fixed.as_dict()
    held = held_keys(redis_client, name)
    assert held == loaded + 2  # a row gone, two added; two index sets added, one emptied
    assert keys_hint(redis_client, name) == held
    scans.alongside.clear()
    scans.after.clear()
    assert verify(path, source=mysql_db.url, target=redis_url).ok
    assert not scans.any  # DBSIZE matches the hint and what the pass found: no SCAN
    redis_client.hset(f"migrator:{name}:sync", "file", "x")  # sync's own keys, as while it
    redis_client.set(f"migrator:{name}:sync:lock", "x")  # runs: not taken for strays
    assert verify(path, source=mysql_db.url, target=redis_url).ok
    assert not scans.any


def test_a_fix_of_some_tables_or_that_does_not_match_keeps_the_hint(
    mysql_db: MySQLDatabase, redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    mysql_db.run(SCHEMA)
    path = write_mapping(tmp_path)
    loaded = migrate(path, source=mysql_db.url, target=redis_url, workers=1).keys
    mysql_db.run(CHANGES)
    verify(path, source=mysql_db.url, target=redis_url, fix=True, tables=["member"])
    assert keys_hint(redis_client, path.stem) == loaded  # --tables: not every key counted
    redis_client.set("member:5", "a string where a hash belongs")
    report = verify(path, source=mysql_db.url, target=redis_url)
    assert not report.ok
    assert keys_hint(redis_client, path.stem) == loaded  # plain verify never writes it
    redis_client.delete(f"migrator:{path.stem}:checkpoint")  # a target loaded otherwise
    assert verify(path, source=mysql_db.url, target=redis_url, fix=True).ok
    assert redis_client.exists(f"migrator:{path.stem}:checkpoint") == 0  # none made up
