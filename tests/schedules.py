"""Randomized fault schedules (issue 17 item 8), Jepsen-style, on servers the test starts.

A schedule is one seed and one command (``migrate`` — with one or two workers, sometimes
``--replace`` over an older load —, ``replace``: ``migrate --replace`` over an older load
killed -9 in its first second, before it could write (issue 27 item 1), ``verify --fix``,
``sync``, or ``sync-restart``: ``sync`` whose first fault is a MySQL restart during its
online first load, which it must ride out (no exit 3: issue 27 item 3), or ``sync-shutdown``:
``sync`` whose one fault is a clean MySQL shutdown (SIGTERM, started again a second later)
while it follows, which it must ride out (before issue 35 item 1 MySQL 9.7 ended it with exit
0, "end of log"), or ``sync-redis-stop``: ``sync`` sent SIGTERM as Redis comes back from
its AOF (before issue 35 item 2: exit 1, an IndexError reading an empty load queue)), run as
the CLI on a
private ``mariadbd`` or MySQL 9.7 (row binary log) and a private ``redis-server`` (AOF), while
a writer thread inserts, updates and deletes rows. From the seed come the table's size and a
random sequence of faults at random moments, each one of ``FAULTS``: ``kill -9`` of the
command, Redis restarted empty or from its AOF, Redis paused (SIGSTOP ... SIGCONT), Redis'
client connections killed, MySQL ``KILL`` of every connection, MySQL restarted (SIGTERM or
``kill -9``). A command that ends before the schedule does is started again as its docs
say (``migrate --resume``, with ``--replace`` for a replace as its hint says, ``verify
--fix`` again, ``sync`` again: what an operator or a supervisor does). Then the writes stop,
and the documented recovery runs:

* ``migrate``: ``migrate --resume`` (exit 0) unless its last run finished (a ``--resume`` then
  has nothing left to resume and refuses), then ``verify --fix`` until it says Redis matches
  (docs/consistency.md: "ends at exit 0 once the source is quiet for one run");
* ``verify --fix``: the same ``verify --fix`` until exit 0;
* ``sync``: ``sync --until-caught-up`` (exit 0; docs/sync.md's cut-over step 3).

Before ``verify --fix`` (which would repair it), a ``--replace``'s load is checked for the row
keys of the rows deleted before it began: a finished replace left none.

Finally an **independent comparison**: MySQL's rows, read with PyMySQL, against Redis read
key by key — row hashes, the unique hash, the index sets, the counter (never below the
highest id: the next ``INCR`` must not hand out an id in use), and no other key under the
table's prefix. migrator's own ``verify`` takes no part in it.

The schedule (faults, moments, table size, writes) replays from its seed; the servers' own
timing does not, so a replay meets the same faults at nearly the same points.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pymysql

from tests.binlog_server import PrivateMariaDB
from tests.faults import RedisProcess
from tests.mysql_server import PrivateMySQL
from tests.schedule_own import (
    LEAD,
    LOAD_AGAIN,
    early_signal,
    fill_redis,
    lead_table,
    own_base,
    redis_full,
    swap_in_load,
)

MAPPING = """\
version: 1
options:
  batch_size: 50
  retries: {attempts: 8, backoff: 0.2, max_backoff: 2}
tables:
  item:
    unique: [code]
    indexes: [grp]
