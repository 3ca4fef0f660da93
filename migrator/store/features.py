"""What the target must offer for the mapping, checked at start by ``require`` before anything
is written (exit 2 with the fix): the JSON type for ``as: json`` tables (RedisJSON: a module
on Redis 7 and Valkey, built into Redis 8's open-source server), and the query engine for
``search:`` (store/search_index.py), and vector sets for ``vector_sets:`` (Redis 8's ``VADD``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from redis.exceptions import ResponseError

from migrator.errors import MigratorError, docs
from migrator.mapping.resolve import Resolved
from migrator.plan.search import SearchIndex
from migrator.store import search_index

#: a key no table writes: JSON.TYPE of a missing key answers nil where the type exists
PROBE = b"migrator:probe:json"


def knows(client: Any, command: str) -> bool:
    """Whether the server has ``command`` (asked of a key no table writes: a command of a
    type that exists answers nil or 0 for it, an unknown one "unknown command")."""
    try:
        client.execute_command(command, PROBE)
    except ResponseError as e:
        if "unknown command" in str(e).lower():
            return False
        raise
    return True


def has_json(client: Any) -> bool:
    """Whether the server knows the JSON type (``JSON.TYPE`` is a command there)."""
    return knows(client, "JSON.TYPE")


def require_json(client: Any, resolved: Sequence[Resolved]) -> None:
    """Refuse (exit 2) a mapping with ``as: json`` tables when the target lacks JSON."""
    tables = [r.name for r in resolved if r.table.kind == "json"]
    if not tables or has_json(client):
        return
    raise MigratorError(
        f"the target has no JSON type, which 'as: json' needs ({', '.join(tables)}): it has "
        "no JSON.SET command",
        "write the documents as JSON text in strings ('as: json-string', any Redis), or use "
        "a server with RedisJSON: Redis 8 as redis.io builds it (the redis:8 image; Debian's own "
        "redis-server 8 has no JSON), Redis Stack, or Valkey/Redis with the module loaded "
        "(--loadmodule rejson.so)",
    )


def has_vector_sets(client: Any) -> bool:
    """Whether the server knows vector sets (``VCARD`` is a command there)."""
    return knows(client, "VCARD")


def require_vector_sets(client: Any, resolved: Sequence[Resolved]) -> None:
    """Refuse (exit 2) a mapping with ``vector_sets:`` when the target lacks them."""
    tables = [r.name for r in resolved if r.table.vector_sets]
    if not tables or has_vector_sets(client):
        return
    raise MigratorError(
        f"the target has no vector sets, which 'vector_sets:' needs ({', '.join(tables)}): "
        "it has no VADD command; nothing was written",
        "use Redis 8 or later (vector sets are built into its server: the redis:8 image, or "
        "Debian's redis-server 8), or drop vector_sets: from the mapping "
        f"({docs('mapping.md#vector_sets')})",
    )


def require(client: Any, resolved: Sequence[Resolved], searches: Sequence[SearchIndex]) -> None:
    """Every check of this module and of search indexes, in one call for each command."""
    require_json(client, resolved)
    require_vector_sets(client, resolved)
    search_index.require(client, searches)
