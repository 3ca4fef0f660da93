"""verify's fast path for a clean batch: Redis compares, Python only packs.

For a table whose structures are a row hash, unique hashes and index sets (the common
shape), generated code (as ``packer`` does for migrate) packs a batch's reads straight to
RESP, and the replies are compared as whole lists, with no work per row in Python:

* per row key, ``HLEN`` and ``HMGET`` of the mapped fields: the field count equals the row's
  non-NULL columns and the values equal the source's, NULL where the column is NULL (so no
  field is missing, different or extra);
* per unique hash, one ``HMGET`` of the batch's values gives the rows' keys;
* per index set, one ``SMISMEMBER`` of the batch's primary keys gives all ones;
* references: one ``EXISTS`` of the batch's distinct parent row keys counts all of them.

(These were Lua scripts that answered 0 or the first key that differed; plain commands
cost Redis a third to a half of that CPU, and comparing their replies as lists costs the
client little: docs/performance.md.) A batch with any difference is then checked again by
the general path (``RowChecks.rows``), which reads everything back and names every
difference, so reports are the same either way. Rows with no key or no field at all are
read back with HGETALL as before. Only on one Redis server, where a batch's reads go down
one connection (``Reader.packed``; a cluster routes them per slot).
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from migrator.plan.batch import Batch, Row, template_parts
from migrator.plan.packer import _Code, _joined_parts, _none_check
from migrator.plan.resp import resp

if TYPE_CHECKING:
    from migrator.verify.keys import Pending
    from migrator.verify.rows import RowChecks

#: arguments per command at most (older servers refuse longer commands)
MAX_ARGS = 100_000
#: batches in a row with a difference after which a table takes the general path
MISSES = 3
BULK = b"$%d\r\n%b\r\n"


def usable(checks: RowChecks) -> bool:
    """Whether this table's batches can take the fast path."""
    names = set(checks.structures)
    if checks.plan.esc is not None:  # escape: backslash -- the general path's key functions
        return False
    if checks.shared:  # unique values several rows hold: the general path accepts any of them
        return False
    if checks.plan.transforms:  # formats, lower(): the general path's structures
        return False
    if checks.expiry is not None:  # expire: rows judged by their moment, TTLs read
        return False
    if checks.images is not None or checks.owners is not None:  # row images, owner hash
        return False
    return bool(getattr(checks.reader, "packed", False)) and names <= {"hash", "unique", "index"}


def _coalesced(
    hsets: dict[bytes, list[bytes]], sadds: dict[bytes, list[bytes]], out: list[bytes]
) -> list[list[Any]]:
    """``HMGET`` of each unique hash's fields and ``SMISMEMBER`` of each index set's members
    (bulk strings, ``hsets`` alternating field and raw row key), appended to ``out``; returns
    the reply each must give: the row keys, and all ones."""
    want: list[list[Any]] = []
    for key, args in hsets.items():
        fields, keys = args[0::2], args[1::2]
        for at in range(0, len(fields), MAX_ARGS):
            part = fields[at : at + MAX_ARGS]
            out.append(b"*%d\r\n$5\r\nHMGET\r\n" % (2 + len(part)) + BULK % (len(key), key))
            out.extend(part)
            want.append(keys[at : at + MAX_ARGS])
    for key, members in sadds.items():
        for at in range(0, len(members), MAX_ARGS):
            part = members[at : at + MAX_ARGS]
            out.append(b"*%d\r\n$10\r\nSMISMEMBER\r\n" % (2 + len(part)) + BULK % (len(key), key))
            out.extend(part)
            want.append([1] * len(part))
    return want


class FastBatch:
    """One batch in flight: what was sent, and what the replies must be."""

    def __init__(self, rows: Sequence[Row], pending: Pending) -> None:
        self.rows, self.pending = rows, pending
        self.coalesced: list[list[Any]] = []  # the replies of HMGET / SMISMEMBER on them
        self.expect: list[list[bytes | None]] = []  # HMGET of each row's fields
        self.fields = 0  # their non-NULL values: the sum of the rows' HLEN
        self.slow: list[tuple[bytes, ...]] = []
        self.rejected: Batch | None = None
        self.hsets: dict[bytes, list[bytes]] = {}
        self.sadds: dict[bytes, list[bytes]] = {}
        self.exists: list[int] = []  # parent row keys asked for, per EXISTS