"""
SCHEMA = (
    "CREATE TABLE item (id INT AUTO_INCREMENT PRIMARY KEY, name VARCHAR(40) NOT NULL, grp INT,"
    " code VARCHAR(40), UNIQUE KEY (code), KEY (grp))"
)
#: ``replace`` schedules map a second table too, one nobody writes: its checkpoint stays
#: trusted, so a --resume that skipped the removal is not saved by reloading from scratch
STATIC = "  tag: {}\n"
STATIC_SCHEMA = (
    "CREATE TABLE tag (id INT PRIMARY KEY, name VARCHAR(20))",
    "INSERT INTO tag VALUES (1, 'red'), (2, 'green')",
)
DATABASE = "sched"
FAULTS = (
    "kill -9", "redis restart empty", "redis restart from aof", "redis pause",
    "redis client kill", "mysql kill", "mysql restart",
)  # fmt: skip
RUN_SECONDS = 240.0  # any one command, at most
STARTUP_SECONDS = 3.0  # before a run is sent SIGTERM (see Command.stop)


@dataclass
class Servers:
    mysql: PrivateMariaDB | PrivateMySQL
    redis: RedisProcess

    @property
    def source(self) -> str:
        return f"{self.mysql.url}/{DATABASE}"

    def sql(self, *statements: str, database: str | None = DATABASE) -> list[Any]:
        conn = self.mysql.connect(database)
        try:
            with conn.cursor() as cur:
                for s in statements:
                    cur.execute(s)
                return list(cur.fetchall())
        finally:
            conn.close()


# -- the writes ----------------------------------------------------------------------------------
class Writer(threading.Thread):
    """Random single-statement writes on ``item`` from a seed until ``stop``; a lost or
    refused connection (the faults) is opened again after a short pause."""

    def __init__(self, servers: Servers, seed: int) -> None:
        super().__init__(name="schedule-writer", daemon=True)
        self.servers, self.rng, self.seed = servers, random.Random(seed), seed
        self.stop = threading.Event()
        self.hold = threading.Lock()  # held by a swap: gh-ost's cut-over holds the writes
        self.done = self.failed = 0
        self.n = 0
        self.top = int(servers.sql("SELECT COALESCE(MAX(id), 0) FROM item")[0][0])

    def _code(self) -> str | None:
        self.n += 1
        return None if self.rng.random() < 0.1 else f"c{self.seed}-{self.n}"

    def run(self) -> None:
        conn: Any = None
        while not self.stop.is_set():
            try:
                if conn is None:
                    conn = pymysql.connect(host="127.0.0.1", port=self.servers.mysql.port,
                                           user="root", database=DATABASE, autocommit=True,
                                           connect_timeout=2, read_timeout=10)  # fmt: skip
                with self.hold, conn.cursor() as cur:
                    self._one(cur)
                self.done += 1
                time.sleep(0.01)
            except pymysql.MySQLError:
                self.failed += 1
                if conn is not None:
                    try:
                        conn.close()
                    except Exception:  # already gone
                        pass
                conn = None
                self.stop.wait(0.2)
        if conn is not None:
            conn.close()

    def _one(self, cur: Any) -> None:
        r = self.rng
        op = r.choice(["insert", "update", "update", "grp", "code", "delete"])
        victim = r.randint(1, max(1, self.top))
        if op == "insert":
            cur.execute("INSERT INTO item (name, grp, code) VALUES (%s, %s, %s)",
                        (f"new {self.n}", r.choice([None, *range(20)]), self._code()))  # fmt: skip
            self.top = max(self.top, int(cur.lastrowid or 0))
        elif op == "update":
            cur.execute("UPDATE item SET name = %s WHERE id = %s", (f"upd {self.n}", victim))
        elif op == "grp":
            cur.execute("UPDATE item SET grp = %s WHERE id = %s",
                        (r.choice([None, *range(20)]), victim))  # fmt: skip
        elif op == "code":
            cur.execute("UPDATE item SET code = %s WHERE id = %s", (self._code(), victim))
        else:
            cur.execute("DELETE FROM item WHERE id = %s", (victim,))


# -- the command under test ----------------------------------------------------------------------
@dataclass
class Command:
    """``kind`` run as the CLI; each run's arguments, exit code and stderr are kept."""

    kind: str  # migrate | replace | verify | sync
    servers: Servers
    mapping: Path
    workers: int = 1
    replace: bool = False  # migrate's first run with --replace
    extra: list[str] = field(default_factory=list)  # sync's own options (--consistent-load)
    proc: subprocess.Popen[str] | None = None
    err: Any = None  # the run's stderr: a temporary file
    runs: list[tuple[str, int | None, str]] = field(default_factory=list)
    started: float = 0.0
    asked: bool = False  # the run in hand was stopped by the schedule (SIGTERM, kill -9)
    unasked: list[str] = field(default_factory=list)  # sync runs that ended 0 by themselves
    loads_again: int = 0  # runs whose consistent first load started again (a swap met it)

    def argv(self, again: bool) -> list[str]:
        base = [str(self.mapping), "--source", self.servers.source, "--target",
                self.servers.redis.url]  # fmt: skip
        if self.kind in ("migrate", "replace"):
            extra = ["--workers", str(self.workers)]
            extra += ["--replace"] if self.replace else []
            extra += ["--resume"] if again else []
            return ["migrate", *base, *extra]
        if self.kind == "verify":
            return ["verify", *base, "--fix"]
        return ["sync", *base, *self.extra]

    def start(self, again: bool) -> None:
        args = self.argv(again)
        self.runs.append((" ".join(args[:1] + args[6:]), None, ""))
        self.started, self.asked = time.monotonic(), False
        # stderr to a file, not a pipe read at the end: sync's log lines could fill a pipe
        self.err = tempfile.TemporaryFile("w+")  # noqa: SIM115 (closed by collect)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "migrator", *args], stdout=subprocess.DEVNULL,
            stderr=self.err, text=True, start_new_session=True, env=_env(),
        )  # fmt: skip

    def ended(self) -> bool:
        return self.proc is not None and self.proc.poll() is not None

    def collect(self, timeout: float = RUN_SECONDS) -> int:
        """Wait for the running command; record its exit code and stderr."""
        assert self.proc is not None
        killed = ""
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            killed = f"\n[schedule: killed after {timeout:.0f}s]"
        self.err.seek(0)
        err = self.err.read() + killed
        self.err.close()
        code = self.proc.returncode
        what = self.runs[-1][0]
        self.loads_again += LOAD_AGAIN in err
        if self.kind == "sync" and code == 0 and not self.asked:  # sync ends 0 only if asked
            self.unasked.append(f"{what} ended by itself with exit 0 (a stop nobody asked for)")
        self.runs[-1] = (what, code, err[-1500:])
        self.proc = None
        return int(code)

    def kill9(self) -> None:
        self.asked = True
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)  # its workers too, as a shell's kill would
        if self.proc is not None:
            self.collect(30)

    def stop(self) -> None:
        """End the run in hand: sync is stopped (SIGTERM, as a service manager does); the
        others are waited for. A SIGTERM in a process's first seconds, before the CLI has set
        its handler (the interpreter still importing), ends it by the signal: sync is given
        STARTUP_SECONDS first."""
        if self.proc is None:
            return
        if self.kind == "sync" and self.proc.poll() is None:
            time.sleep(max(0.0, self.started + STARTUP_SECONDS - time.monotonic()))
            self.asked = True
            self.proc.send_signal(signal.SIGTERM)
        self.collect()


