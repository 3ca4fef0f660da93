"""Throughput benchmark (issue 6): the floor, migrator migrate and a redis-py script.

    .venv/bin/python benchmarks/run.py --target redis://127.0.0.1:6379/14 \
        [--source mysql+pymysql://root@127.0.0.1:3306/migrator_bench] --rows 100000,1000000 --reps 3

For each size it (re)generates table ``emp`` in the database of ``--source``
(benchmarks/generate.py; an ``emp`` it did not make is refused), then, per repetition and per
method, empties the ``--target`` Redis database (FLUSHDB), runs the method, times it (whole
command, start-up included) and checks the result: row hash count, HLEN of the unique hash,
index set count and total members, the counter, and a few rows field by field. A target that
holds any key at the start is refused unless ``--force``: the benchmark would empty it. At the
end the target is left empty.

It prints rows/s per method (median of the repetitions), the ratios migrate/floor and
migrate/redis-py, and migrate's peak RSS summed over all its processes (polled from /proc
every 100 ms), and the load average. After each migrate variant's load it also times, with the
same driver, ``verify`` (Redis holds only the load: DBSIZE proves there is no stray key),
``verify`` with one unrelated key added (so the stray-key SCAN of every key runs) and
``verify --fix`` on the identical target, and prints verify/migrate and verify/fix rows/s
ratios (``--no-verify`` skips them). Several migrate variants can be timed in one run, between
the same floor and redis-py runs:

    .venv/bin/python benchmarks/run.py --target redis://127.0.0.1:6379/14 --variant default= \
        --variant "pymysql-w1=MIGRATOR_RAW_DRIVER=pymysql --workers 1" --variant "w2=--workers 2"
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pymysql
import redis

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from generate import DEFAULT_SOURCE, connect_args, generate  # noqa: E402

VENV_BIN = Path(sys.executable).parent
SQL = "SELECT emp_id, ename, email, mgr_id, hired, salary, note FROM emp ORDER BY emp_id"


def floor_command(source: str, target: str) -> tuple[str, dict[str, str]]:
    """The floor's shell pipeline, mysql client | awk | redis-cli --pipe, and its environment
    (the MySQL password, if any, in MYSQL_PWD rather than on the command line)."""
    a = connect_args(source)
    client = shutil.which("mariadb") or shutil.which("mysql") or "mariadb"
    mysql = [
        client, "--protocol=TCP", f"--host={a['host']}", f"--port={a['port']}",
        f"--user={a['user']}", "--quick", "-B", "-N", f"--database={a['database']}", "-e", SQL,
    ]  # fmt: skip
    awk = ["awk", "-f", str(HERE / "floor.awk")]
    pipe = ["redis-cli", "-u", target, "--pipe"]
    line = f"{shlex.join(mysql)} | LC_ALL=C {shlex.join(awk)} | {shlex.join(pipe)} > /dev/null"
    return line, {"MYSQL_PWD": a["password"]} if a["password"] else {}


def shown(url: str) -> str:
    """A Redis URL for messages, without its password."""
    parts = urlsplit(url)
    if parts.password:
        parts = parts._replace(netloc=parts.netloc.replace(f":{parts.password}@", ":***@"))
    return urlunsplit(parts)


def refuse_non_empty(r: redis.Redis, target: str, force: bool) -> None:
    """Exit with the reason when the target holds keys and ``force`` is not given: every run
    starts with FLUSHDB."""
    keys = r.dbsize()
    if keys and not force:
        raise SystemExit(
            f"refusing to run: the target {shown(target)} holds {keys:,} key(s), and the"
            " benchmark empties it (FLUSHDB) before every run. Name an empty Redis database"
            " with --target (redis-cli -n N dbsize says 0), or pass --force to let it be emptied."
        )
    if keys:
        print(f"--force: emptying {shown(target)}, which holds {keys:,} key(s)")


def claim_target(r: redis.Redis, target: str, force: bool) -> Callable[[], None]:
    """Claim the target's logical database the way the test fixtures do
    (``migrator-tests:db:N`` in db 0, tests/conftest.py), so that test sessions on the same
    server leave it alone, and check it may be emptied; exit when it is claimed already or
    holds keys (without ``force``). Returns the function that releases the claim."""
    pool = r.connection_pool
    db = int(pool.connection_kwargs.get("db") or 0)
    kwargs = {**pool.connection_kwargs, "db": 0}
    lock = redis.Redis(connection_pool=redis.ConnectionPool(pool.connection_class, **kwargs))
    claim, token = f"migrator-tests:db:{db}", f"benchmark {os.getpid()}"
    if db and not lock.set(claim, token, nx=True, ex=6 * 3600):
        raise SystemExit(
            f"refusing to run: Redis database {db} of {shown(target)} is in use by a test"
            f" session or another benchmark ({claim} = {lock.get(claim)!r} in db 0). Name"
            " another database with --target."
        )

    def release() -> None:
        if db and lock.get(claim) == token.encode():
            lock.delete(claim)

    try:
        refuse_non_empty(r, target, force)
    except SystemExit:
        release()
        raise
    return release


def tree_rss(root: int) -> int:
    """Resident bytes of a process and all its descendants."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry))
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            pass
    return total


