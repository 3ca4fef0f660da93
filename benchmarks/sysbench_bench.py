"""sync against small OLTP transactions: sysbench ``oltp_write_only`` at the source's full speed.

    PYTHONPATH=. .venv/bin/python benchmarks/sysbench_bench.py [--engine mariadb|mysql]
        [--seconds 30] [--threads 4] [--live 20] [--runs 1]

Needs Debian's ``sysbench`` (``apt-get install -y sysbench``; installed here when missing and
apt-get may run). Starts its own source — a private MariaDB with the row binary log
(tests/binlog_server.py), or a private Oracle MySQL (scripts/mysql-server.sh, or the script
``MYSQL_SERVER_SH`` names, on ``--port``) — with relaxed durability (no fsync per
commit), and its own redis-server; removes them at the end.

The tables: sysbench's ``sbtest1..4`` of 50,000 rows each, mapped to a row hash each and an
index on ``k``. ``oltp_write_only``: each transaction updates one row's ``k`` (the index
moves), updates one row's ``c``, deletes one row and inserts it again — four row changes.

1. Backlog: sync loads the tables, then stops; sysbench writes at full speed for
   ``--seconds`` (the source's txn/s); then ``sync --until-caught-up`` applies the backlog:
   its txn/s and row changes/s, their ratio to the source's rate, and the CPU per 1,000
   transactions of sync's reader (its process, which decodes the log, and the thread that
   takes the events from it), of its applying thread and of Redis (``INFO cpu``).
2. Live (``--live`` seconds, 0: skip): sync follows while sysbench writes at full speed.
   The lag is measured independently of sync: every 20 ms the source's log end
   (``SHOW MASTER STATUS`` / ``SHOW BINARY LOG STATUS``) is noted with the time; the lag at a
   moment is the time since the source's log first reached past what sync had applied then.
   Printed: sysbench's rate, the lag's p50/p99/max, and whether it stayed bounded (its last
   seconds of writing no higher than its first). Beside it, an independent probe
   (benchmarks/lag_probe.py, a process of its own): a row of the mapped table ``probe``
   updated every 50 ms with the writer's clock and read back from Redis every 2 ms; the lag
   of each write is when Redis first held it less the time written: p50/p99/max.

``--runs 0`` skips the backlog runs (the live run alone).

``--streams on`` gives every table a change stream (``options.streams: true``,
docs/sync.md#change-streams: an XADD per row change in each group's MULTI/EXEC); ``both`` runs
each backlog run twice, streams off then on, under a mapping of each (two sync states over
the same keys; before its measured run each first catches up untimed, so its backlog is that
run's sysbench alone). With streams, Redis's memory per entry is printed after the runs:
``MEMORY USAGE`` of each stream (``SAMPLES 0``: every node counted) over its ``XLEN``.

The machine's load average is printed with every figure: on a shared machine they are noisy.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pymysql
import redis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.lag_probe import MAPPING as PROBE_MAPPING
from benchmarks.lag_probe import SCHEMA as PROBE_SCHEMA
from benchmarks.lag_probe import Probe
from benchmarks.sync_bench import PrivateRedis
from migrator.commands.sync import sync
from migrator.mapping.loader import parse_mapping
from migrator.source.binlog.reader import Transaction
from migrator.sync.figures import SyncFigures
from tests.binlog_server import PrivateMariaDB

TABLES, ROWS = 4, 50_000
MAPPING = (
    "version: 1\ntables:\n"
    + "".join(
        f'  sbtest{i}:\n    key: "sb{i}:{{id}}"\n    indexes: [k]\n' for i in range(1, TABLES + 1)
    )
    + PROBE_MAPPING
)
RELAXED = ("--innodb-flush-log-at-trx-commit=2", "--sync-binlog=0",
           "--innodb-buffer-pool-size=256M")  # fmt: skip
ROOT = Path(__file__).resolve().parent.parent
STREAMS = MAPPING.replace("version: 1\n", "version: 1\noptions:\n  streams: true\n", 1)


def mapping_of(streams: bool) -> Any:
    """The benchmark's mapping, with a change stream per table or without (a state each)."""
    if streams:
        return parse_mapping(STREAMS, name="sysbench-streams")
    return parse_mapping(MAPPING, name="sysbench")


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} ({os.cpu_count()} cores)"


