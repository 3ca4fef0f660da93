"""Latest lists over a sharded source (docs/sharding.md#latest-lists-over-shards): the newest N
rows of the union, kept by one ``sync`` process per shard without reading another shard.

One source rebuilds a touched latest list from MySQL's newest N rows (sync/apply.py). Over
shards each process reads its own shard's newest N, with their order values, into a candidate
sorted set of its own, ``migrator:<m>:latest:<shard>:{<list key>}`` (``candidates_key``: in
the list's Redis Cluster slot; all scores 0; each member
the row's sort key — the order value, then the primary key, each encoded so that byte order is
MySQL's order (``ordered_latest``'s rank) — a NUL, then the primary key as the list holds
it), and then rebuilds the list
from every shard's candidates by a script (``MERGE``): the N greatest sort keys over every
shard, newest first, as ``ORDER BY order_by DESC, pk DESC LIMIT N`` over the union orders them.
Both go in the group's MULTI/EXEC. A shard's candidates are its newest N rows that Redis holds
as its own: a row the owner hash (plan/owners.py) gives to another shard, or to none (a
collision held it out: its primary key or a unique value another shard holds), is left out and
the next newest read instead, as ``migrate`` leaves collisions out of its merge
(source/shards.py). The newest N of the union are among the union of each shard's newest N, so
the list is exact once every shard's process has caught up (as one source's is); a shard whose
server is down keeps its last candidates, so its rows stay where they were. A shard's first
load and ``--reload`` write its candidates at the end of each table (plan/finish.py's place).

The order is the one ``migrate`` and ``verify`` merge the shards' newest rows in
(source/shards.py ``ordered_latest``): numbers by value, text that MySQL compares under a
collation by the server's comparison key of the value (``WEIGHT_STRING``), every other value
byte for byte. The sort key is hex, so the
member's first NUL ends it. On a Redis Cluster the script reads keys of one slot: every
candidates key hashes as the list key does (its hash tag kept, or the list key made the tag),
and a list key whose candidates cannot (a ``}`` outside a hash tag) is refused there (exit 2).
Before that naming the candidates were ``migrator:<m>:latest:<shard>:<list key>``, on a single
server only: a shard's process renames its own when it starts (``rename_old``), and rewrites
those of lists whose ranks an older migrator gave otherwise (``rerank``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from migrator.errors import MigratorError, docs
from migrator.mapping.model import Latest
from migrator.mapping.resolve import Resolved
from migrator.mapping.schema import Column
from migrator.plan.batch import Command
from migrator.plan.owners import owner_field, owners_key
from migrator.plan.planner import TablePlan
from migrator.retry import Retrying
from migrator.source.mysql import Source
from migrator.source.selects import RawRow
from migrator.source.shards import by_the_server, ordered_latest
from migrator.source.where import clause
from migrator.store.cluster_sink import sink_for
from migrator.store.sink import retry

#: KEYS[1] the list, KEYS[2..] every shard's candidates; ARGV[1] the list's length
MERGE = (
    b"local n = tonumber(ARGV[1]) local all = {} "
    b"for i = 2, #KEYS do "
    b"for _, m in ipairs(redis.call('ZREVRANGEBYLEX', KEYS[i], '+', '-', 'LIMIT', 0, n)) do "
    b"all[#all + 1] = m end end "
    b"table.sort(all, function(a, b) return a > b end) "
    b"redis.call('DEL', KEYS[1]) local out = {} "
    b"for i = 1, math.min(n, #all) do local m = all[i] "
    b"out[#out + 1] = string.sub(m, string.find(m, '\\0', 1, true) + 1) end "
    b"if #out > 0 then redis.call('RPUSH', KEYS[1], unpack(out)) end return #out"
)


def hashed(key: bytes) -> bytes:
    """What a Redis Cluster hashes of ``key`` to its slot: its hash tag (between the first
    ``{`` and the first ``}`` after it, when that is not empty), else the whole key."""
    start = key.find(b"{")
    end = key.find(b"}", start + 1) if start >= 0 else -1
    return key[start + 1 : end] if end > start + 1 else key


def candidates_key(mapping_name: str, shard: str, list_key: bytes) -> bytes:
    """The shard's candidates of the list: in the list's slot, its hash tag kept or the
    whole list key made the tag (``hashed`` of both agrees unless the list key holds a
    ``}`` outside a tag, which ``refuse`` refuses on a Cluster)."""
    prefix = f"migrator:{mapping_name}:latest:{shard}:".encode()
    if hashed(list_key) != list_key:  # a hash tag of its own
        return prefix + list_key
    return prefix + b"{" + list_key + b"}"


def old_candidates_key(mapping_name: str, shard: str, list_key: bytes) -> bytes:
    """The candidates' name before ``candidates_key`` (single servers only: a Cluster was
    refused then)."""
    return f"migrator:{mapping_name}:latest:{shard}:".encode() + list_key


def refuse(resolved: Sequence[Resolved], shards: Sequence[str], cluster: bool) -> None:
    """Exit 2 for a latest list a shard's sync cannot merge on a Redis Cluster: a candidates
    key that would not hash to the list's slot (a ``}`` in the list key outside a tag)."""
    if not shards or not cluster:
        return
    for r in resolved:
        for latest in r.table.latest:
            key = latest.key.render({}).encode()
            if all(hashed(candidates_key(r.mapping_name, s, key)) == hashed(key)
                   for s in shards):  # fmt: skip
                continue
            raise MigratorError(
                f"table '{r.name}': its latest list {key.decode(errors='replace')} cannot be "
                "kept exact over shards on a Redis Cluster: a '}' outside a hash tag (in the key "
                "or the mapping's name) keeps the shards' candidates out of its slot, where the "
                "script that merges them reads",
                'give the list key a hash tag of its own (key: "{{item}}:latest": the '
                "candidates share it) or no '}' "
                f"({docs('sharding.md#latest-lists-over-shards')})",
            )


