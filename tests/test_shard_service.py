"""docs/sharding.md's "As a service" is a contract (issue 39): its systemd template is
ops/systemd/migrator-sync@.service, shown whole in the page, runs ``sync --shard %i`` (one
instance per shard), restarts on the same exit codes as the one-source unit (tests/
test_sync_service.py) and passes ``systemd-analyze verify`` where systemd is installed."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_sync_service import unit as one_source_unit

REPO = Path(__file__).resolve().parent.parent
DOC = (REPO / "docs" / "sharding.md").read_text(encoding="utf-8")
SECTION = DOC.split("## sync", 1)[1]
TEMPLATE = REPO / "ops" / "systemd" / "migrator-sync@.service"


def test_the_page_shows_the_template_as_it_is_and_it_runs_one_shard_per_instance() -> None:
    text = TEMPLATE.read_text(encoding="utf-8")
    assert re.findall(r"```ini\n(.*?)```", SECTION, re.DOTALL) == [text]
    assert f"](../{TEMPLATE.relative_to(REPO).as_posix()})" in SECTION
    service = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    assert service["ExecStart"].endswith("sync /etc/migrator/shop.yaml --shard %i")
    one = one_source_unit()["Service"]
    for key in ("Restart", "RestartSec", "RestartPreventExitStatus", "TimeoutStopSec"):
        assert service[key] == one[key], key
    assert "SECRET" not in text
    env = re.findall(r"```sh\n(.*?)```", SECTION, re.DOTALL)[0]
    assert "MIGRATOR_SYNC_METRICS=" in env  # each instance its own /metrics address


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze here")
def test_systemd_analyze_verifies_an_instance_of_the_template(tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("migrator")
    program = str(script) if script.is_file() else f"{sys.executable} -m migrator"
    (tmp_path / "shop.env").write_text("EAST_PASSWORD=x\n")
    (tmp_path / "shop-east.env").write_text("MIGRATOR_SYNC_METRICS=127.0.0.1:9108\n")
    text = TEMPLATE.read_text(encoding="utf-8")
    text = text.replace("/opt/migrator/.venv/bin/migrator", program)
    text = text.replace("/etc/migrator/shop", str(tmp_path / "shop"))
    (tmp_path / "migrator-sync-shop@.service").write_text(text)
    instance = tmp_path / "migrator-sync-shop@east.service"
    instance.symlink_to(tmp_path / "migrator-sync-shop@.service")

    def verify() -> subprocess.CompletedProcess[str]:
        return subprocess.run(["systemd-analyze", "verify", str(instance)], capture_output=True,
                              text=True)  # fmt: skip

    done = verify()
    ours = [line for line in done.stderr.splitlines() if "migrator-sync-shop@" in line]
    assert done.returncode == 0 and not ours, done.stderr
    (tmp_path / "migrator-sync-shop@.service").write_text(text.replace("RestartSec=", "RestarSec="))
    assert "RestarSec" in verify().stderr  # the check can fail