def ensure_sysbench() -> str:
    found = shutil.which("sysbench")
    if found:
        return found
    subprocess.run(["apt-get", "install", "-y", "sysbench"], check=True,
                   stdout=subprocess.DEVNULL)  # fmt: skip
    found = shutil.which("sysbench")
    if not found:
        raise SystemExit("sysbench is not installed: apt-get install -y sysbench")
    return found


class Source:
    """The private source server: ``url`` (SQLAlchemy), ``host``/``port``, ``stop()``."""

    def __init__(self, engine: str, port: int) -> None:
        self.engine, self.port = engine, port
        self.maria: PrivateMariaDB | None = None
        if engine == "mariadb":
            self.maria = PrivateMariaDB(options=RELAXED)
            self.maria.start()
            self.port = self.maria.port
        else:
            script = Path(os.environ.get("MYSQL_SERVER_SH", ROOT / "scripts" / "mysql-server.sh"))
            if not script.exists():
                raise SystemExit(f"{script} is missing: set MYSQL_SERVER_SH to mysql-server.sh")
            self.script = script
            subprocess.run([str(script), "--port", str(port), "--fresh", "start", "--",
                            "--innodb-buffer-pool-size=256M"], check=True,
                           stdout=subprocess.DEVNULL)  # fmt: skip
        self.connect().cursor().execute("CREATE DATABASE sbtest")

    @property
    def url(self) -> str:
        return f"mysql+pymysql://root@127.0.0.1:{self.port}/sbtest"

    def connect(self) -> Any:
        return pymysql.connect(host="127.0.0.1", port=self.port, user="root", autocommit=True)

    def head(self, conn: Any) -> tuple[str, int]:
        with conn.cursor() as cur:
            cur.execute("SHOW MASTER STATUS" if self.engine == "mariadb"
                        else "SHOW BINARY LOG STATUS")  # fmt: skip
            row = cur.fetchone()
        return str(row[0]), int(row[1])

    def stop(self) -> None:
        if self.maria is not None:
            self.maria.stop()
        else:
            subprocess.run([str(self.script), "--port", str(self.port), "clean"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip


def sysbench(
    src: Source,
    command: str,
    threads: int,
    seconds: float = 0,
    script: str = "oltp_write_only",
    env: dict[str, str] | None = None,
) -> float:
    """Run sysbench ``script`` ``command`` (``env``: more environment for a script of ours);
    for ``run``, the transactions per second."""
    args = [ensure_sysbench(), script, "--db-driver=mysql", "--mysql-host=127.0.0.1",
            f"--mysql-port={src.port}", "--mysql-user=root", "--mysql-db=sbtest",
            f"--tables={TABLES}", f"--table-size={ROWS}", f"--threads={threads}",
            f"--time={int(seconds)}", "--report-interval=0", command]  # fmt: skip
    done = subprocess.run(args, capture_output=True, text=True, env={**os.environ, **(env or {})})
    if done.returncode != 0:
        raise SystemExit(f"sysbench {command} failed:\n{done.stdout[-1500:]}{done.stderr}")
    if command != "run":
        return 0.0
    found = re.search(r"transactions:\s+(\d+)\s+\(([\d.]+) per sec", done.stdout)
    assert found, done.stdout
    return float(found.group(2))


class ThreadCPU:
    """CPU seconds of threads of this process, by native id, sampled until ``stop()``
    (a thread's figures vanish when it ends: the last sample is kept)."""

    def __init__(self) -> None:
        self.seen: dict[str, float] = {}  # thread name -> CPU seconds at the last sample
        self.done = threading.Event()
        self.tick = os.sysconf("SC_CLK_TCK")
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.done.is_set():
            for t in threading.enumerate():
                if t.native_id is None:
                    continue
                try:
                    stat = Path(f"/proc/self/task/{t.native_id}/stat").read_text()
                except OSError:
                    continue
                fields = stat.rsplit(")", 1)[1].split()
                self.seen[t.name] = (int(fields[11]) + int(fields[12])) / self.tick
            time.sleep(0.05)

    def stop(self) -> dict[str, float]:
        self.done.set()
        self.thread.join()
        return self.seen


def backlog(
    src: Source, target: str, seconds: float, threads: int, server_id: int, streams: bool = False
) -> dict[str, float]:
    mapping = mapping_of(streams)
    sync(
        mapping, source=src.url, target=target, until_caught_up=True, server_id=server_id
    )  # untimed: the other mapping's runs, when there are two
    rate = sysbench(src, "run", threads, seconds)
    written_load = load()
    redis_cpu = redis_seconds(target)
    cpu = ThreadCPU()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)  # sync's reader process, once ended
    out: dict[str, Any] = {}

    def run() -> None:
        t0 = time.perf_counter()
        out["report"] = sync(mapping, source=src.url, target=target, until_caught_up=True,
                             server_id=server_id)  # fmt: skip
        out["seconds"] = time.perf_counter() - t0

    runner = threading.Thread(target=run, name="applier")
    runner.start()
    runner.join()
    threads_cpu = cpu.stop()
    redis_cpu = redis_seconds(target) - redis_cpu
    ended = resource.getrusage(resource.RUSAGE_CHILDREN)
    decoder = max(0.0, ended.ru_utime + ended.ru_stime - children.ru_utime - children.ru_stime)
    report, secs = out["report"], out["seconds"]
    txns, rows = report.transactions, report.rows_changed
    drain = txns / secs
    pump = threads_cpu.get("binlog-reader", 0.0)  # the thread reading the reader's output
    applier = threads_cpu.get("applier", 0.0)

    def per_1000(seconds: float) -> str:
        return f"{seconds * 1000 / max(txns, 1) * 1000:.0f} ms"

    print(
        f"[{src.engine}] source (sysbench oltp_write_only, {threads} threads, {seconds:.0f} s): "
        f"{rate:,.0f} txn/s; {written_load}"
    )
    on = " (streams on)" if streams else ""
    print(f"[{src.engine}] sync --until-caught-up{on}: {txns:,} transactions ({rows:,} row "
          f"changes) in {secs:.2f} s = {drain:,.0f} txn/s, {rows / secs:,.0f} row changes/s; "
          f"ratio {drain / rate:.2f}x the source's rate; CPU per 1,000 txn: reader "
          f"{per_1000(pump + decoder)} ({per_1000(decoder)} in its process), applier "
          f"{per_1000(applier)}, Redis {per_1000(redis_cpu)}; {load()}")  # fmt: skip
    return {"source": rate, "drain": drain, "ratio": drain / rate}


def redis_seconds(target: str) -> float:
    """The CPU seconds Redis has used (INFO cpu: user and system, its main thread's included)."""
    client = redis.Redis.from_url(target)
    info: Any = client.info("cpu")
    client.close()
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def stream_memory(src: Source, target: str) -> None:
    """Redis's bytes per change-stream entry: MEMORY USAGE (every node sampled) / XLEN."""
    client = redis.Redis.from_url(target)
    total = entries = 0
    for key in sorted(client.scan_iter(match="*:changes", _type="stream")):
        n = int(client.xlen(key))
        size = int(client.memory_usage(key, samples=0) or 0)
        total, entries = total + size, entries + n
        if n:
            print(f"[{src.engine}] stream {key.decode()}: {n:,} entries, {size:,} bytes = "
                  f"{size / n:.0f} bytes per entry")  # fmt: skip
    client.close()
    if entries:
        print(f"[{src.engine}] streams: {entries:,} entries, {total / entries:.0f} bytes per "
              f"entry (MEMORY USAGE ... SAMPLES 0 / XLEN)")  # fmt: skip


def live(src: Source, target: str, seconds: float, threads: int, server_id: int) -> None:
    mapping = parse_mapping(MAPPING, name="sysbench")
    applied: list[tuple[str, int]] = [src.head(src.connect())]
    heads: list[tuple[float, tuple[str, int]]] = []  # (time, the source's log end)
    lags: list[tuple[float, float]] = []  # (time, lag)
    reported: list[float] = []
    figures = SyncFigures()

    def on_applied(group: list[Transaction]) -> None:
        p = group[-1].position
        applied.append((p.file, p.pos))

    done = threading.Event()

    def watch() -> None:
        conn = src.connect()
        first = 0  # heads before it are at or behind the applied position (both only grow)
        while not done.is_set():
            now = time.time()
            heads.append((now, src.head(conn)))
            pos = applied[-1]
            # the first moment the source's log was seen past the applied position: found
            # from where the last search ended (a scan from the start each time grew with the
            # run: 1.2 s of CPU in 20 s of a 60 s run, in the process sync runs in, py-spy)
            while first < len(heads) and heads[first][1] <= pos:
                first += 1
            since = heads[first][0] if first < len(heads) else None
            lags.append((now, 0.0 if since is None else now - since))
            reported.append(figures.lag())
            time.sleep(0.02)
        conn.close()

    stop = threading.Event()
    probe = Probe({"host": "127.0.0.1", "port": src.port, "user": "root",
                   "database": "sbtest"}, target)  # fmt: skip
    follower = threading.Thread(
        target=sync, args=(mapping,),
        kwargs={"source": src.url, "target": target, "stop": stop, "on_applied": on_applied,
                "server_id": server_id, "figures": figures},
    )  # fmt: skip
    follower.start()
    probe.start()
    time.sleep(2.0)
    watcher = threading.Thread(target=watch)
    watcher.start()
    t0 = time.time()
    probe.measure(True)
    rate = sysbench(src, "run", threads, seconds)
    probe.measure(False)
    t1 = time.time()
    probed = probe.stop()
    time.sleep(2.0)
    done.set()
    watcher.join()
    stop.set()
    follower.join(30)
    during = [lag for t, lag in lags if t0 <= t <= t1]
    during.sort()
    first = [lag for t, lag in lags if t0 <= t <= t0 + seconds / 4]
    last = [lag for t, lag in lags if t1 - seconds / 4 <= t <= t1]
    bounded = max(last, default=0) <= max(2 * max(first, default=0), 1.0)
    p99 = during[int(len(during) * 0.99) - 1] if during else 0.0
    print(f"[{src.engine}] live: sysbench {rate:,.0f} txn/s for {seconds:.0f} s while sync "
          f"follows; lag (measured against the source's log end, every 20 ms): p50 "
          f"{statistics.median(during) * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms, max "
          f"{during[-1] * 1000:.0f} ms; {'bounded' if bounded else 'GROWING'} (first quarter "
          f"max {max(first, default=0):.2f} s, last quarter max {max(last, default=0):.2f} s); "
          f"sync reported max {max(reported, default=0):.2f} s; {load()}")  # fmt: skip
    print(f"[{src.engine}] live: {probed.summary()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=["mariadb", "mysql"], default="mariadb")
    parser.add_argument("--port", type=int, default=3470, help="MySQL's port (--engine mysql)")
    parser.add_argument("--seconds", type=float, default=30.0, help="sysbench's backlog run")
    parser.add_argument("--threads", type=int, default=4, help="sysbench's client threads")
    parser.add_argument("--live", type=float, default=20.0, help="seconds of live load (0: none)")
    parser.add_argument(
        "--runs", type=int, default=1, help="backlog runs (a new backlog each; 0: live alone)"
    )
    parser.add_argument(
        "--streams",
        choices=["off", "on", "both"],
        default="off",
        help="change streams on every table (both: each backlog run with and without)",
    )
    parser.add_argument(
        "--switch-interval", type=float, default=sys.getswitchinterval(),
        help="the interpreter's switch interval in this process, where sync runs (default: "
        "CPython's, %(default)s s; an experiment, docs/performance.md)",
    )  # fmt: skip
    args = parser.parse_args()
    sys.setswitchinterval(args.switch_interval)
    print(f"interpreter switch interval: {args.switch_interval * 1000:g} ms")
    ensure_sysbench()
    src = Source(args.engine, args.port)
    target = PrivateRedis()
    try:
        sysbench(src, "prepare", 4)
        with src.connect().cursor() as cur:
            cur.execute("USE sbtest")
            cur.execute(PROBE_SCHEMA)
            cur.execute("INSERT INTO probe VALUES (1, 0)")
        modes = {"off": [False], "on": [True], "both": [False, True]}[args.streams]
        for streams in modes:  # the first load of each mapping's state
            sync(mapping_of(streams), source=src.url, target=target.url,
                 until_caught_up=True, server_id=9201)  # fmt: skip
        ratios: dict[bool, list[float]] = {m: [] for m in modes}
        for _ in range(args.runs):
            for streams in modes:
                ratios[streams].append(backlog(src, target.url, args.seconds, args.threads,
                                               9202, streams)["ratio"])  # fmt: skip
        for streams, got in ratios.items():
            if len(got) > 1:
                print(
                    f"[{src.engine}] ratio over {args.runs} runs"
                    f"{' (streams on)' if streams else ''}: median "
                    f"{statistics.median(got):.2f}x (min {min(got):.2f}, max {max(got):.2f})"
                )
        if True in modes:
            stream_memory(src, target.url)
        if args.live:
            live(src, target.url, args.live, args.threads, 9203)
    finally:
        target.stop()
        src.stop()


if __name__ == "__main__":
    main()
