"""``migrator dry-run``: what ``migrate`` would write, without touching Redis.

It reads and plans each table as migrate does (the same keyset batches, the same planner,
the same end-of-table counter and latest-list commands, ``plan.finish.finish_commands``) into a
``PlanSink`` that counts the keys each structure creates and sizes them (estimate.py). With
``--resp FILE`` each batch is packed by ``TablePlan.pack``, migrate's own hot path, so the file
holds exactly the bytes migrate sends. No Redis connection is ever opened, so it works with
no Redis reachable.

The RESP export holds exactly the data migrate writes, without migrate's run state
(``migrator:<mapping>:checkpoint``): the file is a complete load, not a resumable run.
It is written to a temporary file next to FILE and renamed over it only when every table
succeeded, so a failed run leaves no half-written export behind.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from migrator.commands.dryrun_notes import expiry_note, stream_note
from migrator.commands.dryrun_sink import PlanSink
from migrator.commands.nested import every_table, nesting_trees, side_memory
from migrator.commands.session import check_batch_size, load, target_url
from migrator.commands.shards import opened_any, shard_lines
from migrator.errors import EXIT_DIFFERENCE, EXIT_OK, MigratorError, docs
from migrator.mapping.resolve import Resolved
from migrator.plan.estimate import Limits, keyspace
from migrator.plan.finish import finish_commands
from migrator.plan.nesting import Groups, Level
from migrator.plan.nesting import commands as nested_commands
from migrator.plan.nesting_side import side_commands
from migrator.plan.planner import Command, Stats, TablePlan
from migrator.plan.resp import resp
from migrator.plan.search import DATABASE_FIX, database_of, definitions, wrong_database
from migrator.plan.stream import snapshot_entries
from migrator.progress import NULL_PROGRESS, Progress
from migrator.source.mysql import Source
from migrator.source.nesting import children
from migrator.source.shard_nesting import one_source
from migrator.source.snapshot import Snapshot
from migrator.source.where import clause, read_clause
from migrator.store.cluster import SCHEMES
from migrator.urls import mask

_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t",
            "\a": "\\a", "\b": "\\b"}  # fmt: skip


def quote(arg: bytes) -> str:
    """One argument as redis-cli reads it: bare when it is printable text without blanks or
    quotes, else quoted. UTF-8 text stays text; control and invisible characters and bytes
    that are not UTF-8 are escaped (``\\n``, ``\\xff``)."""
    text = arg.decode("utf-8", "surrogateescape")
    if text and all(c.isprintable() and c not in " \"'" for c in text):
        return text
    out = []
    for c in text:
        if c in _ESCAPES:
            out.append(_ESCAPES[c])
        elif c.isprintable():
            out.append(c)
        else:
            out.extend(f"\\x{b:02x}" for b in c.encode("utf-8", "surrogateescape"))
    return '"' + "".join(out) + '"'


def command_line(command: Command) -> str:
    """``HSET emp:1 ename SMITH mgr_id 8``: a command as a redis-cli input line."""
    return " ".join(quote(a) for a in command)


@dataclass
class TableDryRun:
    table: str
    rows: int = 0
    patterns: dict[str, list[str]] = field(default_factory=dict)
    keys: dict[str, int] = field(default_factory=dict)  # structure -> keys it creates
    memory: dict[str, int] = field(default_factory=dict)  # structure -> estimated bytes
    sample: list[str] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)
    rejected: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    duplicate_keys: int = 0  # a declared primary_key MySQL does not keep unique: shared keys
    duplicate_rows: int = 0  # and the rows beyond one per such key, which would be overwritten
    readers: dict[str, int] = field(default_factory=dict)  # rows per driver that read them
    where: str | None = None  # the table's row filter, as written
    filtered_out: int = 0  # rows of the table the filter leaves out (not planned)
    #: expire: which keys get which TTL (None: the table has no expiry), and the rows
    #: already past it (not planned)
    expire: str | None = None
    expired: int = 0
    search: str | None = None  # the FT.CREATE migrate sends for the table's search index
    #: the change stream's entry for an insert of the first row, and its bytes (streams:)
    stream: str | None = None
    stream_entry_bytes: int = 0
    #: the first load's snapshot entry of the first row (streams: {snapshot: true}), else None
    stream_snapshot: str | None = None
    #: why sync would refuse the stream on this target (a Redis Cluster), else None
    stream_refused: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "rows": self.rows,
            "patterns": self.patterns,
            "keys": self.keys,
            "memory_bytes": self.memory,
            "sample": self.sample,
            "stream": self.stream,
            "stream_entry_bytes": self.stream_entry_bytes,
            "stream_snapshot": self.stream_snapshot,
            "stream_refused": self.stream_refused,
            "skipped": self.skipped,
            "rejected": self.rejected,
            "seconds": round(self.seconds, 3),
            "duplicate_keys": self.duplicate_keys,
            "duplicate_rows": self.duplicate_rows,
            "readers": self.readers,
            "where": self.where,
            "search": self.search,
            "filtered_out": self.filtered_out,
            "expire": self.expire,
            "expired": self.expired,
        }


@dataclass
class DryRunReport:
    mapping: str
    source: str
    target: str  # where migrate would write; never contacted
    tables: list[TableDryRun]
    resp_file: str | None = None
    resp_bytes: int = 0
    commands: int = 0
    keyspace_bytes: int = 0  # the main dict's bucket array, for all keys together
    seconds: float = 0.0
    snapshot: Snapshot | None = None  # the moment of the source every table was read at
    shards: list[str] = field(default_factory=list)  # a sharded source: a line per shard

    @property
    def keys(self) -> int:
        return sum(sum(t.keys.values()) for t in self.tables)

    @property
    def memory(self) -> int:
        return sum(sum(t.memory.values()) for t in self.tables) + self.keyspace_bytes

    @property
    def rejected(self) -> int:
        """Rows migrate would not write (a separator inside a composite's value under
        ``escape: reject``, a NULL in a row-key column)."""
        return sum(sum(t.rejected.values()) for t in self.tables)

    @property
    def exit_code(self) -> int:
        return EXIT_DIFFERENCE if self.rejected else EXIT_OK

    def as_dict(self) -> dict[str, Any]:
        return {
            "mapping": self.mapping,
            "source": self.source,
            "target": self.target,
            "rows": sum(t.rows for t in self.tables),
            "keys": self.keys,
            "memory_bytes": self.memory,
            "commands": self.commands,
            "resp_file": self.resp_file,
            "resp_bytes": self.resp_bytes,
            "seconds": round(self.seconds, 3),
            "snapshot": self.snapshot.as_dict() if self.snapshot is not None else None,
            "rejected": self.rejected,
            "tables": [t.as_dict() for t in self.tables],
            "shards": self.shards,
        }


CLUSTER_STREAMS = (
    "sync refuses change streams on a Redis Cluster: the entries, the rows and the position "
    f"would not share one MULTI/EXEC ({docs('sync.md#change-streams')})"
)


def dry_run(
    mapping: Any,
    *,
    source: str | None = None,
    target: str | None = None,
    tables: list[str] | None = None,
    sample: int = 3,
    resp_file: str | os.PathLike[str] | None = None,
    batch_size: int | None = None,
    limits: Limits | None = None,
    progress: Progress = NULL_PROGRESS,
) -> DryRunReport:
    """What migrate would do: per table the key patterns, rows, keys per structure, the
    commands for the first ``sample`` rows and the estimated memory; optionally the whole
    load as RESP in ``resp_file``. Never connects to Redis. Raises MigratorError."""
    if sample < 0:
        raise MigratorError(
            f"--sample must be 0 or a positive number of rows, not {sample}",
            "give the rows per table whose commands to show, e.g. --sample 3 (0: none)",
        )
    check_batch_size(batch_size)
    m = load(mapping)
    size = batch_size or m.options.batch_size
    limits = limits or Limits()
    started = time.perf_counter()
    with opened_any(m, source, tables) as (src, resolved), _atomic(resp_file) as out:
        tops = nesting_trees(m, src, resolved)
        searches = {i.table: i for i in definitions(resolved, m, every_table(m, src, resolved))}
        wrong = wrong_database(database_of(target_url(m, target)), list(searches))
        if wrong:  # migrate would write every key, then fail to create the index
            raise MigratorError(f"{wrong}: migrate would refuse it", DATABASE_FIX)
        if tops and resp_file is not None:
            raise MigratorError(
                f"--resp cannot yet write nested documents (nest: into {', '.join(tops)})",
                "load them with migrate, or drop --resp to see the documents' samples",
            )
        snapshot = src.snapshot()  # every table as of one moment, as migrate reads them
        cluster = target_url(m, target).split("://", 1)[0].lower() in SCHEMES
        reports = []
        commands = resp_bytes = 0
        for r in resolved:
            t0 = time.perf_counter()
            plan = TablePlan(r)
            sink = PlanSink(plan, out, limits)
            done = plan_table(src, plan, r, size, sink, progress, snapshot)
            report = TableDryRun(
                r.name,
                rows=done.rows,
                patterns=plan.patterns()
                | (
                    {"stream": [r.table.streams.key]}
                    if "stream" in sink.models and r.table.streams is not None
                    else {}
                ),
                keys={k: v.keys for k, v in sink.models.items()},
                memory={k: v.bytes for k, v in sink.models.items()},
                sample=[command_line(c) for c in _sample(src, plan, r, sample, tops)],
                skipped=dict(done.skipped),
                rejected=dict(done.rejected),
                seconds=time.perf_counter() - t0,
                readers=dict(done.readers),
            )
            if r.name in tops:  # the rows kept beside its documents, for sync
                report.keys["nest"], report.memory["nest"] = side_memory(
                    src, tops[r.name], size, limits
                )
            kept = done.rows
            if plan.expiry is not None:
                report.expire, report.expired = expiry_note(src, plan, done.rows)
                kept += report.expired
            index = searches.get(r.name)
            if index is not None:
                report.search = command_line(tuple(a.encode() for a in index.command()))
            if r.table.streams is not None:
                entry, report.stream_entry_bytes, snap = stream_note(src, plan)
                report.stream = command_line(entry)
                report.stream_snapshot = None if snap is None else command_line(snap)
                if cluster:  # (a redis:// URL may name a cluster node too: sync says so then)
                    report.stream_refused = CLUSTER_STREAMS
            if r.table.where is not None:  # the rows planned are those the filter keeps
                report.where = r.table.where.text
                report.filtered_out = src.count(r.name) - kept
            if r.trusts_declared_key:
                pk = [r.schema.column(c) for c in r.primary_key]
                report.duplicate_keys, report.duplicate_rows = src.shared_keys(
                    r.name, pk, clause(r)
                )
                if "hash" in report.keys:  # an overwritten hash is no key of its own
                    report.keys["hash"] -= report.duplicate_rows
            reports.append(report)
            commands += sink.commands
            resp_bytes += sink.bytes
        result = DryRunReport(
            mapping=m.file or m.name,
            source=src.shown_url,
            target=mask(target_url(m, target)),
            tables=reports,
            resp_file=str(resp_file) if resp_file is not None else None,
            resp_bytes=resp_bytes,
            commands=commands,
            snapshot=snapshot,
            shards=shard_lines(src, resolved),
        )
    result.keyspace_bytes = keyspace(result.keys)
    result.seconds = time.perf_counter() - started
    return result


def _sample(
    src: Source, plan: TablePlan, r: Resolved, n: int, tops: dict[str, Level]
) -> list[Command]:
    """The commands of the first ``n`` rows; a top table's documents with their children
    nested (commands/nested.py) in the place of its flat ones, then the rows kept beside
    them (plan/nesting_side.py)."""
    cmds = sample_commands(src, plan, r, n)
    top = tops.get(r.name)
    if top is None or n == 0:
        return cmds
    rows = src.page(r.name, src.selector(r.name, plan.row_names), r.primary_key, n, None, clause(r))
    groups: Groups = {}
    children(one_source(src), top, rows, groups)  # (a union's sample: its first shard's)
    whole = {c[1]: c for c in nested_commands(top, rows, groups)}
    cmds = [whole.get(c[1], c) if c[0] in (b"SET", b"JSON.SET") else c for c in cmds]
    return cmds + side_commands(top, rows, groups)  # the rows kept beside them, for sync


def plan_table(
    src: Source,
    plan: TablePlan,
    r: Resolved,
    batch_size: int,
    sink: PlanSink,
    progress: Progress,
    snapshot: Snapshot | None = None,
) -> Stats:
    """One table read and planned as migrate does it: each batch planned as commands (to
    count and size them) and, for the RESP file, packed by ``TablePlan.pack``, with the
    stream's snapshot entries when it takes them (as of ``snapshot``'s position); then the
    counter and latest lists."""
    progress.start(r.name, r.schema.row_estimate or None)
    selector = src.selector(r.name, plan.row_names)
    total = Stats()
    entries = snapshot_entries(plan)
    if entries is not None:  # (without a position, which migrate refuses: a made-up one)
        s = snapshot or Snapshot("1970-01-01 00:00:00")
        entries.at(s.binlog_file or "binlog.000001", s.binlog_position or 4, s.gtid, s.moment)
        truncate = [entries.truncate()]
        sink.write(truncate, None if sink.out is None else resp(truncate))
    for rows in src.batches(r.name, selector, r.primary_key, batch_size, where=read_clause(r)):
        commands, stats = plan.plan(rows)
        packed = plan.pack(rows)[0] if sink.out is not None else None
        if entries is not None:
            snapped = entries.of(plan.written(rows))
            commands += snapped
            packed = None if packed is None else packed + resp(snapped)
        sink.write(commands, packed)
        total.add(stats)
        total.readers[src.reader] += len(rows)
        progress.advance(r.name, len(rows))
    sink.write(finish_commands(src, plan, r, clause(r)))
    progress.finish(r.name)
    return total


def sample_commands(src: Source, plan: TablePlan, resolved: Resolved, n: int) -> list[Command]:
    """The commands of the first ``n`` rows by primary key, then the end-of-table ones."""
    if n == 0:
        return []
    selector = src.selector(resolved.name, plan.row_names)
    pages = src.batches(
        resolved.name, selector, resolved.primary_key, n, page_size=n, where=read_clause(resolved)
    )
    rows = next(pages, [])
    pages.close()  # the unbuffered read ends before finish_commands asks the source again
    commands, _ = plan.plan(rows)
    return commands + finish_commands(src, plan, resolved, clause(resolved))


@contextmanager
def _atomic(path: str | os.PathLike[str] | None) -> Iterator[IO[bytes] | None]:
    """A temporary file beside ``path``, renamed over it only if the block succeeds."""
    if path is None:
        yield None
        return
    target = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as e:
        raise MigratorError(
            f"cannot write the RESP file {target}: {e.strerror}",
            "check that its directory exists and is writable",
        ) from None
    try:
        with os.fdopen(fd, "wb", buffering=1 << 20) as out:
            yield out
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