def loading(servers: Servers, timeout: float = 120.0) -> None:
    """Wait until sync's online first load has begun: its state holds the load's plan."""
    client = servers.redis.client()
    try:
        deadline = time.monotonic() + timeout
        while not json.loads(client.hget("migrator:sched:sync", "snapshot") or "[]"):
            assert time.monotonic() < deadline, "sync's first load did not begin"
            time.sleep(0.05)
    finally:
        client.close()


def following(servers: Servers, timeout: float = 120.0) -> None:
    """Wait until sync follows the log: its state holds a position, and no load plan."""
    client = servers.redis.client()
    try:
        deadline = time.monotonic() + timeout
        while not client.hget("migrator:sched:sync", "file") or json.loads(
            client.hget("migrator:sched:sync", "snapshot") or "[]"
        ):
            assert time.monotonic() < deadline, "sync did not reach the following phase"
            time.sleep(0.05)
    finally:
        client.close()


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MIGRATOR_") or "TEST" in k}
    return {**env, "COLUMNS": "200"}


def cli(*args: str) -> tuple[int, str]:
    done = subprocess.run([sys.executable, "-m", "migrator", *args], capture_output=True,
                          text=True, timeout=RUN_SECONDS, env=_env())  # fmt: skip
    return done.returncode, done.stderr[-1500:]