def timed(
    cmd: list[str] | str, shell: bool = False, env: dict[str, str] | None = None
) -> tuple[float, int]:
    """(seconds, peak RSS of the process tree in bytes) of a command that must succeed."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd,
        shell=shell,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )
    peak = 0
    while proc.poll() is None:
        peak = max(peak, tree_rss(proc.pid))
        time.sleep(0.1)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"failed ({proc.returncode}): {cmd}\n{proc.stderr.read().decode()}")
    return seconds, peak


def expected(rows: int, source: str) -> dict[str, object]:
    conn = pymysql.connect(**connect_args(source))
    with conn.cursor() as cur:
        cur.execute("SELECT COUNT(DISTINCT mgr_id), COUNT(mgr_id), MAX(emp_id) FROM emp")
        distinct, indexed, top = cur.fetchone()
        samples = {}
        for emp_id in (1, 4, 20, rows // 2, rows):
            cur.execute(SQL.replace("ORDER BY", "WHERE emp_id = %s ORDER BY"), (emp_id,))
            row = cur.fetchone()
            cols = ("ename", "email", "mgr_id", "hired", "salary", "note")
            samples[emp_id] = {
                c.encode(): str(v).encode() for c, v in zip(cols, row[1:]) if v is not None
            }
    conn.close()
    return {"sets": distinct, "members": indexed, "counter": str(top).encode(), "rows": samples}


def check(r: redis.Redis, rows: int, want: dict[str, object]) -> str:
    """'' when Redis holds exactly the expected structures, else what is wrong."""
    problems = []
    hashes = sets = members = 0
    for key in r.scan_iter(match="emp:*", count=10000):
        if key.startswith(b"emp:indices:mgr_id:"):
            sets += 1
            members += r.scard(key)
        elif key[4:].isdigit():
            hashes += 1
    got = {
        "row hashes": (hashes, rows),
        "HLEN emp:uniques:email": (r.hlen("emp:uniques:email"), rows),
        "index sets": (sets, want["sets"]),
        "index members": (members, want["members"]),
        "emp:id": (r.get("emp:id"), want["counter"]),
    }
    problems += [f"{k}: {a} != {b}" for k, (a, b) in got.items() if a != b]
    for emp_id, fields in want["rows"].items():  # type: ignore[attr-defined]
        if r.hgetall(f"emp:{emp_id}") != fields:
            problems.append(f"emp:{emp_id} differs")
    return "; ".join(problems)


def variants(args: argparse.Namespace) -> dict[str, tuple[list[str], dict[str, str]]]:
    """migrate's command and environment per variant: ``--variant LABEL=EXTRA ARGS``
    (repeatable; leading NAME=value words are environment variables), else one variant,
    "migrate", from --source and --workers."""
    base = [str(VENV_BIN / "migrator"), "migrate", str(HERE / "emp.yaml"), "--json"]
    base += ["--target", args.target]
    if not args.variant:
        extra = ["--source", args.source] + (["--workers", args.workers] if args.workers else [])
        return {"migrate": (base + extra, {})}
    out = {}
    for spec in args.variant:
        label, _, extra = spec.partition("=")
        words = shlex.split(extra)
        env = {}
        while words and "=" in words[0] and not words[0].startswith("-"):
            name, _, value = words.pop(0).partition("=")
            env[name] = value
        if "--source" not in words:
            words = ["--source", args.source, *words]
        out[label.strip()] = (base + words, env)
    return out


def verify_commands(
    args: argparse.Namespace, env: dict[str, str]
) -> dict[str, tuple[list[str], dict[str, str]]]:
    """verify, and verify --fix, of a migrate variant's load: same source, target and driver."""
    base = [str(VENV_BIN / "migrator"), "verify", str(HERE / "emp.yaml"), "--json"]
    base += ["--source", args.source, "--target", args.target]
    return {"verify": (base, env), "verify --fix": ([*base, "--fix"], env)}


