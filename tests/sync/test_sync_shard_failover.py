"""One shard's failover under ``sync --shard`` (docs/sharding.md#one-shards-trouble): shard
``west`` is a MariaDB primary with a replica of its own replicating by GTID
(tests/replication.py), shard ``east`` a private Oracle MySQL 9.7. Both take random writes
while a process per shard follows them; west's primary is killed (``kill -9``) once its replica
holds its last transactions, the replica is promoted and west's URL in the mapping pointed at
it, and west's process, started again, continues by the GTID state its position holds (on
the replica's own log files) while east's process — never restarted — keeps applying, its
position advancing and its own keys untouched. Redis then equals an independent ``migrate``
of the union, and ``verify`` answers 0."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
import redis

from migrator.commands.sync import sync
from migrator.source.binlog.gtid import parse
from tests.binlog_server import missing
from tests.faults import wait_for
from tests.mysql_server import PrivateMySQL, mysql_problem
from tests.replication import ReplicaPair, on
from tests.sync.helpers import following
from tests.sync.shard_scene import BASE, equals_a_rebuild, mapping_of, seeded, write_shard

pytestmark = pytest.mark.skipif(
    bool(missing() or mysql_problem()), reason=str(missing() or mysql_problem())
)


@pytest.fixture
def scene() -> Iterator[tuple[ReplicaPair, PrivateMySQL]]:
    """West's primary and replica, and east's server."""
    east = PrivateMySQL()
    east.start()
    try:
        pair = ReplicaPair().start()
        try:
            yield pair, east
        finally:
            pair.stop()
    finally:
        east.stop()


def _state(client: redis.Redis, shard: str) -> dict[str, str]:
    raw = client.hgetall(f"migrator:shop:sync:{shard}")
    return {k.decode(): v.decode() for k, v in raw.items()}


def _writing(shards: dict[str, Any], seed: int, steps: int) -> list[threading.Thread]:
    out = []
    for n, (name, db) in enumerate(shards.items()):
        t = threading.Thread(target=write_shard, args=(db, name, seed + n, steps))
        t.start()
        out.append(t)
    return out


@pytest.mark.parametrize("moved", ["url", "address"])
def test_one_shards_failover_to_its_promoted_replica_leaves_the_other_following(
    moved: str, scene: tuple[ReplicaPair, PrivateMySQL], redis_url: str, tmp_path: Path
) -> None:
    """``url``: west's URL in the mapping moved to the replica, west's process started again;
    ``address``: the replica takes the primary's address (a virtual IP moved) while west's
    process, never restarted, retries it: it fails over in place."""
    pair, east_server = scene
    shards = {"east": seeded("east", east_server), "west": seeded("west", pair.primary)}
    mapping = Path(mapping_of(tmp_path, shards))
    mapping.write_text(mapping.read_text() + "options:\n  retries: "
                       "{attempts: 200, backoff: 0.2, max_backoff: 1}\n")  # fmt: skip
    client = redis.Redis.from_url(redis_url)
    env = dict(os.environ)
    args = {n: ["sync", str(mapping), "--shard", n, "--target", redis_url] for n in shards}
    with ExitStack() as running:
        east = running.enter_context(following(args["east"], env))
        west = running.enter_context(following(args["west"], env))
        for t in _writing(shards, 1, 120):
            t.join()
        pair.caught_up()  # the replica holds every transaction west's primary logged
        wait_for("west applying", lambda: _state(client, "west").get("gtid"), 60)
        before = _state(client, "west")
        assert before["file"].startswith("mysql-bin.") and before["server"] == "1"
        east_before = _state(client, "east")
        # east keeps taking writes through west's failover
        east_writes = threading.Thread(target=write_shard, args=(shards["east"], "east", 5, 150))
        east_writes.start()
        address = pair.primary.port
        pair.primary.halt(kill=True)  # west's primary fails
        pair.promote()  # its replica becomes west's primary: the same GTIDs, other files
        if moved == "url":
            west.send_signal(signal.SIGTERM)  # west's process, retrying the dead address
            assert west.wait(60) == 0, west.stderr.read() if west.stderr else ""
            mapping.write_text(mapping.read_text().replace(f":{address}/",
                                                           f":{pair.replica.port}/"))  # fmt: skip
            west = running.enter_context(following(args["west"], env))
        else:  # the primary's address now answers with the replica
            pair.replica.halt()
            pair.replica.port = address
            pair.replica.start()
        promoted = shards["west"] = on(pair.replica, shards["west"].name)
        wait_for("west on the replica",
                 lambda: _state(client, "west")["file"].startswith("replica-bin."), 60)  # fmt: skip
        after = _state(client, "west")
        assert after["server"] == "2" and after["gtid"] == before["gtid"]
        assert after["source"].endswith(f":{pair.replica.port}/{promoted.name}")
        wait_for("east applying meanwhile",
                 lambda: _state(client, "east")["pos"] != east_before["pos"], 60)  # fmt: skip
        for t in _writing({"west": promoted}, 11, 100):
            t.join()
        east_writes.join()
        for t in _writing(shards, 21, 60):
            t.join()
        wait_for("west caught up", lambda: parse(_state(client, "west").get("gtid", ""))
                 == parse(pair.gtid(pair.replica)), 60)  # fmt: skip
        assert east.poll() is None and west.poll() is None, "west's failover is west's business"
        for proc in (east, west):
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(60) == 0, proc.stderr.read() if proc.stderr else ""
        said = west.stderr.read() if west.stderr else ""
        assert "failover" in said and "replica-bin." in said, said[-2000:]
    for name in shards:  # each shard caught up (east's process was stopped where it was)
        sync(str(mapping), target=redis_url, shard=name, until_caught_up=True)
    east_after = _state(client, "east")
    assert east_after["source"] == east_before["source"]  # east's own server throughout
    assert east_after["server"] == east_before["server"]
    assert east_after["@marker"] == east_before["@marker"]  # never loaded again
    assert int(client.get(b"item:id") or 0) >= BASE["east"]
    equals_a_rebuild({"west": pair.replica}, shards, str(mapping), redis_url, tmp_path)