# -- faults --------------------------------------------------------------------------------------
def inject(fault: str, rng: random.Random, servers: Servers, command: Command) -> None:
    redis, mysql = servers.redis, servers.mysql
    if fault == "kill -9":
        command.kill9()
    elif fault == "redis restart empty":
        redis.restart(rng.uniform(0.1, 1.5), kill=rng.random() < 0.5, empty=True)
    elif fault == "redis restart from aof":
        redis.restart(rng.uniform(0.1, 1.5), kill=rng.random() < 0.5)
    elif fault == "redis pause":
        assert redis.proc is not None
        redis.proc.send_signal(signal.SIGSTOP)
        time.sleep(rng.uniform(0.5, 3.0))
        redis.proc.send_signal(signal.SIGCONT)
    elif fault == "redis client kill":
        client = redis.client()
        try:
            client.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
        finally:
            client.close()
    elif fault == "mysql kill":
        ids = servers.sql("SELECT ID FROM information_schema.PROCESSLIST WHERE USER = 'root' "
                          "AND ID <> CONNECTION_ID()", database=None)  # fmt: skip
        for (i,) in ids:
            try:
                servers.sql(f"KILL {int(i)}", database=None)
            except pymysql.MySQLError:  # gone meanwhile
                pass
    elif fault == "mysql restart":
        mysql.halt(kill=rng.random() < 0.5)
        time.sleep(rng.uniform(0.1, 1.0))
        mysql.start()
    else:
        raise AssertionError(f"unknown fault {fault!r}")


# -- a schedule ----------------------------------------------------------------------------------
@dataclass
class Outcome:
    seed: int
    kind: str
    rows: int
    events: list[str] = field(default_factory=list)
    runs: list[tuple[str, int | None, str]] = field(default_factory=list)
    recovery: list[tuple[str, int, str]] = field(default_factory=list)
    differences: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def report(self) -> str:
        lines = [f"schedule seed={self.seed} command={self.kind} rows={self.rows}", "events:"]
        lines += [f"  {e}" for e in self.events]
        lines += ["runs:"] + [f"  {w} -> {c}" + (f": {e.strip()[-400:]}" if c else "")
                              for w, c, e in self.runs]  # fmt: skip
        lines += ["recovery:"] + [f"  {w} -> {c}" + (f": {e.strip()[-400:]}" if c else "")
                                  for w, c, e in self.recovery]  # fmt: skip
        lines += [f"problem: {p}" for p in self.problems]
        lines += [f"difference: {d}" for d in self.differences[:20]]
        lines.append(
            f"replay: MIGRATOR_FAULT_SEEDS={self.kind}:{self.seed} .venv/bin/pytest "
            "tests/test_fault_schedules.py -k replay"
        )
        return "\n".join(lines)


#: exit codes a run may end with while faults go on (anything else is a bug in itself)
ALLOWED = {
    "migrate": {0, 3, -9}, "replace": {0, 3, -9}, "verify": {0, 1, 3, -9},
    "sync": {0, 3, -9, 130}, "sync-restart": {0, -9, 130}, "sync-shutdown": {0},
    "sync-redis-stop": {0}, "verify-oom": {4},
    "sync-load-swap": {0, 3, 130},
}  # fmt: skip
#: how long a ``replace`` schedule's first run lives before its kill -9 (its imports take
#: longer: it has written nothing)
EARLY_SECONDS = (0.05, 0.6)
#: when a ``sync-restart`` schedule restarts MySQL, once the first load has stored its plan
#: (it then reads 8,000-20,000 rows online in a few seconds)
RESTART_SECONDS = (0.0, 0.5)


#: sync with one fault of its own (see the module docstring)
SYNC_KINDS = ("sync-restart", "sync-shutdown", "sync-redis-stop", "sync-load-swap")
#: a command with one fault of its own (tests/schedule_own.py)
OWN_KINDS = ("early-signal", "verify-oom")


