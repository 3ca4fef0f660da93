"""Source vs Redis: counts, values, indexes, references, stale keys -> a VerifyReport.

One definition of what Redis should hold: the planner's. Each table is streamed in
primary-key batches (``Source.batches`` with ``TablePlan.select``); each of the plan's
structures turns the batch into the commands ``migrate`` would send, and those commands are
checked with pipelined reads: HGETALL per row hash, MGET for strings, HMGET on unique
hashes, SMISMEMBER on index and tag sets, ZMSCORE on sorted sets, EXISTS for the parent row
of each reference. Coalesced structures are also checked for members nobody explains by
comparing their cardinality (SCARD/HLEN/ZCARD) with a per-key count kept during the pass,
which is bounded by the number of distinct index values, not by the table. Counters and
latest lists are compared with what ``migrate`` rebuilds at the end of a table. A key that
holds more members than the source explains has its extra members named (members.py).
Stale keys are found by one SCAN over the key spaces of the verified tables
(plan/keyspace.py; ``Checker``, checker.py): a key that fits none of its table's patterns
is stale whatever its shape or type; a row key is stale when no source row plans it. With
``--fix`` every difference is repaired as it is found (repair.py).
"""

from __future__ import annotations

from typing import Any, Protocol

from migrator.mapping.kinds import FLOATS
from migrator.mapping.model import DOCUMENTS
from migrator.mapping.validate import plural
from migrator.plan.finish import counter_holds, finish_commands
from migrator.plan.keyspace import KeyPattern, KeySpace
from migrator.plan.planner import KeyFn, TablePlan, compile_template
from migrator.plan.structures import Structure
from migrator.progress import Progress
from migrator.source.mysql import Source
from migrator.source.selects import keyset_value, shared_keys_query
from migrator.source.shared import SharedValues, shared_values
from migrator.source.weights import collations_of
from migrator.source.where import clause, left_out
from migrator.store.keys import scan_space
from migrator.verify import report as vr
from migrator.verify.expiry import TOLERANCE
from migrator.verify.fast import FastBatch, FastChecks, no_cycle_collection, usable
from migrator.verify.keys import Reader
from migrator.verify.members import Explainer, params
from migrator.verify.parents import HeldParents, Parent
from migrator.verify.repair import Repairer
from migrator.verify.report import TableCheck
from migrator.verify.rows import CARDINALITY, Command, RowChecks, run_structure

LOOKUP_CHUNK = 500
#: rows read per unique: MySQL does not enforce, whose shared values an entry may name
SHARED_ROWS = 100_000


#: what a foreign member is removed with, per coalesced structure
REMOVE = {
    "unique": b"HDEL", "index": b"SREM", "set": b"SREM", "sorted": b"ZREM", "vector": b"VREM",
}  # fmt: skip


class Run(Protocol):
    """What a table's checks share with the run over all tables (``Checker``,
    verify/checker.py): the source, the reader of Redis, every plan, the key space, whether to
    repair, and where the checks after a pass report what they are doing."""

    src: Source
    reader: Reader
    plans: dict[str, TablePlan]
    space: KeySpace
    fix: bool
    progress: Progress


