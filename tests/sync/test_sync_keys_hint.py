"""sync keeps the ``@keys`` hint up to date (issue 16 item 7): after its snapshot and after the
changes it applies from the binary log, the hint is the keys the mapping's tables hold, and
its own state key is not taken for a stray one, so verify needs no stray-key SCAN at all."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import redis

from migrator.commands import migrate, verify
from migrator.commands.sync import sync
from migrator.reports import SchemaChanged
from migrator.store.checkpoint import held_keys, keys_hint
from migrator.sync.schema_watch import resnapshot_by_hand
from tests.keys_hint import CHANGES, SCHEMA, Scans, write_mapping
from tests.services import MySQLDatabase

_ids = itertools.count(8100)


def test_sync_leaves_the_key_count_verify_skips_the_scan_with(
    binlog_db: MySQLDatabase,
    redis_url: str,
    redis_client: redis.Redis,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    binlog_db.run(SCHEMA)
    path = write_mapping(tmp_path)
    name = path.stem
    loaded = migrate(path, source=binlog_db.url, target=redis_url, workers=1).keys
    binlog_db.run("INSERT INTO member VALUES (6, 'fay', 9, 'fay@x.org')")  # before sync loads
    first = sync(path, source=binlog_db.url, target=redis_url, until_caught_up=True,
                 server_id=next(_ids))  # fmt: skip
    assert first.snapshot is not None  # its own load
    assert keys_hint(redis_client, name) == loaded + 2 == held_keys(redis_client, name)
    binlog_db.run(CHANGES)  # applied from the log by the next run
    again = sync(path, source=binlog_db.url, target=redis_url, until_caught_up=True,
                 server_id=next(_ids))  # fmt: skip
    assert again.snapshot is None and again.transactions > 0
    held = held_keys(redis_client, name)
    assert held == loaded + 4 and keys_hint(redis_client, name) == held
    scans = Scans(monkeypatch)
    report = verify(path, source=binlog_db.url, target=redis_url)
    assert report.ok, report.as_dict()
    assert not scans.any  # the hint and DBSIZE (less checkpoint and sync state) agree
    binlog_db.run("ALTER TABLE member ADD COLUMN note VARCHAR(10)")  # a re-snapshot of member
    with pytest.raises(SchemaChanged):  # left to the user by this hook: sync stops on the DDL
        sync(path, source=binlog_db.url, target=redis_url, until_caught_up=True,
             server_id=next(_ids), resnapshot=resnapshot_by_hand)  # fmt: skip
    assert keys_hint(redis_client, name) is None  # what the target holds is not vouched for
    redis_client.delete(f"migrator:{name}:checkpoint")  # a target that sync alone loads
    sync(path, source=binlog_db.url, target=redis_url, until_caught_up=True, reload=True,
         server_id=next(_ids))  # fmt: skip
    assert redis_client.exists(f"migrator:{name}:checkpoint") == 0  # no checkpoint made up
