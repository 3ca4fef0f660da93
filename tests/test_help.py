"""Help is a tested contract (STYLE habit 10): every command and option explains itself."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

import migrator
from migrator.cli import app

ROOT = typer.main.get_command(app)
COMMANDS = sorted(ROOT.commands)  # type: ignore[attr-defined]


def test_all_commands_of_the_spec_exist() -> None:
    assert set(COMMANDS) >= {"init", "validate", "dry-run", "migrate", "verify"}


@pytest.mark.parametrize("name", COMMANDS)
def test_command_has_help_with_an_example(name: str) -> None:
    command = ROOT.commands[name]  # type: ignore[attr-defined]
    assert command.help and "Example" in command.help, f"{name}: help needs an example"


@pytest.mark.parametrize("name", COMMANDS)
def test_every_option_has_help(name: str) -> None:
    for param in ROOT.commands[name].params:  # type: ignore[attr-defined]
        assert getattr(param, "help", None), f"{name} {param.name}: no help text"


@pytest.mark.parametrize("name", COMMANDS)
def test_help_renders(name: str) -> None:
    result = CliRunner().invoke(app, [name, "--help"])
    assert result.exit_code == 0 and "Usage" in result.output


def test_version() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.startswith("migrator ")


def test_installed_command_prints_the_package_version() -> None:
    # the console script of the installed distribution, whose metadata takes its version
    # from migrator.__version__ (pyproject.toml: dynamic)
    command = Path(sys.executable).with_name("migrator")
    result = subprocess.run(
        [str(command), "--version"], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"migrator {migrator.__version__}\n"
    assert importlib.metadata.version("migrator") == migrator.__version__


@pytest.mark.parametrize("command", ["migrate", "verify", "sync", "init", "validate", "dry-run"])
def test_help_at_80_columns_cuts_no_value(command: str) -> None:
    """No option's help is cut with '…' on an 80-column terminal (issue 27 item 6: sync's
    --online-load/--consistent-load pair took a column of its own and squeezed the help
    text until URLs and environment variables were cut)."""
    done = subprocess.run([sys.executable, "-m", "migrator", command, "--help"],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "COLUMNS": "80", "TERM": "dumb"})  # fmt: skip
    assert done.returncode == 0 and "--help" in done.stdout, done.stderr
    assert "…" not in done.stdout, done.stdout
