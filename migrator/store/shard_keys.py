"""``migrate --replace --shard NAME``: one shard's rows removed from Redis, found through the
owner hash (plan/owners.py), before that shard is loaded again (docs/sharding.md#migrate).

Per table, the owner hash is read with HSCAN; each field whose shard is NAME names a row of
that shard. The row is read back from its row hash (a page of rows at a time), planned as
``migrate`` plans it, and each write undone: the row's own keys (row hash, unique strings)
are removed with UNLINK, its members of shared structures with SREM, HDEL and ZREM (index,
unique, sorted and tag sets keep every other row's members), its owner field with HDEL.
Another shard's row is never touched. A table whose rows cannot be read back whole from
their row hash (plan/row_images.py ``unreadable``: formats, a key other than the primary
key, ...) or whose writes have no such inverse (vector sets, ``expire:``, change streams)
is refused (exit 2) before anything is removed. The top table of nested documents is read
back from the rows kept beside them, and its documents' trees removed with it
(store/shard_documents.py); a nested table's owner fields of NAME are removed alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any, cast

from migrator.errors import MigratorError
from migrator.plan.batch import Command, Row
from migrator.plan.owners import owners_of, pk_of
from migrator.plan.planner import TablePlan
from migrator.plan.row_images import unreadable
from migrator.retry import Retrying
from migrator.store.shard_documents import below, images, nesting_tops
from migrator.store.sink import Client, retry

#: fields asked for per HSCAN call
PAGE = 500


def refuse_irreversible(plans: Sequence[TablePlan]) -> None:
    """Exit 2 when a table's rows cannot be removed row by row (see the module docstring)."""
    tops = nesting_tops({p.table.name: p for p in plans})
    for plan in plans:
        if owners_of(plan) is None or plan.table.nest is not None:
            continue  # (a nested table's rows go with their top's documents)
        t = plan.table
        why = "" if t.name in tops else unreadable(plan)
        if not why and t.kind not in ("hash", "none") and t.name not in tops:
            why = f"the table is 'as: {t.kind}'"
        if not why and (t.vector_sets or t.expire is not None or t.streams is not None):
            why = "it has vector sets, expire: or a change stream"
        if why:
            raise MigratorError(
                f"--replace --shard: {t.name}'s rows cannot be removed one by one: {why}",
                "reload every shard: drop --shard",
            )


def read_back(plan: TablePlan, pks: list[tuple[bytes | None, ...]], hashes: list[Any]) -> list[Row]:
    """The rows as ``migrate`` read them: the primary key from the owner field, every other
    value from the row hash (a field it lacks: NULL)."""
    r = plan.resolved
    out: list[Row] = []
    for pk, held in zip(pks, hashes):
        values = dict(zip(r.primary_key, pk))
        row = [values[c] if c in values else (held or {}).get(plan.field(c)) for c in plan.select]
        out.append(tuple(row))
    return out


def undo(commands: Sequence[Command], row_keys: set[bytes], skip: bytes) -> list[Command]:
    """The commands that take back what ``commands`` (one shard's rows, planned) wrote."""
    out: list[Command] = []
    for c in commands:
        name, key = c[0], c[1]
        if key == skip:
            continue  # (the owner fields: removed by the caller)
        if key in row_keys or name == b"SET":
            out.append((b"UNLINK", key))
        elif name == b"HSET":
            out.append((b"HDEL", key, *c[2::2]))
        elif name == b"SADD":
            out.append((b"SREM", key, *c[2:]))
        elif name == b"ZADD":
            out.append((b"ZREM", key, *c[3::2]))
        else:
            raise MigratorError(f"--replace --shard: {key!r} was written by {name!r}, which it "
                                "cannot undo", "reload every shard: drop --shard")  # fmt: skip
    return out


def remove_shard_rows(
    client: Client, plans: Sequence[TablePlan], shard: str, retrying: Retrying
) -> int:
    """Remove ``shard``'s rows (see the module docstring); returns how many."""
    removed = 0
    mine = shard.encode()
    tops = nesting_tops({p.table.name: p for p in plans})
    for plan in plans:
        owners = owners_of(plan)
        if owners is None:
            continue
        key, cursor = owners.key, 0
        while True:
            cursor, page = retry(partial(client.hscan, key, cursor, count=PAGE),
                                 retrying=retrying)  # fmt: skip
            held = cast(dict[bytes, bytes], page)
            fields = [f for f, owner in held.items() if owner == mine]
            if fields and plan.table.nest is not None:  # its rows: with the top's documents
                retry(partial(_send, client, [(b"HDEL", key, *fields)]), retrying=retrying)
            elif fields:
                pks = [pk_of(f) for f in fields]
                keys = [plan.row_key(read_back(plan, [pk], [{}])[0]) for pk in pks]
                top = tops.get(plan.table.name)
                if top is not None:  # its rows kept beside the documents
                    rows = images(client, top, fields, retrying)
                else:
                    hashes = (
                        retry(partial(_hashes, client, keys), retrying=retrying)
                        if plan.table.kind == "hash"
                        else [{} for _ in keys]
                    )
                    rows = read_back(plan, pks, hashes)
                commands, _ = plan.plan(rows)
                writes = undo(commands, {k for k in keys if k is not None}, key)
                if top is not None:
                    writes += below(client, top, fields, retrying)
                writes.append((b"HDEL", key, *fields))
                retry(partial(_send, client, writes), retrying=retrying)
                removed += len(fields)
            if int(cursor) == 0:
                break
    return removed


def _hashes(client: Client, keys: list[bytes | None]) -> list[Any]:
    pipe = client.pipeline(transaction=False)
    for k in keys:
        pipe.hgetall(k or b"")
    return list(pipe.execute())


def _send(client: Client, commands: list[Command]) -> None:
    """One pipeline (each command on its own key: a cluster routes each)."""
    pipe = client.pipeline(transaction=False)
    for c in commands:
        pipe.execute_command(c[0].decode(), *c[1:])  # (a cluster routes by its name)
    pipe.execute()
