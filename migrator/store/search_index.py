"""Search indexes on the target (plan/search.py makes their definitions).

``has_search(client)``: the server knows ``FT.CREATE`` (the RediSearch module, Redis 8's query
engine). ``ensure(client, mapping, index)``: the alias ``index.alias`` points to an index of
exactly this definition. When it already does, nothing happens; otherwise the new version
(``<alias>:<digest>``) is created, indexing is waited out, ``FT.ALIASUPDATE`` moves the alias
to it in one command, and the old version is dropped (its documents, the row hashes, stay).
A reader of the alias is never without an index. The definition and its digest are stored in
``migrator:<mapping>:search:<table>`` (HASH: alias, index, digest, definition).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from typing import Any

import redis

from migrator.errors import MigratorError, TargetError
from migrator.plan.search import DATABASE_FIX, SearchIndex, wrong_database
from migrator.progress import Progress
from migrator.store.cluster import is_cluster

INDEXING_SECONDS = 600.0
FIX = (
    "use a server with the query engine: Redis 8 as redis.io builds it (the redis:8 image; "
    "Debian's own redis-server 8 has none), Redis Stack, or Valkey/Redis with the RediSearch "
    "module loaded (--loadmodule redisearch.so); or remove 'search:' from the mapping"
)


def require(client: Any, indexes: Sequence[SearchIndex]) -> None:
    """Refuse (exit 2), before anything is written, a target that cannot hold them."""
    if not indexes:
        return
    tables = ", ".join(i.table for i in indexes)
    if is_cluster(client):
        raise MigratorError(
            f"the mapping asks for search indexes ({tables}), which the tool does not build "
            "on a Redis Cluster",
            "load into a single server, or remove 'search:' from the mapping",
        )
    if not has_search(client):
        raise MigratorError(
            f"the mapping asks for search indexes ({tables}), but the target has no search "
            "(FT.CREATE is an unknown command); nothing was written",
            FIX,
        )
    database = client.connection_pool.connection_kwargs.get("db", 0)
    wrong = wrong_database(int(database or 0), [i.table for i in indexes])
    if wrong:
        raise MigratorError(f"{wrong}; nothing was written", DATABASE_FIX)
    for index in indexes:
        if current(client, index.alias) == index.alias:
            raise _taken(index.alias)


def _taken(name: str) -> MigratorError:
    return MigratorError(
        f"the target has a search index named {name} of its own (not an alias), so the tool "
        "cannot point that name at its index; nothing was written",
        "give search.name another value, or drop that index (FT.DROPINDEX)",
    )


def build(client: Any, mapping: str, indexes: Sequence[SearchIndex], progress: Progress) -> None:
    """Each index made current under its alias (a new version only when its definition
    changed), waited for until indexed."""
    for index in indexes:
        if ensure(client, mapping, index):
            progress.note(index.table, f"search index {index.alias} -> {index.version}")


def has_search(client: redis.Redis) -> bool:
    """The server knows the query engine's commands (``FT._LIST`` answers)."""
    try:
        client.execute_command("FT._LIST")
    except redis.ResponseError as e:
        if "unknown command" in str(e).lower():
            return False
        raise
    return True


def state_key(mapping: str, table: str) -> str:
    return f"migrator:{mapping}:search:{table}"


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def info(client: redis.Redis, name: str) -> dict[str, Any] | None:
    """FT.INFO of an index or alias as a dict of text keys; None when there is none."""
    try:
        raw = client.execute_command("FT.INFO", name)
    except redis.ResponseError as e:
        if "unknown index" in str(e).lower() or "no such index" in str(e).lower():
            return None
        raise
    if isinstance(raw, dict):
        return {_text(k): v for k, v in raw.items()}
    return {_text(raw[i]): raw[i + 1] for i in range(0, len(raw) - 1, 2)}


def current(client: redis.Redis, alias: str) -> str | None:
    """The index the alias points to now, or None."""
    found = info(client, alias)
    return None if found is None else _text(found["index_name"])


def wait_indexed(client: redis.Redis, name: str, seconds: float = INDEXING_SECONDS) -> None:
    """Until the index has scanned every key under its prefix (FT.INFO ``indexing`` 0)."""
    deadline = time.monotonic() + seconds
    while True:
        found = info(client, name)
        if found is None:
            raise TargetError(f"the search index {name} disappeared while it was being built")
        if int(found.get("indexing", 0)) == 0:
            return
        if time.monotonic() > deadline:
            done = float(found.get("percent_indexed", 0)) * 100
            raise TargetError(f"the search index {name} is still indexing ({done:.0f}%)")
        time.sleep(0.05)


def ensure(client: redis.Redis, mapping: str, index: SearchIndex) -> bool:
    """Make the alias point to this definition; True when a new version was built.

    Each step can be interrupted (``kill -9``) and the next call ends the work: a version
    created but not yet aliased is built on; the definition is recorded, and every other
    version of ours under the alias dropped, also when the alias already points here."""
    version = index.version
    before = current(client, index.alias)
    built = before != version
    if built:
        if before == index.alias:
            raise _taken(index.alias)
        if info(client, version) is None:
            client.execute_command("FT.CREATE", version, *index.args())
        wait_indexed(client, version)
        client.execute_command("FT.ALIASUPDATE", index.alias, version)
    client.hset(
        state_key(mapping, index.table),
        mapping={
            "alias": index.alias, "index": version, "digest": index.digest,
            "definition": json.dumps(index.command()),
        },
    )  # fmt: skip
    for old in versions(client, index.alias):
        if old != version:
            client.execute_command("FT.DROPINDEX", old)
    return built


def versions(client: redis.Redis, alias: str) -> list[str]:
    """The indexes this tool made under ``alias`` (``<alias>:<12 hex digits>``)."""
    ours = re.compile(re.escape(alias) + ":[0-9a-f]{12}")
    return [n for n in map(_text, client.execute_command("FT._LIST")) if ours.fullmatch(n)]


def counts(client: redis.Redis, name: str, queries: Sequence[str], batch: int = 1000) -> list[int]:
    """How many documents of the index match each query (``FT.SEARCH ... LIMIT 0 0``),
    pipelined ``batch`` at a time."""
    out: list[int] = []
    for start in range(0, len(queries), batch):
        pipe = client.pipeline(transaction=False)
        for query in queries[start : start + batch]:
            pipe.execute_command("FT.SEARCH", name, query, "LIMIT", "0", "0")
        out += [_total(reply) for reply in pipe.execute()]
    return out


def _total(reply: Any) -> int:
    if isinstance(reply, dict):
        total = reply.get(b"total_results", reply.get("total_results"))
        return int(total or 0)
    return int(reply[0])


def tag_query(field: str, value: str) -> str:
    """``@field:{value}``, the value's ASCII punctuation and spaces escaped as the engine
    wants; other characters as they are (an escaped ``€`` or emoji no longer matches)."""
    escaped = "".join(c if c.isalnum() or c == "_" or not c.isascii() else "\\" + c for c in value)
    return f"@{_escape_name(field)}:{{{escaped}}}"


def _escape_name(field: str) -> str:
    return "".join(c if c.isalnum() or c == "_" else "\\" + c for c in field)
