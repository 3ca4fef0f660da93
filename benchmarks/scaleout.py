"""Scale-out benchmark (issue 21): migrate --dask against --workers on the same machine, and
rows/s by chunk size.

    .venv/bin/python benchmarks/scaleout.py --target redis://127.0.0.1:6379/14 \
        [--source mysql+pymysql://root@127.0.0.1:3306/migrator_bench] --rows 300000 \
        --chunks 10000,50000,200000 --reps 3

It (re)generates ``emp`` (benchmarks/generate.py), starts a ``dask scheduler`` and N
``dask worker`` processes (``--nthreads 1`` each; N = ``--workers``, default 2) on loopback
ports (Dask's profiler off in the workers, as docs/scale-out.md recommends, unless
``--dask-profiler``) and warms them with one untimed run, then for each chunk size and
repetition empties the target (FLUSHDB; a claimed or non-empty database is refused as by
run.py), runs ``migrator migrate benchmarks/emp.yaml`` with ``--workers N --chunk-rows C``
and with ``--dask ADDRESS --chunk-rows C``, one after the other, times each (whole command,
start-up included) and checks the result as run.py does. It prints the median rows/s of
each and the Dask path's overhead (dask time / workers time - 1). The Dask processes are
killed at the end, and the target left empty.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import redis

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from generate import DEFAULT_SOURCE, generate  # noqa: E402
from run import VENV_BIN, check, claim_target, expected, load, shown, timed  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


#: Dask's statistical profiler samples a running task's stack every 10 ms; off on the
#: workers as the multi-host recipe says (docs/scale-out.md), unless --dask-profiler
NO_PROFILER = {"DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED": "False"}


def start_cluster(
    workers: int, profiler: bool = False
) -> tuple[str, list[subprocess.Popen[bytes]]]:
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    dask = [sys.executable, "-m", "dask"]
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    procs = [
        subprocess.Popen([*dask, "scheduler", "--host", "127.0.0.1", "--port", str(port),
                          "--no-dashboard"], start_new_session=True, **quiet)  # type: ignore[call-overload]
    ]  # fmt: skip
    for n in range(workers):
        procs.append(
            subprocess.Popen([*dask, "worker", address, "--nthreads", "1", "--no-nanny",
                              "--no-dashboard", "--name", f"bench{n}", "--host", "127.0.0.1"],
                             start_new_session=True, **quiet,  # type: ignore[call-overload]
                             env={**os.environ, **({} if profiler else NO_PROFILER)})
        )  # fmt: skip
    from distributed import Client

    with Client(address, timeout=60, set_as_default=False) as client:
        client.wait_for_workers(workers, timeout=60)
    return address, procs


def stop_cluster(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    for p in procs:
        p.wait(10)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--target", required=True, help="an empty Redis database it may FLUSHDB")
    ap.add_argument("--source", default=os.environ.get("MIGRATOR_BENCH_SOURCE", DEFAULT_SOURCE))
    ap.add_argument("--rows", type=int, default=300_000)
    ap.add_argument("--chunks", default="10000,50000,200000", help="chunk sizes, comma-separated")
    ap.add_argument("--workers", type=int, default=2, help="local workers = Dask workers")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--force", action="store_true", help="empty a target that holds keys")
    ap.add_argument("--dask-profiler", action="store_true",
                    help="leave Dask's profiler on in the workers (its default)")  # fmt: skip
    args = ap.parse_args()
    r = redis.Redis.from_url(args.target)
    release = claim_target(r, args.target, args.force)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        print(f"generating {args.rows:,} rows: {generate(args.rows, args.source):.1f} s")
        want = expected(args.rows, args.source)
        address, procs = start_cluster(args.workers, args.dask_profiler)
        base = [str(VENV_BIN / "migrator"), "migrate", str(HERE / "emp.yaml"),
                "--source", args.source, "--target", args.target]  # fmt: skip
        # a cluster that has run before: each worker has imported migrator (a fresh worker's
        # first chunk waits about a second for that), one untimed run with a chunk for each
        r.flushdb()
        timed([*base, "--dask", address, "--chunk-rows", str(max(1, args.rows // args.workers))])
        profiler = "on" if args.dask_profiler else "off"
        print(f"target {shown(args.target)}; {args.workers} workers, local or Dask (profiler "
              f"{profiler}); load {load()}")  # fmt: skip
        print(f"{'chunk rows':>10} {'--workers rows/s':>17} {'--dask rows/s':>14} {'overhead':>9}")
        for chunk in (int(c) for c in args.chunks.split(",")):
            times: dict[str, list[float]] = {"workers": [], "dask": []}
            for _ in range(args.reps):
                for how, extra in (("workers", ["--workers", str(args.workers)]),
                                   ("dask", ["--dask", address])):  # fmt: skip
                    r.flushdb()
                    seconds, _ = timed([*base, *extra, "--chunk-rows", str(chunk)])
                    problem = check(r, args.rows, want)
                    if problem:
                        raise SystemExit(f"{how} --chunk-rows {chunk}: wrong result: {problem}")
                    times[how].append(seconds)
            w, d = statistics.median(times["workers"]), statistics.median(times["dask"])
            print(f"{chunk:>10,} {args.rows / w:>17,.0f} {args.rows / d:>14,.0f} "
                  f"{(d / w - 1) * 100:>8.1f}%")  # fmt: skip
        print(f"load average at the end: {load()}")
    finally:
        stop_cluster(procs)
        r.flushdb()
        release()
        time.sleep(0)


if __name__ == "__main__":
    main()
