"""The operations assets name only what a running ``sync`` serves (issue 35 item 5): a real
``migrator sync --metrics`` follows writes on each engine, its connections to the source are
killed once (so the failure counters have samples too), and its ``/metrics`` is scraped until
every metric the Grafana dashboard (ops/grafana/sync-dashboard.json) and the alert rules
(ops/prometheus/sync-rules.yml) name has samples in it. Each name is matched to a metric family
of the scrape by the suffixes of the family's type (tests/promql.py: ``x_total`` of a counter
``x``, ``x_bucket`` of a histogram, ...). The converse holds too: every family served is on the
dashboard. ``up``, which Prometheus writes for each scrape, is the one name of the rules that
no exporter serves."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from tests.binlog_server import free_port
from tests.faults import wait_for
from tests.promql import Family, exported, families, grafana_queries, metric_names
from tests.sync.workload import MAPPING, SCHEMA

REPO = Path(__file__).resolve().parent.parent.parent
DASHBOARD = REPO / "ops" / "grafana" / "sync-dashboard.json"
RULES = REPO / "ops" / "prometheus" / "sync-rules.yml"
WRITTEN_BY_PROMETHEUS = {"up"}  # per scrape target, by Prometheus itself
_ids = iter(range(12400, 12500))


def dashboard_names() -> dict[str, str]:
    """metric name -> the first query that names it"""
    out: dict[str, str] = {}
    for where, expr in grafana_queries(json.loads(DASHBOARD.read_text(encoding="utf-8"))):
        for name in metric_names(expr):
            out.setdefault(name, where)
    return out


def rule_names() -> dict[str, str]:
    out: dict[str, str] = {}
    for group in yaml.safe_load(RULES.read_text(encoding="utf-8"))["groups"]:
        for rule in group["rules"]:
            for name in metric_names(rule["expr"]):
                out.setdefault(name, f"alert {rule['alert']}")
    return out


def local_ports(pid: int) -> set[int]:
    """The local ports of the TCP sockets of process ``pid`` and its children (/proc)."""
    pids, inodes = [pid], set()
    while pids:
        p = pids.pop()
        for task in Path(f"/proc/{p}/task").glob("*/children"):
            pids += [int(c) for c in task.read_text().split()]
        for fd in Path(f"/proc/{p}/fd").glob("*"):
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            cells = line.split()
            if cells[9] in inodes:
                ports.add(int(cells[1].rsplit(":", 1)[1], 16))
    return ports


def kill_dump(db: Any, pid: int) -> int:
    """KILL the Binlog Dump threads whose client is process ``pid`` (or a child): how many."""
    ports = local_ports(pid)
    conn = db.connect(client_flag=0)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT ID, HOST FROM information_schema.PROCESSLIST "
                        "WHERE COMMAND LIKE 'Binlog Dump%'")  # fmt: skip
            ids = [i for i, host in cur.fetchall() if int(host.rsplit(":", 1)[-1] or 0) in ports]
            for i in ids:
                cur.execute(f"KILL {int(i)}")
            return len(ids)
    finally:
        conn.close()


def scrape(port: int) -> dict[str, Family]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        return families(r.read().decode())


def unserved(names: dict[str, str], scraped: dict[str, Family]) -> list[str]:
    """The names no family of the scrape yields, or whose family has no sample of that name."""
    missing = []
    for name, where in sorted(names.items()):
        family = exported(name, scraped)
        if family is None or name not in family.sampled:
            missing.append(f"{name} ({where}): {'no samples' if family else 'not served'}")
    return missing


def test_the_dashboard_and_the_rules_name_only_what_a_running_sync_serves(  # type: ignore[no-untyped-def]
    binlog_db, redis_url: str, tmp_path: Path
) -> None:
    panels, alerts = dashboard_names(), rule_names()
    assert len(panels) >= 15 and {"up", "migrator_sync_lag_seconds"} <= set(alerts)
    binlog_db.run(SCHEMA)
    mapping = tmp_path / "ops.yaml"
    # a change stream on emp: its entries counter has samples to chart
    mapping.write_text(MAPPING.replace("  emp:\n", "  emp:\n    streams: true\n", 1))
    port = free_port()
    out, err = (tmp_path / "sync.out").open("w"), (tmp_path / "sync.err").open("w")
    env = {**os.environ, "MIGRATOR_SYNC_SERVER_ID": str(next(_ids))}
    proc = subprocess.Popen(
        [sys.executable, "-m", "migrator", "sync", str(mapping), "--source", binlog_db.url,
         "--target", redis_url, "--metrics", f"127.0.0.1:{port}", "--json"],
        env=env, stdout=out, stderr=err, text=True,
    )  # fmt: skip

    def said() -> str:
        return (tmp_path / "sync.err").read_text()[-2000:]

    def following() -> bool:
        assert proc.poll() is None, f"sync exited {proc.returncode}: {said()}"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            return 'phase="following"} 1.0' in r.read().decode()

    try:
        wait_for("sync following the log", following, 90, every=0.2)
        binlog_db.run(
            "INSERT INTO emp (email, login, dept_id, title) VALUES ('o1@x', 'o1', 1, 'ops'), "
            "('o2@x', 'o2', 2, 'ops'); UPDATE emp SET title = 'dev' WHERE login = 'o1'; "
            "DELETE FROM emp WHERE login = 'o2'"
        )
        # a lost binary-log connection: errors_total and retries_total get samples
        wait_for("the reader's Binlog Dump thread killed", lambda: kill_dump(binlog_db, proc.pid),
                 30)  # fmt: skip
        binlog_db.run("INSERT INTO emp (email, login) VALUES ('o3@x', 'o3')")
        binlog_db.run("ALTER TABLE emp ADD COLUMN extra INT NULL")  # a schema change applied
        served_rules = {n: w for n, w in alerts.items() if n not in WRITTEN_BY_PROMETHEUS}
        wanted = {**panels, **served_rules}

        def all_served() -> dict[str, Family] | None:
            assert proc.poll() is None, f"sync exited {proc.returncode}: {said()}"
            scraped = scrape(port)
            return None if unserved(wanted, scraped) else scraped

        try:
            scraped = wait_for("every named metric in /metrics", all_served, 60, every=0.5)
        except AssertionError:
            scraped = scrape(port)
        assert not unserved(panels, scraped), unserved(panels, scraped)
        assert not unserved(served_rules, scraped), unserved(served_rules, scraped)
        assert all(exported(n, scraped) is None for n in WRITTEN_BY_PROMETHEUS)
        # the converse: every family sync serves is charted
        charted = {family.name for n in panels if (family := exported(n, scraped))}
        assert set(scraped) - charted == set(), set(scraped) - charted
        # the ADD COLUMN reads emp again: a stop before that is done is an interrupted load
        wait_for("emp read again", lambda: "resnapshot_done" in said(), 60, every=0.2)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0, said()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        out.close()
        err.close()
