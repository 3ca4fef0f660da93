"""Finding and removing the keys a mapping owns: SCAN (one server, or every primary of a
cluster) and UNLINK in batches — never FLUSHDB, so keys the mapping does not own survive."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import cast

from redis.cluster import RedisCluster

from migrator.errors import MigratorError
from migrator.plan.keyspace import KeyPattern, KeySpace, glob_escape, glob_regex
from migrator.plan.nesting import trees
from migrator.plan.nesting_side import side_keys
from migrator.plan.owners import owners_of
from migrator.plan.row_images import images_of
from migrator.retry import Retrying, Stopped
from migrator.store.sink import Client, retry

#: keys asked for per SCAN call, and removed per UNLINK batch
SCAN_COUNT = 2000
UNLINK_BATCH = 1000


def scan_keys(
    client: Client, glob: str, count: int = SCAN_COUNT, retrying: Retrying | None = None
) -> Iterator[list[bytes]]:
    """Keys matching ``glob``, a SCAN page at a time, on every primary of a cluster (a key
    may come twice, as SCAN allows); a dropped connection is retried as ``retrying`` says."""
    nodes = (
        [client.get_redis_connection(n) for n in client.get_primaries()]
        if isinstance(client, RedisCluster)
        else [client]
    )
    for node in nodes:
        cursor = 0
        while True:
            cursor, keys = retry(
                lambda: node.scan(cursor=cursor, match=glob, count=count),  # noqa: B023
                retrying=retrying,
            )
            if keys and isinstance(keys[0], bytes):  # as our clients answer: no copy
                yield cast("list[bytes]", keys)
            elif keys:  # a client that decodes replies
                yield [str(k).encode() for k in keys]
            if int(cursor) == 0:
                break


def scan_space(
    client: Client,
    space: KeySpace,
    tables: Iterable[str] | None = None,
    count: int = SCAN_COUNT,
    retrying: Retrying | None = None,
) -> Iterator[list[bytes]]:
    """Pages of keys under the key spaces of ``tables`` (default: all), each key once per
    page even where globs overlap (a key matched by an earlier glob is left out)."""
    done: list[bytes] = []
    for glob in space.globs(tables):
        seen = re.compile(b"|".join(done), re.DOTALL).fullmatch if done else None
        for keys in scan_keys(client, glob, count, retrying):
            page = keys if seen is None else [k for k in keys if seen(k) is None]
            if page:
                yield page
        done.append(glob_regex(glob).pattern)


def remove_owned(
    client: Client,
    space: KeySpace,
    tables: Iterable[str] | None = None,
    keep: Callable[[KeyPattern | None], bool] | None = None,
    retrying: Retrying | None = None,
    stop: threading.Event | None = None,
    removing: Callable[[int], None] | None = None,
) -> int:
    """UNLINK every key the mapping owns under ``tables``' key spaces (keys matching the
    mapping's ``ignore`` globs, the tool's own ``migrator:`` keys and those whose pattern
    ``keep`` answers True for stay); returns how many
    were removed (UNLINK's own count, so a key SCAN returns twice counts once). On a cluster
    redis-py splits each UNLINK per slot. Dropped connections are retried as ``retrying``
    says (default: the default policy, silently). ``stop`` set: ``Stopped`` between two
    pages (a Ctrl-C is acted on at once; what is removed stays removed); ``removing`` is
    told the keys removed so far after each UNLINK."""
    wanted = None if tables is None else list(tables)
    removed = 0
    pending: list[bytes] = []

    def unlink() -> int:
        keys = list(dict.fromkeys(pending))
        n = int(retry(lambda: client.unlink(*keys), retrying=retrying)) if keys else 0
        if removing is not None and keys:
            removing(removed + n)
        return n

    for page in space.owned(scan_space(client, space, wanted, retrying=retrying), wanted):
        if stop is not None and stop.is_set():
            raise Stopped("stopped while removing the mapping's keys")
        pending += [key for key, _, p in page if keep is None or not keep(p)]
        if len(pending) >= UNLINK_BATCH:
            removed += unlink()
            pending = []
    # a table's expiry schedule goes with its keys: no memo outlives the rows it describes
    schedules = [
        key
        for name, plan in space.plans.items()
        if plan.expiry is not None and (wanted is None or name in wanted)
        for key in (plan.expiry.schedule, plan.expiry.memo, plan.expiry.gone)
    ]
    if schedules:
        retry(lambda: client.unlink(*schedules), retrying=retrying)
    removed += unlink()
    pending = []
    # the side structure of nested documents goes with its tree (plan/nesting_side.py)
    hashes, prefixes = nested_keys(space, wanted)
    pending += hashes
    for name, plan in space.plans.items():  # a cascade child's row images go with its rows
        images = images_of(plan) if wanted is None or name in wanted else None
        if images is not None:
            pending.append(images.key)
            prefixes += [prefix for prefix, _ in images.by]
        owners = owners_of(plan) if wanted is None or name in wanted else None
        if owners is not None:  # a sharded source's owner hash (plan/owners.py)
            pending.append(owners.key)
    for prefix in prefixes:
        pending += retry(partial(_scan, client, glob_escape(prefix) + "*"), retrying=retrying)
    if pending:
        retry(lambda: client.unlink(*pending), retrying=retrying)
    return removed


def _scan(client: Client, match: str) -> list[bytes]:
    return list(client.scan_iter(match=match, count=1000))


def nested_keys(space: KeySpace, wanted: list[str] | None) -> tuple[list[bytes], list[bytes]]:
    if not any(p.table.nest is not None for p in space.plans.values()):
        return [], []
    try:
        tops = trees(space.plans)
    except MigratorError:
        return [], []  # a nesting that cannot be wrote nothing
    return side_keys(tops, wanted)
