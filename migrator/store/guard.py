"""Whether the target still holds what this run wrote (no false success, issue 10 item 1).

Two checks, both cheap:

* **The run marker.** A run starts by writing a random token into its checkpoint hash
  (field ``@marker``). Every checkpoint write afterwards is a tiny script that first
  compares that field with the run's token and refuses (``-MIGRATORLOST``) when it differs:
  a target restarted empty, a flushed database or a restore of an older snapshot are seen
  at the next batch, atomically with the write that would have vouched for lost data.
* **The server's identity.** On a single server, every new connection (redis-py reconnects
  silently) first asks ``INFO server`` for ``run_id`` and ``HGET`` for the marker; a
  different ``run_id`` (a restart that kept its data, a failover to a replica) or a missing
  marker makes the connection refuse to be used (``TargetLost``), so nothing is written to
  a server that may lack earlier writes. (A Redis Cluster has one ``run_id`` per node: there
  only the marker is checked.)

``reconcile`` then decides what the target still vouches for: the marker is there (data and
checkpoint are an ordered prefix of what was written: AOF, snapshots and replication all keep
order) -> the checkpoint it holds; the marker is gone -> nothing, so every table loads again.
"""

from __future__ import annotations

import secrets
from typing import Any

import redis
from redis.cluster import RedisCluster

from migrator.errors import TargetLost

Client = redis.Redis | RedisCluster

MARKER = "@marker"
RUN = "@run"
LOST_REPLY = "MIGRATORLOST"
#: KEYS[1] the checkpoint hash; ARGV: token, field, value. HSET only while the marker holds.
CHECKPOINT_SCRIPT = (
    "if redis.call('HGET', KEYS[1], '@marker') ~= ARGV[1] then "
    "return redis.error_reply('MIGRATORLOST the run marker is gone from the target') end "
    "return redis.call('HSET', KEYS[1], ARGV[2], ARGV[3])"
)


def new_token() -> str:
    return secrets.token_hex(8)


def run_id(client: Client) -> str:
    """The server's ``run_id`` (changes on every restart); "" for a cluster or when INFO
    is not allowed."""
    if isinstance(client, RedisCluster):
        return ""
    try:
        return str(client.info("server").get("run_id", ""))
    except redis.ResponseError:  # INFO refused (ACL): the marker alone must do
        return ""


def lost(reason: str) -> TargetLost:
    return TargetLost(
        f"the target lost data written by this run: {reason}",
        "migrate reloads what is missing by itself; when it gave up, "
        "'--resume' loads everything the target no longer holds",
    )


class Guard:
    """The identity check on every new connection of a single-server client (see above)."""

    def __init__(self, key: str, token: str, expected_run_id: str) -> None:
        self.key = key.encode()
        self.token = token.encode()
        self.run_id = expected_run_id
        self.armed = True

    def attach(self, client: Client) -> None:
        """Check every connection the client makes from now on (and the server now)."""
        if isinstance(client, RedisCluster):
            return
        pool: Any = client.connection_pool
        pool.connection_kwargs["redis_connect_func"] = self._on_connect
        # connections already made were built with the old kwargs (redis-py internals)
        for conn in [*pool._available_connections, *pool._in_use_connections]:
            conn.redis_connect_func = self._on_connect
        marker = client.hget(self.key, MARKER)
        self.check(run_id(client), marker if isinstance(marker, bytes) else None)

    def check(self, server_run_id: str, marker: bytes | None) -> None:
        if not self.armed:
            return
        if marker != self.token:
            raise lost("its run marker is gone (restarted empty, flushed, or an older snapshot)")
        if self.run_id and server_run_id and server_run_id != self.run_id:
            raise lost(
                f"the server restarted or failed over (run_id {self.run_id[:8]}… is now "
                f"{server_run_id[:8]}…) and may lack the last writes"
            )

    def _on_connect(self, conn: Any) -> None:
        conn.on_connect()
        if not self.armed:
            return
        conn.send_command("INFO", "server")
        try:
            info = conn.read_response()
        except redis.ResponseError:  # INFO refused (ACL): the marker alone must do
            info = b""
        conn.send_command("HGET", self.key, MARKER)
        marker = conn.read_response()
        text = info.decode() if isinstance(info, bytes) else str(info)
        found = next((ln.split(":", 1)[1].strip() for ln in text.splitlines()
                      if ln.startswith("run_id:")), "")  # fmt: skip
        try:
            self.check(found, marker)
        except TargetLost:
            conn.disconnect()  # never hand this connection out
            raise