class TableVerifier(RowChecks):
    """The checks of one table; ``check`` collects what differs."""

    def __init__(self, checker: Run, plan: TablePlan) -> None:
        super().__init__(plan, checker.reader, TableCheck(plan.table.name))
        self.c = checker
        self.r = plan.resolved
        self.name = plan.table.name
        self.selector = checker.src.selector(self.name, plan.row_names)
        #: the table's row filter as SQL (None: every row): rows it leaves out belong
        #: nowhere in Redis, and a key of theirs is stray
        self.where = clause(self.r, TOLERANCE)
        #: the rows latest lists hold: those not past their moment (verify/expiry.py)
        self.live = clause(self.r) if self.r.table.expire is not None else self.where
        #: references whose parent row MySQL may hold and Redis not (verify/parents.py)
        self.held_parents = HeldParents()
        self.references = self._references()
        self.whole_documents: Structure | None = None
        if any(_nested_in(p, self.name) for p in checker.plans.values()):
            # its documents hold its nested children: verify/nesting.py checks them whole
            self.whole_documents = self.structures.pop("document", None)
        self.shared_values = self._shared() if self.r.unenforced_uniques else []
        if checker.fix:
            self.fixer = Repairer(checker.reader.client, self.name, checker.reader.retrying)

    # -- setting up --------------------------------------------------------------------------
    def _references(self) -> list[tuple[str, KeyFn]]:
        out = []
        for i, ref in enumerate(self.plan.table.references):
            label = f"references[{i}] ({', '.join(ref.columns)} -> {ref.table})"
            parent = self.c.plans.get(ref.table)
            if parent is None:
                self.check.notes.append(f"{label}: parent table not in the mapping; not checked")
                continue
            pr = parent.resolved
            if pr.table.kind != "hash":
                self.check.notes.append(
                    f"{label}: the parent is 'as: {pr.table.kind}', with no row key to look up"
                )
                continue
            pcols = ref.parent_columns or pr.primary_key
            if len(pcols) != len(ref.columns) or not set(pr.key.columns) <= set(pcols):
                self.check.notes.append(
                    f"{label}: the parent's row key is not made of the referenced columns"
                )
                continue
            pos = {p: self.plan.pos[c] for p, c in zip(pcols, ref.columns)}
            # the parent's key as the parent writes it: escaped where it escapes (backslash)
            escaped = {pos[p] for p in pcols if parent.pos.get(p) in parent.escapable}
            key = compile_template(pr.key, pos, parent.esc, escaped)
            out.append((",".join(ref.columns), key))
            at = tuple(self.plan.pos[c] for c in ref.columns)
            floats = any(pr.schema.column(p).kind in FLOATS for p in pcols)
            under = collations_of(pr.schema, pcols, self.plan.resolved.schema, ref.columns)
            held = Parent(ref.table, pcols, at, clause(pr), under, floats)
            self.held_parents.add(",".join(ref.columns), held)
        return out

    def left_out_parents(self, missing: dict[bytes, list[Any]]) -> list[bytes]:
        return self.held_parents.held(self.c.src, missing)

    def _shared(self) -> list[SharedValues]:
        """The values of a ``unique:`` MySQL does not enforce that several rows share today,
        and, per entry they make, the primary keys of those rows (any of which the entry may
        name: ``shared``). Up to SHARED_ROWS rows are read; beyond, the rest are reported as
        the differences they look like."""
        found = shared_values(self.c.src, self.r)
        if found:
            for u in self.r.unenforced_uniques:
                cols = [self.r.schema.column(c) for c in u.columns]
                rows = self.c.src.sharing_rows(
                    self.name, self.selector, cols, SHARED_ROWS, clause(self.r)
                )
                self._share(self.accepted(rows))
        return found

    def _share(self, rows: Any) -> None:
        for name in ("unique", "unique-string"):
            if name not in self.structures:
                continue
            b = run_structure(self.structures[name], rows)
            for key, args in b.hsets.items():
                for f, pk in zip(args[0::2], args[1::2]):
                    self.shared.setdefault((key, f), set()).add(pk)
            for cmd in b.commands:
                self.shared.setdefault((cmd[1], None), set()).add(cmd[2])
        # an entry only one of the rows read makes is not shared (another unique's value)
        self.shared = {k: pks for k, pks in self.shared.items() if len(pks) > 1}

    # -- modes -------------------------------------------------------------------------------
    def full(
        self, size: int, progress: Progress, after: Any = None, until: Any = None,
        whole: bool = True,
    ) -> None:  # fmt: skip
        """Every row, a batch at a time; Redis answers one batch's reads while the next
        batch is read from MySQL. ``after``/``until``: only a chunk's rows (primary-key
        values), and not ``whole``: leave the table's conclusion to who merges the chunks
        (``conclude``; verify --dask)."""
        src, reader = self.c.src, self.c.reader
        fast = FastChecks(self) if usable(self) else None
        waiting: Any = None
        pk = self.r.primary_key
        with no_cycle_collection():
            for read in src.batches(
                self.name, self.selector, pk, size, after=after, until=until, where=self.where
            ):
                self.check.readers[src.reader] += len(read)
                rows = self.accepted(read)
                if fast is not None and fast.wanted():
                    job: Any = fast.send(rows)
                else:
                    reads, handlers = self.prepare(rows)
                    job = (reader.send(reads), handlers)
                if waiting is not None:
                    self._settle(fast, waiting)
                    self.flush()
                waiting = job
                progress.advance(self.name, len(read))
            if waiting is not None:
                self._settle(fast, waiting)
                self.flush()
            if self.plan.keeps is not None and self.images is not None:  # (plan/row_images.py)
                for read in src.batches(self.name, self.selector, pk, size, after=after,
                                        until=until, where=left_out(self.r)):  # fmt: skip
                    self.images.rows(read, reader.read)  # the rows left out: their images
                    self.flush()
        if whole:
            self.conclude()

    def conclude(self) -> None:
        """After every row: members nobody explains, row keys present."""
        note = self.held_parents.note(self.name)
        if note:
            self.check.notes.append(note)
        self.foreign(self.cardinalities())
        if self.images is not None:  # images and members no row explains
            self.images.rest(self.c.reader.client)
        if self.owners is not None:  # owner fields no row explains (plan/owners.py)
            self.owners.rest(self.c.reader.client, self.c.src, self.where)
        self.check.redis_rows = self.rows_present if self.plan.table.kind != "none" else None

    def flush(self) -> None:
        """Send the repairs found so far (--fix)."""
        if self.fixer is not None:
            self.fixer.flush()

    def foreign(self, suspects: list[tuple[str, bytes]]) -> None:
        """Name the members of each key that holds more than the source explains."""
        if not suspects:
            return
        explainer = Explainer(self, self.c.src, self.c.reader.client)
        self.c.progress.note(
            self.name, f"naming the members nobody explains in {plural(len(suspects), 'key')}"
        )
        for name, key in suspects:
            kind = CARDINALITY[name][1]
            for member, value in explainer.foreign(name, key):
                self.found(kind, key, member, None, value if value is not None else member,
                           [(REMOVE[name], key, member)])  # fmt: skip
        self.flush()

    def _settle(self, fast: FastChecks | None, job: Any) -> None:
        """Read a batch's replies and count them; a fast batch with a difference is checked
        again by the general path, which names every difference."""
        if isinstance(job, FastBatch):
            if not fast.settle(job):  # type: ignore[union-attr]
                if not self.check.counts:  # the first difference: the slower path from here
                    self.c.progress.note(self.name, "differences: naming each one")
                self.rows(job.rows)
        else:
            self.apply(job[1], job[0].wait())

    def sampled(self, n: int, size: int, progress: Progress) -> None:
        src, pk = self.c.src, self.r.primary_key
        kinds = [self.r.schema.column(c).kind for c in pk]
        keys = src.random_keys(self.name, pk, n, self.where)
        for i in range(0, len(keys), size):
            values = [
                tuple(keyset_value(v, k) for v, k in zip(key, kinds)) for key in keys[i : i + size]
            ]
            for rows in src.sampled_rows(self.name, self.selector, pk, values, self.where):
                self.rows(self.accepted(rows))  # (a shard's: its owner fields checked too)
                progress.advance(self.name, len(rows))
        checked = self.check.mysql_rows
        self.check.notes.append(f"values checked for {checked} random rows")
        self.check.mysql_rows = self._live_rows()
        if any(n in self.structures for n in CARDINALITY):
            self.check.notes.append("members nobody explains: not looked for with --sample")

    def shared_keys(self) -> None:
        """Rows that share a declared primary key (MySQL does not keep it unique): Redis
        holds one row per key, so each row beyond the first is a difference."""
        if not self.r.trusts_declared_key:
            return
        pk = self.r.primary_key
        columns = [self.r.schema.column(c) for c in pk]
        keys, rows = self.c.src.shared_keys(self.name, columns, self.where)
        if keys:
            self.check.add(vr.SHARED_KEY, f"({plural(keys, 'key')})", None,
                           plural(keys + rows, "row"), plural(keys, "row key"), n=rows)  # fmt: skip
            if self.check.redis_rows is not None:
                self.check.redis_rows -= rows  # rows found under a key another row overwrote
            self.check.notes.append(
                f"{plural(keys, 'duplicate key')}: the declared primary_key {list(pk)} is not "
                f"unique in MySQL (rows beyond one per key, not in Redis as they are: {rows}); "
                f"list the keys with: {shared_keys_query(self.name, pk)}"
            )

    def shared_uniques(self) -> None:
        """Values of a ``unique:`` MySQL does not enforce that several rows hold: Redis holds
        one entry per value, so each row beyond the first is a difference (counted like rows
        sharing a primary key), with the SQL that lists the rows."""
        for v in self.shared_values:
            label, cols = f"({plural(v.values, 'value')})", ", ".join(v.columns)
            mysql, redis = plural(v.values + v.rows, "row"), plural(v.values, "entry")
            self.check.add(vr.SHARED_UNIQUE, label, cols, mysql, redis, n=v.rows)
            self.check.notes.append(
                f"unique {', '.join(v.columns)}: {plural(v.values, 'value')} held by several "
                f"rows (MySQL does not enforce it; each entry names one of them, rows beyond "
                f"one per value: {v.rows}); list the rows with: {v.sql}"
            )

    def _live_rows(self) -> int:
        """The rows Redis should hold: under a fixed ttl, less those the schedule says are
        past it (verify/expiry.py: ``expired_rows``)."""
        n = self.c.src.count(self.name, self.live)
        if self.expiry is not None:
            n -= self.expiry.expired_rows()
        return n

    def counts_only(self) -> None:
        self.check.mysql_rows = self._live_rows()
        self.check.notes.append("values and structures not compared (--counts-only)")

    def row_counts(self, lookup: bool) -> None:
        """Row keys in Redis (by SCAN) against the source's row count."""
        if self.plan.table.kind not in ("hash", *DOCUMENTS):
            return
        found = 0
        scanned = scan_space(self.c.reader.client, self.c.space, [self.name])
        for page in self.c.space.owned(scanned, [self.name]):
            found += sum(1 for _, _, p in page if p is not None and p.what in ROW_KEYS)
        self.check.redis_rows = found
        rows = self.check.mysql_rows
        if found < rows:
            self.check.add(vr.MISSING_ROW, f"({rows - found} rows)", None, f"{rows} rows",
                           f"{found} row keys", n=rows - found)  # fmt: skip
        elif found > rows:
            if lookup:
                self.lookup_rows()
            else:
                self.check.add(vr.STALE, f"({found - rows} row keys)", None, f"{rows} rows",
                               f"{found} row keys", n=found - rows)  # fmt: skip

    def finish(self) -> None:
        """Counters and latest lists, as migrate rebuilds them at the end of a table."""
        strings: list[Command] = []
        lists: dict[bytes, list[bytes]] = {}
        for cmd in finish_commands(self.c.src, self.plan, self.r, self.live):
            if cmd[0] == b"SET":
                strings.append(cmd)
            elif cmd[0] == b"DEL":
                lists[cmd[1]] = []
            elif cmd[0] == b"RPUSH":
                lists[cmd[1]] = list(cmd[2:])
        reads = [(b"GET", c[1]) for c in strings] + [(b"LRANGE", k, b"0", b"-1") for k in lists]
        replies = self.c.reader.read(reads)
        for cmd, got in zip(strings, replies):
            self.expected_keys.add(cmd[1])
            self.keyed_present += got is not None
            if isinstance(got, Exception) or not counter_holds(got, cmd[2]):
                # the rule (plan/finish.py): at least MAX(pk); --fix sets MAX(pk)
                redis = str(got) if isinstance(got, Exception) else got
                self.found(vr.WRONG_COUNTER, cmd[1], None, b">= " + cmd[2], redis, [cmd])
        for (key, want), got in zip(lists.items(), replies[len(strings) :]):
            if want:
                self.expected_keys.add(key)
            self.keyed_present += bool(got) and not isinstance(got, Exception)
            if isinstance(got, Exception) or list(got) != want:
                have = [] if isinstance(got, Exception) else list(got)
                what = "order" if sorted(have) == sorted(want) else "members"
                rebuild = [(b"MULTI",), (b"DEL", key)]
                rebuild += [(b"RPUSH", key, *want)] if want else []
                rebuild.append((b"EXEC",))
                self.found(vr.WRONG_LATEST, key, what, _show(want), _show(have), rebuild)

    def stray(self, key: bytes, why: str) -> None:
        """A key in the table's key space that no source row produces."""
        self.found(vr.STALE, key, None, None, why, [(b"UNLINK", key)])

    def lookup_rows(self) -> None:
        """Look each per-row key of the table up in the source, a chunk at a time, and
        report those that no source row plans (memory stays flat)."""
        chunk: list[bytes] = []
        self.c.progress.note(self.name, "more row keys than rows: looking each up in MySQL")
        scanned = scan_space(self.c.reader.client, self.c.space, [self.name])
        for page in self.c.space.owned(scanned, [self.name]):
            chunk += [k for k, _, p in page if p is not None and p.family == "row"]
            while len(chunk) >= LOOKUP_CHUNK:
                self._explain(chunk[:LOOKUP_CHUNK])
                chunk = chunk[LOOKUP_CHUNK:]
        self._explain(chunk)

    def _explain(self, keys: list[bytes]) -> None:
        """Report the per-row keys that no row of the source plans."""
        if not keys:
            return
        produced: set[bytes] = set()
        row_structures = [s for n, s in self.structures.items()
                          if n in ("hash", "columns", "document", "unique-string")]  # fmt: skip
        if self.whole_documents is not None:  # nested documents: their keys all the same
            row_structures.append(self.whole_documents)
        own: list[KeyPattern] = [
            p for p in self.c.space.all if p.table == self.name and p.family == "row"
        ]
        for p in own:
            cols = p.template.columns
            kinds = [self.r.schema.column(c).kind for c in cols]
            values = set()
            for key in keys:
                got = self.c.space.invert(p, key)
                if got is not None:
                    v = params([got[c] for c in cols], kinds)
                    if v is not None:
                        values.add(v)
            if not values:
                continue
            ordered = sorted(values, key=repr)
            rows = self.c.src.rows_where(self.name, self.selector, cols, ordered, self.where)
            for s in row_structures:
                produced.update(c[1] for c in run_structure(s, rows).commands)
        for key in dict.fromkeys(keys):
            if key not in produced:
                self.stray(key, "(no source row has this key)")


def _nested_in(plan: TablePlan, parent: str) -> bool:
    return plan.table.nest is not None and plan.table.nest.parent == parent


#: the structures whose keys are one per row, counted against the source's rows
ROW_KEYS = ("hash", "document")


def _show(items: list[bytes], limit: int = 10) -> str:
    shown = " ".join(x.decode("utf-8", "replace") for x in items[:limit])
    return shown + (f" … ({len(items)} in all)" if len(items) > limit else "")