class FastChecks:
    """Packs a batch's reads (``send``) and, when every reply is as expected, counts what the
    general path would have counted (``settle``); else has the general path check it."""

    def __init__(self, checks: RowChecks) -> None:
        self.checks = checks
        plan = checks.plan
        hashing = "hash" in checks.structures
        self.fields = (
            [(plan.field(c), plan.pos[c]) for c in plan.resolved.columns] if hashing else []
        )
        self.hashing = hashing
        self.pack = _generate(self)
        self.misses = 0  # batches in a row that differed

    def wanted(self) -> bool:
        """Whether the next batch should take the fast path: not once scripts are refused,
        nor after MISSES batches in a row differed (each is read twice; the table is likely
        to differ all along, as when the source itself has dangling references)."""
        return bool(self.checks.reader.scripting) and self.misses < MISSES

    def send(self, rows: Sequence[Row]) -> FastBatch:
        out: list[bytes] = []
        expect: list[list[bytes | None]] = []
        slow_rows: list[Row] = []
        hsets: dict[bytes, list[bytes]] = {}
        sadds: dict[bytes, list[bytes]] = {}
        nulls = self.pack(rows, out, expect, slow_rows, hsets, sadds)
        coalesced = _coalesced(hsets, sadds, out)
        exists = []  # references: one EXISTS of many parent keys answers how many there are
        parents = list(self.checks._parents(rows)) if self.checks.references else []
        for at in range(0, len(parents), MAX_ARGS):
            part = parents[at : at + MAX_ARGS]
            out.append(resp([(b"EXISTS", *part)]))
            exists.append(len(part))
        slow = Batch()
        if slow_rows:
            add = self.checks.structures["hash"].add
            for row in slow_rows:
                add(row, slow)
            out.append(resp((b"HGETALL", c[1]) for c in slow.commands))
        n = 2 * len(expect) + len(coalesced) + len(exists) + len(slow.commands)
        job = FastBatch(rows, self.checks.reader.send_packed(b"".join(out), n))
        job.coalesced, job.expect = coalesced, expect
        job.fields = len(self.fields) * len(expect) - nulls
        job.slow, job.rejected, job.hsets, job.sadds = slow.commands, slow, hsets, sadds
        job.exists = exists
        return job

    def settle(self, job: FastBatch) -> bool:
        """Count a clean batch as the general path does; False when something differs (the
        caller then checks the batch with the general path, which names the differences)."""
        self.misses += 1  # until all is found to match
        replies = job.pending.wait()
        n = 2 * len(job.expect)
        at = n + len(job.coalesced) + len(job.exists)
        if (
            replies[1:n:2] != job.expect
            or replies[n : n + len(job.coalesced)] != job.coalesced
            or replies[at - len(job.exists) : at] != job.exists
        ):
            return False
        # every expected field is there (HMGET), so no row has fewer fields than expected:
        # the sum of HLEN is the sum of non-NULL columns exactly when no row has an extra one
        try:
            if sum(replies[0:n:2]) != job.fields:
                return False
        except TypeError:  # an error in place of a count (the key changed meanwhile)
            return False
        self.misses = 0
        c = self.checks
        c.check.mysql_rows += len(job.rows)
        c.present += len(job.expect)
        c.rows_present += len(job.expect)
        if job.rejected is not None:
            c.note_rejects(job.rejected.stats)
        if job.slow:
            c._hashes(replies[at:], job.slow)
        counts = c.expected["unique"]
        for key, args in job.hsets.items():  # field, row key, field, ...
            counts[key] = counts.get(key, 0) + c.unique_count(key, args[0::2])
        counts = c.expected["index"]
        for key, members in job.sadds.items():
            counts[key] = counts.get(key, 0) + len(members)
        return True


