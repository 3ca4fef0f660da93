"""One shard's nested documents removed from Redis (docs/sharding.md#nested-documents), for
``migrate --replace --shard NAME`` (store/shard_keys.py) and ``sync --shard NAME``'s first
load or ``--reload`` (sync/shard_rows.py ``remove_own``).

The top table's owner hash (plan/owners.py) covers each document: a field naming NAME is a
top row of NAME's. Its row is read back from the rows kept beside the documents
(plan/nesting_side.py: ``migrator:<m>:nest:<top>``, the same encoded primary key -> the row's
image), so that its own keys and members (its document, index and unique entries...) are
planned and undone as any row's; then its image, and its children's and theirs (found
through each parent's SET, ``...:in:<parent key>``), are removed with those SETs. Another
shard's documents and rows are not touched. Memory: a page of top rows and their trees."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from migrator.errors import MigratorError
from migrator.plan.batch import Command, Row
from migrator.plan.expiry import decode_row
from migrator.plan.layout import TableLayout
from migrator.plan.nesting import Level, trees
from migrator.plan.nesting_side import members_key, rows_key
from migrator.plan.owners import pk_of
from migrator.retry import Retrying
from migrator.store.sink import retry


def nesting_tops(plans: Mapping[str, TableLayout]) -> dict[str, Level]:
    """The nesting trees of these tables, by top table ({} when a tree is not whole: a
    ``--tables`` that leaves out a parent)."""
    try:
        return trees(plans)
    except MigratorError:
        return {}


def images(client: Any, top: Level, fields: list[bytes], retrying: Retrying | None) -> list[Row]:
    """The top rows of the owner ``fields``, read back from their images (a row without one:
    its primary key alone, every other value NULL)."""
    got = retry(partial(client.hmget, rows_key(top), fields), retrying=retrying)
    lay = top.layout
    out: list[Row] = []
    for field, image in zip(fields, got):
        if image:
            out.append(decode_row(image))
        else:
            values = dict(zip(lay.resolved.primary_key, pk_of(field)))
            out.append(tuple(values.get(c) for c in lay.select))
    return out


def below(
    client: Any, top: Level, fields: Sequence[bytes], retrying: Retrying | None
) -> list[Command]:
    """The commands that remove the rows kept beside these top rows' documents: their
    images, their descendants' and the SETs that file them (one key per command)."""
    out: list[Command] = [(b"HDEL", rows_key(top), *fields)]
    todo: list[tuple[Level, list[bytes]]] = [(top, list(fields))]
    while todo:
        level, keys = todo.pop()
        for child in level.children:
            sets = [members_key(child, k) for k in keys]
            held = retry(partial(_members, client, sets), retrying=retrying)
            kids = sorted(set().union(*held))
            out += [(b"UNLINK", s) for s, m in zip(sets, held) if m]
            if kids:
                out.append((b"HDEL", rows_key(child), *kids))
                todo.append((child, kids))
    return out


def _members(client: Any, keys: list[bytes]) -> list[set[bytes]]:
    pipe = client.pipeline(transaction=False)
    for k in keys:
        pipe.smembers(k)
    return [set(m) for m in pipe.execute()]