def run_schedule(seed: int, kind: str, servers: Servers, tmp: Path) -> Outcome:
    rng = random.Random(seed)
    rows = rng.randint(8_000, 20_000)
    out = Outcome(seed, kind, rows)
    t0 = time.monotonic()

    def event(text: str) -> None:
        out.events.append(f"{time.monotonic() - t0:6.2f}s {text}")

    prepare(servers, rows)
    mapping = tmp / "sched.yaml"
    text = MAPPING + STATIC * (kind == "replace")
    if kind in SYNC_KINDS:  # retries enough for a restart on a busy machine (~60 s)
        text = text.replace("attempts: 8", "attempts: 35")
    if kind == "sync-load-swap":  # a table the consistent load reads before item
        text = text.replace("tables:\n", "tables:\n" + LEAD)
        lead_table(servers)
    mapping.write_text(text)
    if kind == "replace":
        servers.sql(*STATIC_SCHEMA)
    base = "sync" if kind in SYNC_KINDS else own_base(kind, seed)
    command = Command(base, servers, mapping, workers=rng.choice([1, 1, 2]))
    command.extra = ["--consistent-load"] if kind == "sync-load-swap" else []
    # drawn apart from the faults' stream, so that adding a variant keeps each seed's faults
    command.replace = kind == "replace" or (
        kind == "migrate" and random.Random(f"{seed}-replace").random() < 0.4
    )
    if base == "verify" or command.replace:  # an earlier load to repair or to replace
        code, err = cli(*Command("migrate", servers, mapping).argv(False))
        assert code == 0, err
        servers.sql("DELETE FROM item WHERE id % 5 = 0")  # rows whose keys become stale
    writer = Writer(servers, seed)
    writer.start()
    try:
        if kind == "verify-oom":  # Redis at its maxmemory before verify --fix starts
            fill_redis(servers, event)
        command.start(again=False)
        event(f"start {command.runs[-1][0]}")
        if kind == "verify-oom":
            out.problems += redis_full(servers, command, event)
        if kind == "replace":  # stopped before it could write: only the older load's checkpoint
            time.sleep(random.Random(f"{seed}-early").uniform(*EARLY_SECONDS))
            command.kill9()
            event("kill -9 in its first second")
        if kind == "sync-restart":  # MySQL restarted while the first load reads online
            loading(servers)
            time.sleep(random.Random(f"{seed}-restart").uniform(*RESTART_SECONDS))
            event("mysql restart (in the first load)")
            inject("mysql restart", rng, servers, command)  # (the only fault: retries in a
            # row are bounded, and more restarts could outlast them, as docs/sync.md says)
        if kind == "sync-shutdown":  # MySQL shut down cleanly while sync follows
            following(servers)
            time.sleep(random.Random(f"{seed}-shutdown").uniform(0.2, 1.5))
            event("mysql shutdown (SIGTERM), started again 1 s later")
            servers.mysql.halt()
            time.sleep(1.0)
            servers.mysql.start()
            time.sleep(rng.uniform(1.0, 3.0))  # writes after it: applied by the same run
        if kind == "sync-redis-stop":  # SIGTERM as sync recovers from Redis restarted
            following(servers)
            event("redis restart from aof, then SIGTERM to sync at once")
            servers.redis.restart(rng.uniform(0.1, 0.5))
            command.stop()  # (its STARTUP_SECONDS are long past)
        if kind == "sync-load-swap":  # gh-ost's cut-over while the consistent load may run
            out.problems += swap_in_load(servers, writer, command, seed, event)
        if kind == "early-signal":  # SIGINT or SIGTERM while the interpreter starts
            out.problems += early_signal(command, seed, event, ALLOWED[base])
        for _ in range(rng.randint(2, 4) if base == kind else 0):
            time.sleep(rng.uniform(0.3, 2.0))
            if command.proc is not None and command.ended():
                command.collect()
            loaded = kind in ("migrate", "replace") and command.runs[-1][1] == 0
            if command.proc is None and not loaded:  # ended (or killed): go on as documented
                command.start(again=True)
                event(f"ended {command.runs[-2][1]}; start {command.runs[-1][0]}")
            fault = rng.choice(FAULTS)
            event(fault)
            inject(fault, rng, servers, command)
        time.sleep(rng.uniform(0.3, 1.5))
    finally:
        writer.stop.set()
        writer.join(30)
        command.stop()
    event(f"writes stopped ({writer.done} done, {writer.failed} failed)")
    if kind == "sync-load-swap":
        event(f"the swap met the consistent first load: {bool(command.loads_again)}")
    out.runs = command.runs
    out.problems += command.unasked
    for n, (what, rc, err) in enumerate(command.runs):
        if kind == "early-signal" and n == 0:  # judged by early_signal
            continue
        if rc is not None and rc not in ALLOWED[base if kind == "early-signal" else kind]:
            out.problems.append(f"{what} ended with exit {rc}")
        if "Traceback" in err:
            out.problems.append(f"{what} printed a traceback")
    recover(base, command, out)
    out.differences = compare(servers)
    return out