def _generate(fast: FastChecks) -> Callable[..., int]:
    """Generated code for a batch: row keys and values as RESP bulk strings, rows with a NULL
    in a hashed column set aside, unique values and index members coalesced per key (the
    values as the general path's structures compute them: tests/test_verify_fast.py)."""
    plan, code = fast.checks.plan, _Code()
    width = len(plan.row_names)
    lines = [
        "def pack(rows, out, expect, slow, hsets, sadds):",
        "    append, eappend = out.append, expect.append",
        "    sappend = slow.append",
        "    for row in rows:",
        f"        {', '.join(f'_{i}' for i in range(width))}, = row",
    ]
    code.namespace["BULK"] = BULK
    if fast.hashing:
        key_expr, key_used = code.expr(template_parts(plan.resolved.key, plan.pos))
        used = [i for _, i in fast.fields]
        head = b"*2\r\n$4\r\nHLEN\r\n$%d\r\n%b\r\n*" + b"%d" % (2 + len(used))
        head += b"\r\n$5\r\nHMGET\r\n$%d\r\n%b\r\n"
        head += b"".join((BULK % (len(f), f)).replace(b"%", b"%%") for f, _ in fast.fields)
        values = "".join(f"_{i}, " for i in used)
        no_field = " and ".join(f"_{i} is None" for i in used) or "True"
        lines.insert(3, "    nulls = 0")
        lines += [
            f"        if {'True' if used else 'False'} and not ({_none_check(used + key_used)}):",
            f"            key = {key_expr}",
            f"            append({code.const(head)} % (len(key), key, len(key), key))",
            f"            eappend([{values}])",
            f"        elif {_none_check(key_used)} or {no_field}:",
            "            sappend(row)",
            "        else:",
            f"            key = {key_expr}",
            f"            append({code.const(head)} % (len(key), key, len(key), key))",
            f"            exp = [{values}]",
            "            eappend(exp)",
            "            nulls += exp.count(None)",
        ]
    uniques = [u for u in plan.table.unique if u.key is None]
    templates = [t for s in plan.structures if s.name == "index" for t in s.templates]  # type: ignore[attr-defined]
    if uniques or templates:
        pk_expr, _ = code.expr(_joined_parts(range(len(plan.resolved.primary_key)), plan.sep))
        lines += [f"        pkr = {pk_expr}", "        pk = BULK % (len(pkr), pkr)"]
    for n, u in enumerate(uniques):  # one hash per unique: its list made before the loop
        value, used = code.expr(_joined_parts([plan.pos[c] for c in u.columns], plan.sep))
        lines.insert(3, f"    u{n} = []")
        lines += [
            f"        if not ({_none_check(used)}):",
            f"            v = {value}",
            f"            u{n} += (BULK % (len(v), v), pkr)",
        ]
    for template in templates:
        ikey, used = code.expr(template_parts(template, plan.pos))
        lines += [
            f"        if not ({_none_check(used)}):",
            f"            ikey = {ikey}",
            "            members = sadds.get(ikey)",
            "            if members is None:",
            "                sadds[ikey] = [pk]",
            "            else:",
            "                members.append(pk)",
        ]
    for n, u in enumerate(uniques):
        lines += [
            f"    if u{n}:",
            f"        hsets[{code.const(plan.unique_hash_key(u.columns))}] = u{n}",
        ]
    lines.append("    return nulls" if fast.hashing else "    return 0")
    source = "\n".join(lines) + "\n"
    exec(compile(source, f"<verify_pack {plan.table.name}>", "exec"), code.namespace)
    fn: Callable[..., int] = code.namespace["pack"]
    return fn


__all__ = ["FastBatch", "FastChecks", "usable"]


@contextmanager
def no_cycle_collection() -> Iterator[None]:
    """The batch loop makes millions of short-lived lists and bytes, none in a cycle: the
    cyclic garbage collector would walk them again and again (~20% of verify's time)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
