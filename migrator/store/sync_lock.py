"""One ``sync`` per mapping and target: a lease in Redis, ``migrator:<mapping>:sync:lock``.

The key holds who runs (host, pid, when it started, a random token) and lives
``LEASE_SECONDS``; the holder renews it from a thread of its own every second and deletes it
when it ends. A second ``sync`` of the same mapping into the same Redis database finds the key
and refuses before it writes anything or connects to the binary log (the first one is left
untouched). A holder that died without ending (``kill -9``) is seen two ways: on the same host
its pid is gone, and the lease is taken over at once; elsewhere the lease runs out within
``LEASE_SECONDS``. If the key disappears under a holder (Redis restarted empty, flushed), the
renewal writes it again; if another run holds it by then, ``lost`` tells the holder to stop.
"""

from __future__ import annotations

import datetime
import json
import os
import socket
import threading
from typing import Any

import redis

from migrator.errors import MigratorError
from migrator.store.guard import new_token

LEASE_SECONDS = 10
RENEW_SECONDS = 1.0

#: KEYS[1] the lock; ARGV[1] our value, ARGV[2] the lease in ms. Renew ours, take a free one,
#: else return the holder's value
RENEW = (
    "local v = redis.call('GET', KEYS[1]) "
    "if v == false or v == ARGV[1] then "
    "redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return false end "
    "return v"
)
#: KEYS[1] the lock; ARGV[1] the value found, ARGV[2] ours, ARGV[3] the lease in ms
TAKE_OVER = (
    "if redis.call('GET', KEYS[1]) == ARGV[1] then "
    "return redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) end return false"
)
RELEASE = (
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"
)


def lock_key(mapping_name: str, shard: str = "") -> str:
    """``migrator:<m>:sync:lock``; a shard's: ``migrator:<m>:sync:<shard>:lock`` (one sync
    per shard, docs/sharding.md#sync)."""
    return f"migrator:{mapping_name}:sync{':' + shard if shard else ''}:lock"


class SyncLock:
    """Taken with ``acquire()`` (or refused), renewed in the background, ``release()``d."""

    def __init__(self, client: Any, mapping_name: str, mapping_file: str, shard: str = "") -> None:
        self.client = client
        self.key = lock_key(mapping_name, shard)
        self.what = f"{mapping_file} --shard {shard}" if shard else mapping_file
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        self.value = json.dumps(
            {"host": socket.gethostname(), "pid": os.getpid(), "since": now, "id": new_token()}
        )
        self.lost: str | None = None  # set when another run holds the lease now
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def acquire(self) -> None:
        """Take the lease, or raise MigratorError (exit 2) naming the sync that holds it."""
        lease = str(LEASE_SECONDS * 1000)
        held = self.client.eval(RENEW, 1, self.key, self.value, lease)
        if held is not None and _dead(held):
            if self.client.eval(TAKE_OVER, 1, self.key, held, self.value, lease) is None:
                held = self.client.get(self.key)  # someone else was quicker
            else:
                held = None
        if held is not None:
            self.client.close()
            raise MigratorError(
                f"another sync of {self.what} into this Redis database is running "
                f"({_describe(held)}); a second one would fight it over the binary log",
                "stop that one first (Ctrl-C, SIGTERM or its service), or sync into another "
                "Redis database; a sync killed with -9 on another host frees this within "
                f"{LEASE_SECONDS} s",
            )
        self._thread = threading.Thread(target=self._renew, name="sync-lock", daemon=True)
        self._thread.start()

    def _renew(self) -> None:
        lease = str(LEASE_SECONDS * 1000)
        while not self._stop.wait(RENEW_SECONDS):
            try:
                held = self.client.eval(RENEW, 1, self.key, self.value, lease)
            except (redis.RedisError, OSError):
                continue  # Redis away: the follow loop meets it too; renewed when it is back
            if held is not None:
                self.lost = _describe(held)
                return

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        try:
            self.client.eval(RELEASE, 1, self.key, self.value)
        except (redis.RedisError, OSError):
            pass  # the lease runs out by itself
        self.client.close()

    def check(self) -> None:
        """Raise when another run took the lease over (after a long Redis outage)."""
        if self.lost is not None:
            raise MigratorError(
                f"another sync of {self.what} took over this Redis database ({self.lost}) "
                "while this one could not renew its lease; this one stops",
                "run one sync per mapping and target",
            )


def _held(raw: Any) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _dead(raw: Any) -> bool:
    """Whether the holder ran on this host and its process is gone."""
    held = _held(raw)
    if held.get("host") != socket.gethostname() or not isinstance(held.get("pid"), int):
        return False
    try:
        os.kill(held["pid"], 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, someone else's
        return False
    return False


def _describe(raw: Any) -> str:
    held = _held(raw)
    if not held:
        return "unknown holder"
    return f"pid {held.get('pid')} on {held.get('host')}, since {held.get('since')}"