def recover(kind: str, command: Command, out: Outcome) -> None:
    """The documented recovery (see the module docstring); each step's exit code kept."""

    def step(args: list[str]) -> int:
        code, err = cli(*args)
        out.recovery.append((" ".join(args[:1] + args[6:]), code, err))
        return code

    if kind == "sync":
        if step([*command.argv(False), "--until-caught-up"]) != 0:
            out.problems.append("sync --until-caught-up did not exit 0")
        return
    finished = command.runs[-1][1] == 0  # (a --resume has nothing left to resume)
    if kind in ("migrate", "replace") and not finished and step(command.argv(True)) != 0:
        out.problems.append("migrate --resume did not exit 0")
    if command.replace and (stale := stale_keys(command.servers, out.rows)):
        out.problems.append(
            f"the --replace ended at exit 0 with {stale} keys of rows deleted before it began"
        )
    fix = Command("verify", command.servers, command.mapping).argv(False)
    if not any(step(fix) == 0 for _ in range(2)):
        out.problems.append("verify --fix did not reach exit 0 in two runs on a quiet source")


def stale_keys(servers: Servers, rows: int) -> int:
    """The row keys left of the rows deleted before a ``--replace`` began (``id % 5 = 0``; the
    writer's inserts take new ids): a finished replace removed every one."""
    client = servers.redis.client(timeout=30)
    try:
        pipe = client.pipeline(transaction=False)
        for i in range(5, rows + 1, 5):
            pipe.exists(f"item:{i}")
        return sum(pipe.execute())
    finally:
        client.close()


def prepare(servers: Servers, rows: int) -> None:
    servers.sql(f"DROP DATABASE IF EXISTS {DATABASE}", f"CREATE DATABASE {DATABASE}",
                database=None)  # fmt: skip
    servers.sql(SCHEMA)
    conn = servers.mysql.connect(DATABASE)  # rows made here: MySQL has no seq_1_to_N tables
    try:
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO item (name, grp, code) VALUES (%s, %s, %s)",
                [(f"name {n}", None if n % 7 == 0 else n % 20,
                  None if n % 11 == 0 else f"k{n}") for n in range(1, rows + 1)],
            )  # fmt: skip
    finally:
        conn.close()
    client = servers.redis.client()
    try:
        client.flushall()
    finally:
        client.close()


# -- the independent comparison ------------------------------------------------------------------
def expected(rows: list[tuple[Any, ...]]) -> dict[bytes, Any]:
    """What Redis must hold for ``rows`` (id, name, grp, code), by the mapping's rules."""
    want: dict[bytes, Any] = {}
    unique: dict[bytes, bytes] = {}
    for i, name, grp, code in rows:
        pk = str(i).encode()
        fields = {b"name": name.encode()}
        if grp is not None:
            fields[b"grp"] = str(grp).encode()
            want.setdefault(b"item:indices:grp:%d" % grp, set()).add(pk)
        if code is not None:
            fields[b"code"] = code.encode()
            unique[code.encode()] = pk
        want[b"item:" + pk] = fields
    if unique:
        want[b"item:uniques:code"] = unique
    return want


def compare(servers: Servers) -> list[str]:
    """Every difference between MySQL's ``item`` rows and Redis (see the module docstring)."""
    rows = servers.sql("SELECT id, name, grp, code FROM item")
    want = expected(rows)
    client = servers.redis.client(timeout=30)
    try:
        have = {k for k in client.scan_iter(match=b"item:*", count=5000)}
        out = []
        top = max((int(r[0]) for r in rows), default=0)
        counter = client.get(b"item:id")
        if rows and (counter is None or int(counter) < top):
            out.append(f"counter item:id is {counter!r}, below the highest id {top}")
        have.discard(b"item:id")
        for key in sorted(have - set(want)):
            out.append(f"extra key {key!r}")
        read: Callable[[bytes], Any]
        for key, value in sorted(want.items()):
            read = client.smembers if isinstance(value, set) else client.hgetall
            got = read(key) if key in have else None
            if got is None:
                out.append(f"missing key {key!r}")
            elif got != value:
                out.append(f"{key!r}: Redis has {_short(got)}, MySQL says {_short(value)}")
        return out
    finally:
        client.close()


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 160 else text[:157] + "..."