def rename_old(client: Any, resolved: Sequence[Resolved], shard: str) -> None:
    """The shard's candidates under their old name (an older migrator's, single server
    only), renamed to ``candidates_key``, so that a quiet shard's rows stay in the merge;
    run with the shard's lease held (no other writer of them)."""
    for r in resolved:
        for latest in r.table.latest:
            key = latest.key.render({}).encode()
            old = old_candidates_key(r.mapping_name, shard, key)
            new = candidates_key(r.mapping_name, shard, key)
            if old != new and client.exists(old):
                client.rename(old, new)


def commands(
    client: Any, src: Source, plan: TablePlan, latest: Latest, shard: str,
    shards: Sequence[str], where: Any,
) -> list[Command]:  # fmt: skip
    """The shard's candidates of ``latest`` read from its server, and the list merged from
    every shard's: DEL + ZADD + EVAL, for the group's MULTI/EXEC (or a load's end)."""
    r = plan.resolved
    order = r.schema.column(latest.order_by)
    members: list[bytes] = []
    for key, rank in _own_latest(client, src, plan, order, latest.limit, shard, where):
        text = plan.pk_text(key)
        if text is None or None in key:
            continue
        members.append(rank.hex().encode() + b"\0" + text)
    list_key = latest.key.render({}).encode()
    mine = candidates_key(r.mapping_name, shard, list_key)
    out: list[Command] = [(b"DEL", mine)]
    if members:
        out.append((b"ZADD", mine, *(x for m in members for x in (b"0", m))))
    every = [candidates_key(r.mapping_name, s, list_key) for s in shards]
    out.append((b"EVAL", MERGE, b"%d" % (1 + len(every)), list_key, *every,
                b"%d" % latest.limit))  # fmt: skip
    return out


def rerank(
    client: Any, src: Source, plans: Mapping[str, TablePlan], shard: str,
    shards: Sequence[str], retrying: Retrying | None = None,
) -> None:  # fmt: skip
    """When the shard's process starts: its candidates of each list ordered (or its ties
    broken) by text under a collation or an ENUM read again from its server and every shard's
    merged, so that ranks an older migrator gave such values (their text's bytes) leave the
    merge even while the shard's rows do not change."""
    out: list[Command] = []
    for plan in plans.values():
        r = plan.resolved
        for latest in r.table.latest:
            if any(by_the_server(r.schema.column(c)) for c in (latest.order_by, *r.primary_key)):
                out += commands(client, src, plan, latest, shard, shards, clause(r))
    sink_for(client, retrying).write(out)


def _own_latest(
    client: Any, src: Source, plan: TablePlan, order: Column, limit: int, shard: str, where: Any
) -> list[tuple[RawRow, bytes]]:
    """The shard's newest ``limit`` rows (``ordered_latest``) that Redis holds as this shard's:
    a row the owner hash gives to another shard, or to none (a collision left it out), is
    left out, and as many more rows are read as were left out (twice as many each time)."""
    r = plan.resolved
    key, mine = owners_key(r.mapping_name, r.table.name), shard.encode()
    pk = [r.schema.column(c) for c in r.primary_key]
    asked = limit
    while True:
        got = ordered_latest(src, r.name, pk, order, asked, where)
        fields = [owner_field(tuple(values)) for values, _ in got]
        owners = retry(lambda: client.hmget(key, fields)) if got else []  # noqa: B023
        kept = [row for row, owner in zip(got, owners, strict=True) if owner == mine]
        if len(kept) >= limit or len(got) < asked:
            return kept[:limit]
        asked *= 2


def finish(
    client: Any, src: Source, plan: TablePlan, ends: Sequence[Command], shard: str,
    shards: Sequence[str], where: Any,
) -> list[Command]:  # fmt: skip
    """A table's end-of-load commands (plan/finish.py) with its latest lists merged over the
    shards instead of rebuilt from this shard's rows alone."""
    lists = {latest.key.render({}).encode() for latest in plan.table.latest}
    if not lists:
        return list(ends)
    kept = [c for c in ends if c[0] not in (b"MULTI", b"EXEC")
            and not (c[0] in (b"DEL", b"RPUSH") and c[1] in lists)]  # fmt: skip
    for latest in plan.table.latest:
        kept += commands(client, src, plan, latest, shard, shards, where)
    return kept