def time_verify(
    args: argparse.Namespace,
    r: redis.Redis,
    rows: int,
    variant: str,
    env: dict[str, str],
    out: dict[str, list[float]],
) -> None:
    """Time verify (DBSIZE shows no stray key: no SCAN), verify with one key outside the
    mapping (so the stray-key SCAN of every key runs), and verify --fix, on the load just
    checked; each must exit 0 (identical) and leave the load as it was."""
    commands = verify_commands(args, env)
    runs = [("verify", *commands["verify"]), ("verify, scan", *commands["verify"]),
            ("verify --fix", *commands["verify --fix"])]  # fmt: skip
    for label, cmd, cmd_env in runs:
        if label == "verify, scan":
            r.set("bench:not-the-mappings", "1")
        seconds, _ = timed(cmd, False, cmd_env)
        r.delete("bench:not-the-mappings")
        out.setdefault(label, []).append(rows / seconds)
        print(f"         {variant} {label:14} {rows / seconds:>10,.0f} rows/s  {seconds:6.2f}s",
              flush=True)  # fmt: skip


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.2f}/{five:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="100000,1000000", help="sizes, e.g. 100000,1000000")
    parser.add_argument("--reps", type=int, default=3, help="repetitions per size, e.g. 3")
    parser.add_argument("--workers", default="", help="migrate --workers N (default: its own)")
    parser.add_argument(
        "--target", required=True,
        help="Redis URL written to and emptied before every run; it must hold no key unless"
        " --force, e.g. redis://127.0.0.1:6379/14",
    )  # fmt: skip
    parser.add_argument(
        "--source", default=DEFAULT_SOURCE,
        help="MySQL URL of the database that gets the generated table emp (and migrate's"
        f" source), e.g. {DEFAULT_SOURCE}",
    )  # fmt: skip
    parser.add_argument(
        "--force", action="store_true",
        help="empty a --target that holds keys, and replace an emp table generate.py did not make",
    )  # fmt: skip
    parser.add_argument(
        "--no-verify", action="store_true",
        help="do not time verify and verify --fix after each migrate variant",
    )  # fmt: skip
    parser.add_argument(
        "--variant", action="append", default=[],
        help="a migrate variant to time, LABEL=EXTRA ARGS (repeatable), e.g. 'w1=--workers 1'",
    )  # fmt: skip
    args = parser.parse_args()
    r = redis.Redis.from_url(args.target)
    release = claim_target(r, args.target, args.force)
    try:
        bench(args, r)
    finally:
        release()


