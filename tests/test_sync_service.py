"""docs/sync.md's "Running sync as a service" is a contract (issue 20 item 4, issue 35 item 5):
its systemd unit is ops/systemd/migrator-sync.service, shown whole in the page, passes
``systemd-analyze verify`` (where systemd is installed) and restarts on exactly the exit codes
the table says; the scrape config and the alert rules (ops/prometheus/sync-rules.yml, shown
whole too) are valid YAML whose expressions only name metrics that ``/metrics`` serves; the env
file carries the secrets. promtool's checks of the rules and the dashboard: tests/test_ops.py."""

from __future__ import annotations

import configparser
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from migrator.source.binlog.reader import BinlogPosition
from migrator.sync.exporter import MetricsServer
from migrator.sync.figures import SyncFigures

REPO = Path(__file__).resolve().parent.parent
DOC = (REPO / "docs" / "sync.md").read_text(encoding="utf-8")
SECTION = DOC.split("## Running sync as a service", 1)[1].split("\n## ", 1)[0]
UNIT = REPO / "ops" / "systemd" / "migrator-sync.service"
RULES = REPO / "ops" / "prometheus" / "sync-rules.yml"


def blocks(kind: str) -> list[str]:
    return re.findall(rf"```{kind}\n(.*?)```", SECTION, re.DOTALL)


def unit() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(UNIT.read_text(encoding="utf-8"))
    return parser


def test_the_page_shows_the_unit_and_the_rules_of_ops_as_they_are() -> None:
    assert blocks("ini") == [UNIT.read_text(encoding="utf-8")]
    assert blocks("yaml")[1] == RULES.read_text(encoding="utf-8")
    for path in (UNIT, RULES):  # and links to them
        assert f"](../{path.relative_to(REPO).as_posix()})" in SECTION


def test_the_unit_restarts_on_failure_except_the_codes_a_person_must_act_on() -> None:
    service = unit()["Service"]
    assert service["Restart"] == "on-failure"
    # 1 (DDL), 2 (usage, settings), 4 (Redis refuses writes: out of memory...) need a
    # person, 130 was asked for; 3 and signals are restarted
    assert service["RestartPreventExitStatus"].split() == ["1", "2", "4", "130"]
    table = SECTION.split("| exit |", 1)[1]
    for code, restart in (("0", "no"), ("1", "no"), ("2", "no"), ("3", "yes"), ("4", "no"),
                          ("130", "no")):  # fmt: skip
        row = next(line for line in table.splitlines() if line.startswith(f"| {code} |"))
        assert row.rstrip(" |").split("|")[-1].strip().startswith(restart), row
    # every code the table says not to restart on, and no other, is in the unit
    rows = [line.split("|")[1:] for line in table.splitlines() if re.match(r"\| \d+ \|", line)]
    prevented = {cells[0].strip() for cells in rows if cells[-2].strip().startswith("no")}
    assert prevented - {"0"} == set(service["RestartPreventExitStatus"].split())
    assert "--metrics 127.0.0.1:9108" in service["ExecStart"]
    # secrets from the environment file, none on the command line
    assert service["EnvironmentFile"] == "/etc/migrator/shop.env"
    env = blocks("sh")[0]
    assert "MIGRATOR_SOURCE_URL=" in env and "MIGRATOR_TARGET_URL=" in env
    assert "SECRET" not in UNIT.read_text(encoding="utf-8")


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze here")
def test_systemd_analyze_verifies_the_unit(tmp_path: Path) -> None:
    text = UNIT.read_text(encoding="utf-8")
    # the venv's own `migrator` (verify wants ExecStart's program to exist); this interpreter
    # with -m where the package is imported from a source tree without the script
    script = Path(sys.executable).with_name("migrator")
    program = str(script) if script.is_file() else f"{sys.executable} -m migrator"
    env = tmp_path / "shop.env"
    env.write_text(blocks("sh")[0])
    text = text.replace("/opt/migrator/.venv/bin/migrator", program)
    text = text.replace("/etc/migrator/shop.env", str(env))
    path = tmp_path / "migrator-sync-shop.service"
    assert "/opt/migrator/.venv/bin/migrator" not in text
    path.write_text(text)
    done = subprocess.run(["systemd-analyze", "verify", str(path)], capture_output=True, text=True)
    about_ours = [line for line in done.stderr.splitlines() if path.name in line]
    assert done.returncode == 0 and not about_ours, done.stderr
    # the check can fail: a misspelt key is reported
    path.write_text(text.replace("RestartSec=", "RestartSecs="))
    bad = subprocess.run(["systemd-analyze", "verify", str(path)], capture_output=True, text=True)
    assert "RestartSecs" in bad.stderr


def test_scrape_config_and_alert_rules_name_only_served_metrics() -> None:
    scrape = yaml.safe_load(blocks("yaml")[0])
    rules = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    job = scrape["scrape_configs"][0]
    served_at = unit()["Service"]["ExecStart"].split("--metrics ")[1].split()[0]
    assert job["static_configs"][0]["targets"] == [served_at]
    alerts = {r["alert"]: r["expr"] for g in rules["groups"] for r in g["rules"]}
    # lag, health and retries are each alerted on
    assert {"MigratorSyncLagging", "MigratorSyncUnhealthy", "MigratorSyncRetrying"} <= set(alerts)
    figures = SyncFigures()
    figures.following(BinlogPosition("mysql-bin.000001", 4))
    server = MetricsServer("127.0.0.1:0", figures, "shop")
    try:
        import urllib.request

        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=5) as r:
            served = set(re.findall(r"^(?:# TYPE )?(migrator_sync_\w+)", r.read().decode(), re.M))
    finally:
        server.close()
    named = {n for expr in alerts.values() for n in re.findall(r"migrator_sync_\w+", expr)}
    assert named and named <= served, named - served
    # every metric docs/sync.md lists is served, and every served one is listed
    listed = set(re.findall(r"`(migrator_sync_\w+)", DOC))
    base = {re.sub(r"_(total|info)$", "", n) for n in served}
    assert {re.sub(r"_(total|info)$", "", n) for n in listed} == base
