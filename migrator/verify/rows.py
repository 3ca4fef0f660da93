"""Verify, one batch of rows: the planner's structures give the commands migrate would send
for the batch, and one pipeline of reads checks them all (HGETALL, MGET, HMGET, SMISMEMBER,
ZMSCORE, EXISTS; verify/vectors.py: VEMB). Coalesced structures also keep a count per key for
the cardinality check that finds members nobody explains (memory: distinct index values)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from migrator.plan.owners import owners_of
from migrator.plan.planner import Batch, KeyFn, Row, Stats, Structure, TablePlan
from migrator.plan.row_images import RowImages
from migrator.plan.structures import run_structure
from migrator.verify import documents
from migrator.verify import report as vr
from migrator.verify.expiry import ExpiryChecks
from migrator.verify.keys import Reader
from migrator.verify.repair import Repairer
from migrator.verify.report import TableCheck
from migrator.verify.row_images import ImageCheck
from migrator.verify.vectors import VectorCheck

Command = tuple[bytes, ...]
#: HGETALL of every key, as one array reply (a WRONGTYPE key gives an error in its place)
HGETALL_ALL = (
    b"local out = {} for i, k in ipairs(KEYS) do out[i] = redis.pcall('HGETALL', k) end return out"
)
Handler = Callable[[list[Any], Any], None]
#: coalesced structure -> (cardinality command, kind of difference for unexplained members)
CARDINALITY = {
    "unique": (b"HLEN", vr.FOREIGN_UNIQUE),
    "index": (b"SCARD", vr.FOREIGN_INDEX),
    "set": (b"SCARD", vr.FOREIGN_SET),
    "sorted": (b"ZCARD", vr.FOREIGN_SORTED), "vector": (b"VCARD", vr.FOREIGN_VECTOR),
}  # fmt: skip


class RowChecks:
    """The per-batch checks of one table, and the counts they keep."""

    def __init__(self, plan: TablePlan, reader: Reader, check: TableCheck) -> None:
        self.plan = plan
        self.reader = reader
        self.check = check
        self.structures: dict[str, Structure] = {s.name: s for s in plan.structures}
        self.present = 0  # per-row keys (row hashes, column strings, unique strings) found
        self.rows_present = 0
        self.expected: dict[str, dict[bytes, int]] = {k: {} for k in CARDINALITY}
        pk = set(plan.resolved.primary_key)
        exact = all(pk <= {*s.key.columns, *s.member.columns} for s in plan.table.sets)
        self.set_members: dict[bytes, set[bytes]] | None = None if exact else {}
        self.expected_keys: set[bytes] = set()
        self.references: list[tuple[str, KeyFn]] = []
        self.keyed_present = 0  # expected keyed structures (sets, hashes, ...) found in Redis
        #: verify --fix: where each difference's repair goes (None: only report)
        self.fixer: Repairer | None = None
        #: per coalesced key, members the source puts there that Redis lacks (not repaired)
        self.absent: Counter[bytes] = Counter()
        #: unique entries (key, field; None for a string) whose value several rows hold (a
        #: unique: MySQL does not enforce) -> their primary keys: the entry may name any
        self.shared: dict[tuple[bytes, bytes | None], set[bytes]] = {}
        self._shared_counted: set[tuple[bytes, bytes | None]] = set()
        #: a table with expire: (verify/expiry.py): which rows are judged, their keys' TTLs
        self.expiry = None if plan.expiry is None else ExpiryChecks(plan, reader.read)
        self.structures.pop("rows", None)  # a cascade child's row images: checked apart
        images = next((s for s in plan.structures if isinstance(s, RowImages)), None)
        self.images = None if images is None else ImageCheck(images, self.found)
        #: checks of their own, each with ``reads(rows)`` and ``check(replies, context)``
        owners = owners_of(plan)  # a sharded source's owner hash (plan/owners.py)
        self.structures.pop("shard", None)
        self.owners = None if owners is None else ImageCheck(owners, self.found)
        extra = (self.images, self.owners, VectorCheck.of(self))
        self.extra = [c for c in extra if c is not None]

    def found(
        self,
        kind: str,
        key: bytes,
        fieldname: object = None,
        mysql: object = None,
        redis: object = None,
        repair: Sequence[Command] = (),
        n: int = 1,
    ) -> None:
        """Report a difference and, with --fix, queue the commands that repair it."""
        self.check.add(kind, key, fieldname, mysql, redis, n=n)
        if self.expiry is not None and repair:
            repair = self.expiry.repair(repair)
        if self.fixer is not None:
            self.fixer.repair(kind, key, fieldname, repair, n)

    def _retype(self, key: bytes, kind: bytes) -> list[Command]:
        return self.fixer.retype(key, kind) if self.fixer is not None else []

    def _lacks(self, key: bytes) -> None:
        """A member the key lacks: counted unless --fix adds it before sizes are compared."""
        if self.fixer is None:
            self.absent[key] += 1

    # -- one batch of rows -------------------------------------------------------------------
    def accepted(self, rows: Sequence[Row]) -> Sequence[Row]:
        """The rows migrate writes: a row with a separator inside a value of an ambiguous
        composite (``escape: reject``) is left out and counted as a difference (a rejected
        row: MySQL holds it, Redis does not), as migrate rejects it."""
        if not self.plan.guards:
            return rows
        out = []
        stats = Stats()
        for row in rows:
            column = self.plan.ambiguous(row)
            if column is None:
                out.append(row)
            else:
                self.plan.reject(row, column, stats)
        if len(out) < len(rows):
            self.note_rejects(stats)
            self.check.mysql_rows += len(rows) - len(out)
        return out

    def note_rejects(self, stats: Stats) -> None:
        """Count rows the plan rejected as differences, naming the first of them."""
        if not stats.rejected:
            return
        self.check.refused.update(stats.rejected)
        named: Counter[str] = Counter()
        for r in stats.rejects:
            named[r.reason] += 1
            self.check.add(vr.REJECTED, f"({', '.join(r.pk)})", r.column, r.reason)
        for why, n in stats.rejected.items():
            if n > named[why]:
                self.check.add(vr.REJECTED, "(rows)", None, why, n=n - named[why])

    def rows(self, rows: Sequence[Row]) -> None:
        """Check one batch now."""
        reads, handlers = self.prepare(rows)
        self.apply(handlers, self.reader.read(reads))

    def prepare(self, rows: Sequence[Row]) -> tuple[list[Command], list[tuple[Handler, int, Any]]]:
        """The reads that check a batch, and what to do with their replies."""
        judged = None
        if self.expiry is not None:  # rows past their moment, or too close to it: not judged
            judged = self.expiry.judged(rows)
            rows = [row for row, _, _ in judged]
            self._near(self.expiry.near)
        self.check.mysql_rows += len(rows)
        reads: list[Command] = []
        handlers: list[tuple[Handler, int, Any]] = []

        def want(handler: Handler, commands: list[Command], context: Any) -> None:
            if commands:
                handlers.append((handler, len(commands), context))
                reads.extend(commands)

        s = self.structures
        if "hash" in s:
            b = run_structure(s["hash"], rows)
            keys = [c[1] for c in b.commands]
            if self.reader.scripting and keys:  # one reply for the batch: far less parsing
                want(self._hashes_script, [(b"EVAL", HGETALL_ALL, b"%d" % len(keys), *keys)],
                     b.commands)  # fmt: skip
            else:
                want(self._hashes, [(b"HGETALL", k) for k in keys], b.commands)
            self._rejected(b)
        if "columns" in s:
            groups, b = _per_row(s["columns"], rows, self.plan)
            self._rejected(b)
            want(self._columns, [(b"MGET", *(c[1] for c in g)) for _, g in groups], groups)
        if "document" in s:
            b = run_structure(s["document"], rows)
            self._rejected(b)
            want(self._documents, documents.reads(b.commands), b.commands)
        if "unique-string" in s:
            cmds = run_structure(s["unique-string"], rows).commands
            want(self._unique_strings, [(b"MGET", *(c[1] for c in cmds))] if cmds else [], cmds)
        if "unique" in s:
            hs = run_structure(s["unique"], rows).hsets
            want(self._unique_hashes, [(b"HMGET", k, *v[0::2]) for k, v in hs.items()], hs)
        for name, what in (("index", vr.MISSING_INDEX), ("set", vr.MISSING_SET)):
            if name in s:
                sa = run_structure(s[name], rows).sadds
                cmds = [(b"SMISMEMBER", k, *v) for k, v in sa.items()]
                want(self._members, cmds, (name, what, sa))
        if "sorted" in s:
            za = run_structure(s["sorted"], rows).zadds
            want(self._scores, [(b"ZMSCORE", k, *v[1::2]) for k, v in za.items()], za)
        for extra in self.extra:
            want(extra.check, *extra.reads(rows))
        if self.references:
            parents = self._parents(rows)
            want(self._dangling, [(b"EXISTS", k) for k in parents], parents)
        if self.expiry is not None and judged:
            want(self._ttls, self.expiry.reads(judged), judged)
        return reads, handlers

    def _near(self, rows: list[Row]) -> None:
        """Rows too close to their expiry to judge: the shared keys they write are expected
        (not stray), with none of their members (those present are explained by the row)."""
        if self.images is not None:
            self.images.near(rows)
        for name in CARDINALITY:
            if name in self.structures and rows:
                b = run_structure(self.structures[name], rows)
                for key in (*b.hsets, *b.sadds, *b.zadds):
                    if name == "set" and self.set_members is not None:
                        self.set_members.setdefault(key, set())
                    else:
                        self.expected[name].setdefault(key, 0)

    def _ttls(self, replies: list[Any], judged: Any) -> None:
        assert self.expiry is not None
        self.expiry.ttls(replies, judged, self.found)

    def apply(self, handlers: list[tuple[Handler, int, Any]], replies: list[Any]) -> None:
        at = 0
        for handler, n, context in handlers:
            handler(replies[at : at + n], context)
            at += n

    def _rejected(self, b: Batch) -> None:
        self.note_rejects(b.stats)

    def _hashes_script(self, replies: list[Any], cmds: list[Command]) -> None:
        got = replies[0]
        if isinstance(got, Exception):  # scripting refused here: one HGETALL per row
            self.reader.scripting = False
            got = self.reader.read([(b"HGETALL", c[1]) for c in cmds])
        self._hashes(got, cmds)

    def _hashes(self, replies: list[Any], cmds: list[Command]) -> None:
        add = self.found
        for cmd, got in zip(cmds, replies):
            key = cmd[1]
            if isinstance(got, Exception):
                add(vr.WRONG_TYPE, key, None, "a hash", str(got), [(b"DEL", key), cmd])
                continue
            if isinstance(got, dict):
                got = [x for kv in got.items() for x in kv]
            if not got:
                add(vr.MISSING_ROW, key, repair=[cmd])
                continue
            self.present += 1
            self.rows_present += 1
            want = cmd[2:]
            if len(got) == len(want) and tuple(got) == want:
                continue
            expect = dict(zip(want[0::2], want[1::2]))
            have = dict(zip(got[0::2], got[1::2]))
            for f, v in expect.items():
                h = have.get(f)
                if h is None:
                    add(vr.MISSING_FIELD, key, f, v, None, [(b"HSET", key, f, v)])
                elif h != v:
                    add(vr.DIFFERENT_VALUE, key, f, v, h, [(b"HSET", key, f, v)])
            for f, h in have.items():
                if f not in expect:
                    add(vr.EXTRA_FIELD, key, f, None, h, [(b"HDEL", key, f)])

    def _documents(self, replies: list[Any], cmds: list[Command]) -> None:
        present = documents.compare(cmds, replies, self.found, documents.vectors(self.plan))
        self.present += present
        self.rows_present += present

    def _columns(self, replies: list[Any], groups: list[tuple[bytes, list[Command]]]) -> None:
        for (row_key, cmds), got in zip(groups, replies):
            found = sum(1 for v in got if v is not None)
            if not found:
                self.found(vr.MISSING_ROW, row_key, repair=cmds)
                continue
            self.present += found
            self.rows_present += 1
            for cmd, v in zip(cmds, got):
                if v is None:
                    self.found(vr.MISSING_FIELD, cmd[1], None, cmd[2], None, [cmd])
                elif v != cmd[2]:
                    self.found(vr.DIFFERENT_VALUE, cmd[1], None, cmd[2], v, [cmd])

    def _sharer(self, key: bytes, fieldname: bytes | None, v: bytes) -> bool:
        """Whether ``v`` is the primary key of one of the rows that share the entry's value
        (then the entry is right: it names one of them)."""
        return v in self.shared.get((key, fieldname), ())

    def unique_count(self, key: bytes, fields: list[bytes]) -> int:
        """The distinct entries ``fields`` add to a unique hash: a shared value counts once
        in the whole table, whichever batches its rows fall in."""
        new = set(fields)
        if self.shared:
            for f in list(new):
                if (key, f) in self.shared:
                    if (key, f) in self._shared_counted:
                        new.discard(f)
                    self._shared_counted.add((key, f))
        return len(new)

    def _unique_strings(self, replies: list[Any], cmds: list[Command]) -> None:
        for cmd, v in zip(cmds, replies[0]):
            if v is None:
                self.found(vr.MISSING_UNIQUE, cmd[1], None, cmd[2], None, [cmd])
            else:
                if (cmd[1], None) not in self._shared_counted:
                    self.present += 1
                if (cmd[1], None) in self.shared:
                    self._shared_counted.add((cmd[1], None))
                if v != cmd[2] and not self._sharer(cmd[1], None, v):
                    self.found(vr.WRONG_UNIQUE, cmd[1], None, cmd[2], v, [cmd])

    def _unique_hashes(self, replies: list[Any], hsets: dict[bytes, list[bytes]]) -> None:
        counts = self.expected["unique"]
        for (key, args), got in zip(hsets.items(), replies):
            fields = args[0::2]
            counts[key] = counts.get(key, 0) + self.unique_count(key, fields)
            if isinstance(got, Exception):
                repair = [*self._retype(key, b"hash"), (b"HSET", key, *args)]
                self.found(vr.WRONG_TYPE, key, None, "a hash", str(got), repair)
                continue
            for f, pk, v in zip(fields, args[1::2], got):
                if v is None:
                    self._lacks(key)
                    self.found(vr.MISSING_UNIQUE, key, f, pk, None, [(b"HSET", key, f, pk)])
                elif v != pk and not self._sharer(key, f, v):
                    self.found(vr.WRONG_UNIQUE, key, f, pk, v, [(b"HSET", key, f, pk)])

    def _members(self, replies: list[Any], context: Any) -> None:
        name, what, sadds = context
        counts = self.expected[name]
        members_of = self.set_members if name == "set" else None
        for (key, members), got in zip(sadds.items(), replies):
            if members_of is not None:
                members_of.setdefault(key, set()).update(members)
            else:
                counts[key] = counts.get(key, 0) + len(members)
            if isinstance(got, Exception):
                repair = [*self._retype(key, b"set"), (b"SADD", key, *members)]
                self.found(vr.WRONG_TYPE, key, None, "a set", str(got), repair)
                continue
            for m, there in zip(members, got):
                if not there:
                    self._lacks(key)
                    self.found(what, key, m, m, None, [(b"SADD", key, m)])

    def _scores(self, replies: list[Any], zadds: dict[bytes, list[bytes]]) -> None:
        counts = self.expected["sorted"]
        for (key, args), got in zip(zadds.items(), replies):
            members = args[1::2]
            counts[key] = counts.get(key, 0) + len(members)
            if isinstance(got, Exception):
                repair = [*self._retype(key, b"zset"), (b"ZADD", key, *args)]
                self.found(vr.WRONG_TYPE, key, None, "a sorted set", str(got), repair)
                continue
            for m, score, have in zip(members, args[0::2], got):
                if have is None:
                    self._lacks(key)
                    self.found(vr.MISSING_SORTED, key, m, score, None, [(b"ZADD", key, score, m)])
                elif not _same_number(score, have):
                    self.found(vr.WRONG_SCORE, key, m, score, have, [(b"ZADD", key, score, m)])

    def _parents(self, rows: Sequence[Row]) -> dict[bytes, list[Any]]:
        """Parent row key -> [child rows pointing at it, first child key, columns, first
        child row]."""
        out: dict[bytes, list[Any]] = {}
        child_key = self.plan.row_key if self.plan.table.kind != "none" else self.plan.pk_text
        for row in rows:
            for cols, parent_key in self.references:
                k = parent_key(row)
                if k is None:
                    continue
                seen = out.get(k)
                if seen is None:
                    out[k] = [1, child_key(row), cols, row]
                else:
                    seen[0] += 1
        return out

    def _dangling(self, replies: list[Any], parents: dict[bytes, list[Any]]) -> None:
        missing = {k: v for (k, v), there in zip(parents.items(), replies) if not there}
        for parent_key in self.left_out_parents(missing):
            missing.pop(parent_key)
        for parent_key, (n, child, cols, _) in missing.items():
            self.check.add(vr.DANGLING, child or b"", cols, parent_key, None, n=n)

    def left_out_parents(self, missing: dict[bytes, list[Any]]) -> list[bytes]:
        """Of the parent keys no row of Redis holds, those of parent rows MySQL holds but the
        parent's own ``where:`` or expiry leaves out (TableVerifier asks MySQL)."""
        return []

    # -- after the rows ----------------------------------------------------------------------
    def cardinalities(self) -> list[tuple[str, bytes]]:
        """Compare each coalesced key's size with the members the source puts there (less
        those found missing): the keys that hold more, (structure name, key), whose extra
        members are then named one by one (``members.Explainer``)."""
        if self.set_members is not None:
            self.expected["set"] = {k: len(v) for k, v in self.set_members.items()}
            self.set_members = None
        suspects = []
        for name, (command, _) in CARDINALITY.items():
            counts = list(self.expected[name].items())
            self.expected_keys.update(k for k, _ in counts)
            for i in range(0, len(counts), 5000):
                chunk = counts[i : i + 5000]
                replies = self.reader.read([(command, k) for k, _ in chunk])
                for (key, want), have in zip(chunk, replies):
                    self.keyed_present += isinstance(have, int) and have > 0
                    if isinstance(have, int) and have > want - self.absent.get(key, 0):
                        suspects.append((name, key))
            self.expected[name] = {}
        self.absent.clear()
        return suspects


def _per_row(
    structure: Structure, rows: Sequence[Row], plan: TablePlan
) -> tuple[list[tuple[bytes, list[Command]]], Batch]:
    """``as: columns``: each row's key and its SET commands (and the batch, whose stats count
    the rows rejected for a NULL in the row key)."""
    b = Batch()
    out = []
    for row in rows:
        before = len(b.commands)
        structure.add(row, b)
        if len(b.commands) > before:
            out.append((plan.row_key(row) or b"", b.commands[before:]))
    return out, b


def _same_number(a: bytes, b: bytes | float) -> bool:
    try:
        return float(a) == float(b)
    except ValueError:
        return a == b
