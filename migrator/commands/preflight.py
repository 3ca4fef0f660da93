"""Before ``migrate`` writes anything: the target's own data is safe (issue 10 item 6).

* **Keys in the way.** Keys in the mapping's key space (``plan/keyspace.py``: what the
  tables' key patterns match, and anything else under their namespaces, ``emp:...``; found
  with SCAN; ``options.ignore`` left out) make the run refuse with exit 2, naming examples
  and their types,
  unless an earlier run of this mapping wrote there: its checkpoint hash
  ``migrator:<mapping>:checkpoint`` exists (every run writes it before its first batch).
  ``--into-existing`` (or ``migrate --replace``, which first removes what the mapping owns)
  writes anyway. An empty database is not scanned at all.
* **Memory.** With ``maxmemory`` set on the target, the dry-run memory model
  (``plan/estimate.py``) is fed the first rows of each table and scaled to the table's row
  count; a load that would not fit into ``maxmemory - used_memory`` is refused with exit 2
  (``--no-memory-check`` tries anyway). Skipped for ``--resume`` (the target already holds
  part of the load) and for a Redis Cluster (memory is per node).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import redis
from redis.cluster import RedisCluster

from migrator.commands.dryrun_sink import PlanSink
from migrator.errors import MigratorError
from migrator.mapping.model import Mapping
from migrator.mapping.resolve import Resolved
from migrator.plan.estimate import Limits, keyspace, target_limits
from migrator.plan.keyspace import KeySpace
from migrator.plan.planner import TablePlan
from migrator.source.mysql import Source
from migrator.source.where import clause
from migrator.store.checkpoint import checkpoint_key
from migrator.store.keys import scan_space

EXAMPLES = 5  # keys named when the target is not empty
SAMPLE_ROWS = 2000  # rows per table fed to the memory model


@dataclass(frozen=True)
class Found:
    key: bytes
    type: str

    def __str__(self) -> str:
        return f"{self.key.decode('utf-8', 'backslashreplace')} ({self.type})"


def check_target(
    client: Any,
    mapping: Mapping,
    plans: Sequence[TablePlan],
    *,
    into_existing: bool = False,
    names: Sequence[str] = (),
) -> None:
    """Refuse (exit 2) when keys in the mapping's key space are there and no earlier run of
    this mapping wrote them (``names``: its checkpoints' names, a sharded source's one per
    shard; default the mapping's); see the module docstring."""
    keys = [checkpoint_key(n) for n in names or (mapping.name,)]
    if into_existing or int(client.exists(*keys)):
        return
    if int(client.dbsize()) == 0:
        return
    found = keys_in_the_way(client, KeySpace(plans, mapping.kept()))
    if found:
        shown = ", ".join(str(f) for f in found)
        raise MigratorError(
            f"the target already holds keys in this mapping's key space that no earlier run "
            f"of it wrote, e.g. {shown}; nothing was written",
            "load into an empty database, remove those keys, list them in options.ignore if "
            "they belong to the application, or pass --into-existing to write over them "
            "(--replace removes what the mapping owns first)",
        )


def keys_in_the_way(client: Any, space: KeySpace, limit: int = EXAMPLES) -> list[Found]:
    """Up to ``limit`` keys (and their types) in the key space (SCAN of its globs)."""
    keys: list[bytes] = []
    for page in space.owned(scan_space(client, space)):
        keys += [key for key, _, _ in page if key not in keys][: limit - len(keys)]
        if len(keys) >= limit:
            break
    types = [client.type(k) for k in keys]
    return [Found(k, t.decode() if isinstance(t, bytes) else str(t)) for k, t in zip(keys, types)]


# -- memory ----------------------------------------------------------------------------------
def check_memory(client: Any, src: Source, resolved: Sequence[Resolved]) -> None:
    """Refuse (exit 2) a load the memory model says will not fit under ``maxmemory``."""
    if isinstance(client, RedisCluster):
        return
    try:
        info = client.info("memory")
    except redis.ResponseError:  # INFO not allowed (ACL): nothing to compare with
        return
    limit = int(info.get("maxmemory", 0) or 0)
    if not limit:
        return
    used = int(info.get("used_memory", 0) or 0)
    try:
        server = client.info("server")
    except redis.ResponseError:  # only INFO memory allowed: Redis 7.0's layout
        server = {}
    need = estimate(src, resolved, target_limits(server))
    free = max(0, limit - used)
    if need > free:
        raise MigratorError(
            f"the load needs about {_mib(need)} of Redis memory (the dry-run estimate), but "
            f"the target has {_mib(free)} free (maxmemory {_mib(limit)}, {_mib(used)} used); "
            "nothing was written",
            "raise maxmemory (CONFIG SET maxmemory ...), load fewer tables (--tables), or "
            "pass --no-memory-check to try anyway",
        )


def estimate(src: Source, resolved: Sequence[Resolved], limits: Limits | None = None) -> int:
    """Bytes the load would take: each table's first SAMPLE_ROWS rows planned and sized as
    dry-run does (with the target's ``limits``: ``target_limits``), scaled to the table's row
    count (exact when the table is that small)."""
    total = 0.0
    keys = 0.0
    for r in resolved:
        plan = TablePlan(r)
        selector = src.selector(r.name, plan.row_names)
        batches = src.batches(
            r.name, selector, r.primary_key, SAMPLE_ROWS, page_size=SAMPLE_ROWS, where=clause(r)
        )
        rows = next(batches, [])
        batches.close()
        if not rows:
            continue
        sink = PlanSink(plan, None, limits or Limits())
        sink.write(plan.plan(rows)[0])
        scale = 1.0
        if len(rows) >= SAMPLE_ROWS:
            scale = max(r.schema.row_estimate or 0, len(rows)) / len(rows)
        total += scale * sum(m.bytes for m in sink.models.values())
        keys += scale * sum(m.keys for m in sink.models.values())
    return int(total) + keyspace(int(keys))


def _mib(n: int) -> str:
    return f"{n / 2**20:,.1f} MiB"
