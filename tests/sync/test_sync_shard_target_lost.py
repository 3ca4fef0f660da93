"""A target that lost its data under ``sync`` over shards (docs/sharding.md#one-shards-trouble):
a private Redis (no persistence) restarted empty while a ``sync --shard`` process per shard
follows and both shards take random writes. Each process finds the loss by itself and loads
its own shard again; neither removes what the other loaded since. Redis then equals an
independent rebuild of the union and ``verify`` answers 0."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import redis

from tests.faults import redis_process, wait_for
from tests.sync.helpers import cli, following
from tests.sync.shard_scene import equals_a_rebuild, mapping_of, servers, shards, write_shard

__all__ = ["servers", "shards"]  # the fixtures


def _loaded(client: redis.Redis, name: str) -> bool:
    """The shard's first load done again: its position stored, no table of it left to read."""
    state = f"migrator:shop:sync:{name}"
    try:
        return bool(client.hget(state, "file")) and not client.hget(state, "snapshot")
    except redis.ConnectionError:
        return False


def test_redis_restarted_empty_under_two_shards_each_loads_its_own_again(
    servers: dict[str, Any], shards: dict[str, Any], tmp_path: Path
) -> None:
    with redis_process(tmp_path) as own:
        url = own.url
        mapping = mapping_of(tmp_path, shards)
        env = dict(os.environ)
        with ExitStack() as running:
            args = {n: ["sync", mapping, "--shard", n, "--target", url] for n in shards}
            procs = {n: running.enter_context(following(args[n], env)) for n in shards}
            writers = [threading.Thread(target=write_shard, args=(db, n, 31 + i, 120))
                       for i, (n, db) in enumerate(shards.items())]  # fmt: skip
            for t in writers:
                t.start()
            client = own.client()
            wait_for("both applying", lambda: all(_loaded(client, n) for n in shards), 60)
            own.restart(down=0.3)  # empty: no persistence; both processes lose their data
            for t in writers:
                t.join()
            wait_for("both loaded again", lambda: all(_loaded(own.client(), n) for n in shards),
                     120)  # fmt: skip
            more = [threading.Thread(target=write_shard, args=(db, n, 41 + i, 60))
                    for i, (n, db) in enumerate(shards.items())]  # fmt: skip
            for t in more:
                t.start()
            for t in more:
                t.join()
            assert all(p.poll() is None for p in procs.values()), "a loss is no reason to stop"
            for p in procs.values():
                p.send_signal(signal.SIGTERM)
                assert p.wait(60) == 0, p.stderr.read() if p.stderr else ""
            said = {n: (p.stdout.read() if p.stdout else "") + (p.stderr.read() if p.stderr else "")
                    for n, p in procs.items()}  # fmt: skip
        assert all("lost data" in s for s in said.values()), said
        for name in shards:  # caught up: every write applied
            line = cli("sync", mapping, "--shard", name, "--target", url, "--until-caught-up")
            done = subprocess.run(line, capture_output=True, text=True)
            assert done.returncode == 0, done.stderr
        equals_a_rebuild(servers, shards, mapping, url, tmp_path)
