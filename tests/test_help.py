"""Help is a tested contract (STYLE habit 10): every command and option explains itself."""

from __future__ import annotations

import pytest
import typer.main
from typer.testing import CliRunner

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
