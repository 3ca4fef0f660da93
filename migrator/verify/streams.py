"""verify's check of the change streams (``streams:``; docs/sync.md#change-streams).

A stream holds history, which MySQL cannot give back (and trimming cuts), so verify checks what
it can: the newest ``CHECKED`` entries of each stream are well formed — the envelope's fields,
an operation with the images it has (``before.*`` for an update or delete, ``after.*`` for an
insert, update or snapshot entry, none for a load's truncate; with ``form: json`` the fields
``before`` and ``after``, each a JSON object of strings and nulls), a table that writes to this
stream, a position ``file:offset`` and a commit time — and the newest entry's position is no
later than the one ``sync`` stored with the data (an entry past it would be a change Redis does
not hold), compared when both are in the same log (file names of one base). A missing stream is
no difference: nothing may have changed yet.

Over a sharded source (``sources:``) each entry names its shard (``shard``: one of the mapping's
shards, else malformed), its position is in that shard's log, and the newest entry of each
shard among those looked at is compared with that shard's stored position
(``migrator:<m>:sync:<shard>``, store/sync_state.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from migrator.mapping.resolve import Resolved
from migrator.store.sync_state import state_key
from migrator.verify.report import TableCheck

MALFORMED = "stream entry malformed"
AHEAD = "stream entry past the stored position"
#: the newest entries looked at per stream
CHECKED = 1000
_POSITION = re.compile(rb"(.*)\.(\d+):(\d+)")
_ENVELOPE = {b"op", b"table", b"pk", b"shard", b"pos", b"gtid", b"ts"}
_IMAGES = (b"before", b"after")
#: the images each operation's entry has
_WANT: dict[str, set[bytes]] = {
    "insert": {b"after"},
    "update": {b"before", b"after"},
    "delete": {b"before"},
    "snapshot": {b"after"},
    "truncate": set(),
}


def check(client: Any, mapping_name: str, resolved: list[Resolved], checks: dict[str, TableCheck],
          everything: list[Resolved], shards: Sequence[str] = ()) -> None:  # fmt: skip
    """Add the streams' problems to the checks of the tables verified that write to them
    (``shards``: the names of a sharded source's shards, in ``sources:``)."""
    writers: dict[str, set[bytes]] = {}  # stream key -> the tables that write to it
    for r in everything:
        if r.table.streams is not None:
            writers.setdefault(r.table.streams.key, set()).add(r.name.encode())
    names = {s.encode() for s in shards} or None
    stored = {s: _stored(client, mapping_name, s.decode()) for s in names or {b""}}
    for r in resolved:
        s = r.table.streams
        if s is None or r.name not in checks or writers.get(s.key) is None:
            continue
        tables = writers.pop(s.key)  # each stream once, with the first table verified
        entries = client.xrevrange(s.key, count=CHECKED)
        newest: dict[bytes, tuple[bytes, bytes]] = {}  # shard -> its newest entry's ID, pos
        for entry_id, fields in entries:
            problem = malformed(fields, tables, names)
            if problem is not None:
                owner = fields.get(b"table", b"").decode("utf-8", "replace")
                out = checks.get(owner, checks[r.name])
                out.add(MALFORMED, s.key, entry_id.decode(), redis=problem)
            shard = fields.get(b"shard", b"") if names else b""
            if shard in stored and shard not in newest:
                newest[shard] = (entry_id, fields.get(b"pos", b""))
        for shard, (entry_id, pos) in newest.items():
            where = stored[shard]
            at, last = _position(where), _position(pos)
            if last is not None and at is not None and last[0] == at[0] and last > at:
                checks[r.name].add(AHEAD, s.key, entry_id.decode(), mysql=where.decode(),
                                   redis=pos.decode())  # fmt: skip


def _stored(client: Any, mapping_name: str, shard: str) -> bytes:
    """The position ``sync`` stored (``file:pos``) for the source or one shard."""
    stored = client.hgetall(state_key(mapping_name, shard))
    return stored.get(b"file", b"") + b":" + stored.get(b"pos", b"")


def malformed(
    fields: dict[bytes, bytes], tables: set[bytes], shards: set[bytes] | None = None
) -> str | None:
    """What is wrong with an entry's fields (None: nothing); ``shards``: a sharded source's
    shard names, one of which the entry must name."""
    op = fields.get(b"op", b"").decode("utf-8", "replace")
    if op not in _WANT:
        return f"op {op!r} is not one of {', '.join(_WANT)}"
    if fields.get(b"table") not in tables:
        return f"table {fields.get(b'table')!r} does not write to this stream"
    if shards is not None and fields.get(b"shard") not in shards:
        return f"shard {fields.get(b'shard')!r} is not one of the mapping's shards"
    if not fields.get(b"pk") and op != "truncate":
        return "no pk"
    if _position(fields.get(b"pos", b"")) is None:
        return f"pos {fields.get(b'pos')!r} is not file:offset"
    if not fields.get(b"ts", b"").isdigit():
        return f"ts {fields.get(b'ts')!r} is not Unix seconds"
    keys = [k for k in fields if k not in _ENVELOPE]
    images = {k.split(b".", 1)[0] for k in keys}
    if images != _WANT[op]:
        shown = ", ".join(sorted(i.decode("utf-8", "replace") for i in images)) or "none"
        return f"{op} with images: {shown}"
    whole = [k for k in keys if k in _IMAGES]  # form: json
    if whole and len(whole) != len(keys):
        return "an image both as fields and as JSON"
    for k in whole:
        problem = _json_image(fields[k])
        if problem is not None:
            return f"{k.decode()}: {problem}"
    return None


def _json_image(text: bytes) -> str | None:
    """What is wrong with an image of ``form: json`` (None: a JSON object of strings and
    nulls)."""
    try:
        image = json.loads(text)
    except ValueError:
        return "not JSON"
    if not isinstance(image, dict) or not image:
        return "not a JSON object of the row's fields"
    if not all(v is None or isinstance(v, str) for v in image.values()):
        return "a value that is neither a string nor null"
    return None


def _position(text: bytes) -> tuple[bytes, int, int] | None:
    m = _POSITION.fullmatch(text)
    return None if m is None else (m.group(1), int(m.group(2)), int(m.group(3)))
