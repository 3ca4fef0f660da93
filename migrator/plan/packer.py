"""The hot path of migrate: a batch of rows -> Redis protocol bytes, directly.

``TablePlan.pack(rows)`` returns exactly the bytes of ``resp(plan.plan(rows)[0])``
(a unit test proves it) without building a tuple per command: row hashes are packed as they
are read, unique and index writes are coalesced per key as in ``Batch``. Tables with
``as: columns`` or STRING-style uniques take the general path (plan, then encode).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from migrator.plan.batch import (
    NULL_INDEX,
    NULL_KEY,
    NULL_UNIQUE,
    Batch,
    Command,
    Row,
    Stats,
    template_parts,
)
from migrator.plan.layout import TableLayout
from migrator.plan.resp import resp
from migrator.plan.structures import Structure


def _row_function(
    plan: TableLayout, fields: list[tuple[bytes, int]]
) -> Callable[[Row], bytes | None]:
    """Generated code for the common case of one row hash: no NULL in any mapped column.

    Returns the HSET's bytes, or None (a NULL somewhere: the caller takes the general path).
    Only positions and constants go into the code; names and values stay in its namespace.
    A table with no mapped columns always takes the general path (its hash holds the key).
    """
    if not fields:
        return lambda row: None
    width = len(plan.row_names)
    names = [f"_{i}" for i in range(width)]
    used = sorted({i for _, i in fields} | set(plan.row_key_positions))
    fmt = b"*%d\r\n$4\r\nHSET\r\n$%%d\r\n%%b\r\n" % (2 + 2 * len(fields))
    fmt += b"".join(h.replace(b"%", b"%%") + b"$%d\r\n%b\r\n" for h, _ in fields)
    args = ", ".join(f"len(_{i}), _{i}" for _, i in fields)
    checks = " or ".join(f"_{i} is None" for i in used) or "False"
    code = (
        "def pack_row(row):\n"
        f"    {', '.join(names)}, = row\n"
        f"    if {checks}:\n"
        "        return None\n"
        "    key = ROW_KEY(row)\n"
        f"    return FMT % (len(key), key{', ' if args else ''}{args})\n"
    )
    namespace: dict[str, Any] = {"FMT": fmt, "ROW_KEY": plan.row_key}
    exec(compile(code, f"<pack_row {plan.table.name}>", "exec"), namespace)
    fn: Callable[[Row], bytes | None] = namespace["pack_row"]
    return fn


class _Code:
    """Source text of a generated function, with its constants kept in a namespace."""

    def __init__(self) -> None:
        self.namespace: dict[str, Any] = {}
        self.escaped: set[int] = set()  # positions whose escaped value ``e<i>`` is used

    def const(self, value: object) -> str:
        name = f"C{len(self.namespace)}"
        self.namespace[name] = value
        return name

    def expr(
        self, parts: Sequence[bytes | int], escaped: frozenset[int] = frozenset()
    ) -> tuple[str, list[int]]:
        """(expression concatenating constants and row values ``_i``, positions it uses);
        the values at ``escaped`` positions are used escaped (``e<i>``)."""
        terms = []
        for p in parts:
            if isinstance(p, bytes):
                terms.append(self.const(p))
            elif p in escaped:
                self.escaped.add(p)
                terms.append(f"e{p}")
            else:
                terms.append(f"_{p}")
        used = [p for p in parts if isinstance(p, int)]
        if len(terms) == 1 and used:
            return terms[0], used
        return " + ".join(terms) or "b''", used


def _none_check(used: Sequence[int]) -> str:
    return " or ".join(f"_{i} is None" for i in sorted(set(used))) or "False"


def _joined_parts(positions: Sequence[int], sep: bytes) -> list[bytes | int]:
    out: list[bytes | int] = []
    for n, i in enumerate(positions):
        out += [sep, i] if n else [i]
    return out


def _batch_function(packer: Packer) -> Callable[..., tuple[int, int, int, int, int]]:
    """Generated code for a whole batch of a table whose structures are only a row hash,
    unique hashes and index sets: every key and value expression inlined, no call per row
    but the rare row with a NULL in a hashed column (``SLOW``). Same bytes as ``pack``'s loop
    (tests/test_workers.py compares both with ``resp(plan(rows))``)."""
    plan, code = packer.plan, _Code()
    width = len(plan.row_names)
    keys = plan.escapable  # every value in a key is escaped under escape: backslash
    lines: list[str] = []
    if packer.hashing:
        key_expr, key_used = code.expr(template_parts(plan.resolved.key, plan.pos), keys)
        fmt = b"*%d\r\n$4\r\nHSET\r\n$%%d\r\n%%b\r\n" % (2 + 2 * len(packer.fields))
        fmt += b"".join(h.replace(b"%", b"%%") + b"$%d\r\n%b\r\n" for h, _ in packer.fields)
        args = "".join(f", len(_{i}), _{i}" for _, i in packer.fields)
        check = _none_check([i for _, i in packer.fields] + key_used)
        fast = "True" if packer.fields else "False"
        lines += [
            f"        if {fast} and not ({check}):",
            f"            key = {key_expr}",
            f"            append({code.const(fmt)} % (len(key), key{args}))",
            "            hashed += 1",
            "        elif SLOW(row, out):",
            "            hashed += 1",
            "        else:",
            "            rejected += 1",
        ]
        code.namespace["SLOW"] = packer.slow_hash
    pk = range(len(plan.resolved.primary_key))
    pk_expr, _ = code.expr(_joined_parts(pk, plan.sep), keys if len(pk) > 1 else frozenset())
    if packer.uniques or packer.indexes:
        lines.append(f"        pk = {pk_expr}")
        lines.append("        pk = BULK % (len(pk), pk)")
        code.namespace["BULK"] = b"$%d\r\n%b\r\n"
    for u in plan.table.unique:
        if u.key is not None:
            continue
        joined = _joined_parts([plan.pos[c] for c in u.columns], plan.sep)
        value, used = code.expr(joined, keys if len(u.columns) > 1 else frozenset())
        ukey = code.const(plan.unique_hash_key(u.columns))
        lines += [
            f"        if {_none_check(used)}:",
            "            null_unique += 1",
            "        else:",
            f"            v = {value}",
            "            v = BULK % (len(v), v)",
            f"            got = hsets.get({ukey})",
            "            if got is None:",
            f"                hsets[{ukey}] = [v, pk]",
            "            else:",
            "                got += (v, pk)",
            "            entries += 1",
        ]
    for template in packer.index_templates:
        ikey, used = code.expr(template_parts(template, plan.pos), keys)
        lines += [
            f"        if {_none_check(used)}:",
            "            null_index += 1",
            "        else:",
            f"            ikey = {ikey}",
            "            members = sadds.get(ikey)",
            "            if members is None:",
            "                sadds[ikey] = [pk]",
            "            else:",
            "                members.append(pk)",
            "            entries += 1",
        ]
    head = [
        "def pack_rows(rows, hsets, sadds, out, ambiguous):",
        "    append = out.append",
        "    hashed = rejected = entries = null_unique = null_index = 0",
        "    for row in rows:",
        f"        {', '.join(f'_{i}' for i in range(width))}, = row",
    ]
    # a one-byte character is tested as an int: ``58 in v`` is ~10x faster than ``b":" in v``
    chars = [str(c[0]) if len(c) == 1 else code.const(c) for c in plan.sep_chars]
    if plan.guards:  # escape: reject -- a separator inside a value of a written composite
        # one test per column looked at (NOT NULL ones without the None test); only a row
        # that holds a separator there pays for the full rule (AMBIGUOUS: NULLs, groups)
        nullable = {c.name for c in plan.resolved.schema.columns if c.nullable}
        tests = []
        for i, name in plan.checked:
            holds = " or ".join(f"{c} in _{i}" for c in chars)
            tests.append(
                f"({holds})" if name not in nullable else f"(_{i} is not None and ({holds}))"
            )
        code.namespace["AMBIGUOUS"] = plan.ambiguous
        head += [f"        if ({' or '.join(tests)}) and AMBIGUOUS(row) is not None:"]
        head += ["            ambiguous.append(row)", "            continue"]
    if code.escaped:  # escape: backslash -- escaped values, computed only when they change
        code.namespace["ESC"], bs = plan.esc, str(ord("\\"))
        for i in sorted(code.escaped):
            plain = " and ".join(f"{c} not in _{i}" for c in [*chars, bs])
            head.append(f"        e{i} = _{i} if _{i} is None or ({plain}) else ESC(_{i})")
    lines = [*head, *lines, "    return hashed, rejected, entries, null_unique, null_index"]
    exec(compile("\n".join(lines) + "\n", f"<pack_rows {plan.table.name}>", "exec"), code.namespace)
    fn: Callable[..., tuple[int, int, int, int, int]] = code.namespace["pack_rows"]
    return fn


def _coalesced(
    name: bytes, items: dict[bytes, list[bytes]], out: list[bytes], packed: bool = False
) -> None:
    """One command per key; ``packed``: the arguments are RESP bulk strings already."""
    head = b"$%d\r\n%b\r\n" % (len(name), name)
    for key, args in items.items():
        out.append(b"*%d\r\n%b$%d\r\n%b\r\n" % (len(args) + 2, head, len(key), key))
        out.extend(args if packed else [b"$%d\r\n%b\r\n" % (len(a), a) for a in args])


class Packer:
    """Packs batches of one table's rows into RESP bytes."""

    def __init__(
        self,
        plan: TableLayout,
        structures: Sequence[Structure],
        general: Callable[[Sequence[Row]], tuple[list[Command], Stats]],
    ) -> None:
        self.plan, self.structures, self.general_plan = plan, structures, general
        names = [s.name for s in structures]
        # formats and lower() (plan/layout.py: transforms) take the structures' own code
        self.general = (
            "columns" in names or "unique-string" in names or "document" in names
            or plan.transforms
        )  # fmt: skip
        self.hashing = "hash" in names
        mapped = plan.resolved.columns if self.hashing else ()
        self.fields = [
            (b"$%d\r\n%b\r\n" % (len(plan.field(c)), plan.field(c)), plan.pos[c]) for c in mapped
        ]
        self.pk_fields = [
            (b"$%d\r\n%b\r\n" % (len(plan.field(c)), plan.field(c)), plan.pos[c])
            for c in plan.resolved.primary_key
        ]
        self.row = _row_function(plan, self.fields) if self.hashing else None
        self.uniques: list[tuple[bytes, object]] = []
        self.indexes: list[object] = []
        self.others = []
        for s in structures:
            if s.name == "unique":
                self.uniques = list(s.items)  # type: ignore[attr-defined]
            elif s.name == "index":
                self.indexes = list(s.items)  # type: ignore[attr-defined]
            elif s.name != "hash":
                self.others.append(s.add)
        self.index_templates = [
            t
            for s in structures
            if s.name == "index"
            for t in s.templates  # type: ignore[attr-defined]
        ]
        self.batch = None if self.general or self.others else _batch_function(self)

    def slow_hash(self, row: Row, out: list[bytes]) -> bool:
        """A row's HSET when a hashed column is NULL (those fields are left out): appended
        to ``out``; False when the row key itself has a NULL (the row is rejected)."""
        key = self.plan.row_key(row)
        if key is None:
            return False
        args = [
            b"%b$%d\r\n%b\r\n" % (h, len(v), v) for h, i in self.fields if (v := row[i]) is not None
        ]
        if not args:  # every field NULL: keep the row, keyed by its primary key
            args = [
                b"%b$%d\r\n%b\r\n" % (h, len(v), v)
                for h, i in self.pk_fields
                for v in [row[i] or b""]
            ]
        out.append(b"*%d\r\n$4\r\nHSET\r\n$%d\r\n%b\r\n" % (2 + 2 * len(args), len(key), key))
        out.extend(args)
        return True

    def pack(self, rows: Sequence[Row]) -> tuple[bytes, int, Stats]:
        """(RESP bytes, number of commands, stats) for a batch of rows."""
        plan = self.plan
        if self.general:
            commands, stats = self.general_plan(rows)
            return resp(commands), len(commands), stats
        batch = Batch()
        hsets, sadds = batch.hsets, batch.sadds
        out: list[bytes] = []
        ambiguous: list[Row] = []  # rows with a separator inside a composite's value
        if self.batch is not None:
            counts = self.batch(rows, hsets, sadds, out, ambiguous)
            return self._finish(rows, batch, out, ambiguous, *counts, packed=True)
        append = out.append
        pk_text, slow_hash = plan.pk_text, self.slow_hash
        uniques, indexes, others = self.uniques, self.indexes, self.others
        hashing, pack_row = self.hashing, self.row
        hashed = rejected = entries = null_unique = null_index = 0
        checked = bool(plan.guards)
        for row in rows:
            if checked and plan.ambiguous(row) is not None:
                ambiguous.append(row)
                continue
            if hashing:
                packed = pack_row(row)  # type: ignore[misc]
                if packed is not None:
                    append(packed)
                    hashed += 1
                elif slow_hash(row, out):
                    hashed += 1
                else:
                    rejected += 1
            if uniques or indexes:
                pk: Any = pk_text(row)
                for ukey, value_of in uniques:
                    v = value_of(row)  # type: ignore[operator]
                    if v is None:
                        null_unique += 1
                    else:
                        got = hsets.get(ukey)
                        if got is None:
                            hsets[ukey] = [v, pk]
                        else:
                            got += (v, pk)
                        entries += 1
                for key_of in indexes:
                    ikey = key_of(row)  # type: ignore[operator]
                    if ikey is None:
                        null_index += 1
                    else:
                        members = sadds.get(ikey)
                        if members is None:
                            sadds[ikey] = [pk]
                        else:
                            members.append(pk)
                        entries += 1
            for add in others:
                add(row, batch)
        return self._finish(
            rows, batch, out, ambiguous, hashed, rejected, entries, null_unique, null_index
        )

    def _finish(
        self,
        rows: Sequence[Row],
        batch: Batch,
        out: list[bytes],
        ambiguous: list[Row],
        hashed: int,
        rejected: int,
        entries: int,
        null_unique: int,
        null_index: int,
        packed: bool = False,
    ) -> tuple[bytes, int, Stats]:
        hsets, sadds = batch.hsets, batch.sadds
        stats = batch.stats
        stats.rows = len(rows)
        for row in ambiguous:
            self.plan.reject(row, self.plan.ambiguous(row) or "", stats)
        stats.keys += hashed
        stats.entries += entries
        if rejected:
            stats.rejected[NULL_KEY] += rejected
        if null_unique:
            stats.skipped[NULL_UNIQUE] += null_unique
        if null_index:
            stats.skipped[NULL_INDEX] += null_index
        batch.note_shared()
        _coalesced(b"HSET", hsets, out, packed)
        _coalesced(b"SADD", sadds, out, packed)
        _coalesced(b"ZADD", batch.zadds, out)
        if batch.commands:  # one command per row and key (vector sets: VADD)
            out.append(resp(batch.commands))
        count = hashed + len(hsets) + len(sadds) + len(batch.zadds) + len(batch.commands)
        return b"".join(out), count, stats