def bench(args: argparse.Namespace, r: redis.Redis) -> None:
    """Generate, run and check every method for every size; print the figures."""
    migrates = variants(args)
    methods: dict[str, tuple[list[str] | str, bool, dict[str, str]]] = {}
    floor, floor_env = floor_command(args.source, args.target)
    methods["floor"] = (floor, True, floor_env)
    methods.update({label: (cmd, False, env) for label, (cmd, env) in migrates.items()})
    redispy = [sys.executable, str(HERE / "redispy_load.py"), "--source", args.source]
    methods["redis-py"] = ([*redispy, "--target", args.target], False, {})
    for label, (cmd, env) in migrates.items():
        shown = " ".join(f"{k}={v}" for k, v in env.items())
        print(f"{label}: {shown + ' ' if shown else ''}{' '.join(cmd)}")
    print(f"CPUs {os.cpu_count()}; load average (1/5 min) {load()}")
    summary = []
    for rows in [int(x) for x in args.rows.split(",")]:
        made = generate(rows, args.source, args.force)
        print(f"\n== {rows:,} rows (generated in {made:.1f}s), load {load()}")
        want = expected(rows, args.source)
        rates: dict[str, list[float]] = {m: [] for m in methods}
        peaks: dict[str, list[int]] = {m: [] for m in migrates}
        checks: dict[str, dict[str, list[float]]] = {m: {} for m in migrates}
        loads = [load()]
        for rep in range(1, args.reps + 1):
            for name, (cmd, shell, env) in methods.items():
                r.flushdb()
                seconds, peak = timed(cmd, shell, env)
                problem = check(r, rows, want)
                rates[name].append(rows / seconds)
                if name in peaks:
                    peaks[name].append(peak)
                print(
                    f"  rep {rep} {name:12} {rows / seconds:>10,.0f} rows/s  {seconds:6.2f}s"
                    + (f"  peak RSS {peak / 2**20:.0f} MiB" if name in peaks else "")
                    + ("  check OK" if not problem else f"  CHECK FAILED: {problem}"),
                    flush=True,
                )
                if problem:
                    raise SystemExit(1)
                if name in migrates and not args.no_verify:
                    time_verify(args, r, rows, name, migrates[name][1], checks[name])
            loads.append(load())
        med = {m: statistics.median(v) for m, v in rates.items()}
        peak = {m: statistics.median(v) / 2**20 for m, v in peaks.items()}
        summary.append((rows, med, peak, " ".join(loads)))
        for m in migrates:
            print(
                f"  median {m}: floor {med['floor']:,.0f}  migrate {med[m]:,.0f}"
                f"  redis-py {med['redis-py']:,.0f} rows/s;  migrate/floor "
                f"{med[m] / med['floor']:.2f}x  migrate/redis-py "
                f"{med[m] / med['redis-py']:.1f}x  peak RSS {peak[m]:.0f} MiB",
                flush=True,
            )
            if checks[m]:
                v = {k: statistics.median(x) for k, x in checks[m].items()}
                print(
                    f"  median {m}: verify {v['verify']:,.0f} rows/s (verify/migrate "
                    f"{v['verify'] / med[m]:.2f}x), with the stray-key scan "
                    f"{v['verify, scan']:,.0f} rows/s ({v['verify, scan'] / med[m]:.2f}x); "
                    f"verify --fix on the identical target costs "
                    f"{v['verify'] / v['verify --fix']:.2f}x verify's time",
                    flush=True,
                )
        print(f"  load average (1/5 min) before and after each rep: {' '.join(loads)}")
    r.flushdb()
    print(
        "\n| rows | variant | floor rows/s | migrate rows/s | redis-py rows/s | b/a | b/c"
        " | peak RSS |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for rows, med, peak, _ in summary:
        for m in migrates:
            print(
                f"| {rows:,} | {m} | {med['floor']:,.0f} | {med[m]:,.0f}"
                f" | {med['redis-py']:,.0f} | {med[m] / med['floor']:.2f}x"
                f" | {med[m] / med['redis-py']:.1f}x | {peak[m]:.0f} MiB |"
            )
    for rows, _, _, loads in summary:
        print(f"load average (1/5 min) during {rows:,} rows: {loads}")


if __name__ == "__main__":
    main()
