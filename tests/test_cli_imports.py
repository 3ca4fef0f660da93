"""The command line answers at once (issue 34 item 5): ``--help``, every ``COMMAND --help`` and
a completion TAB import typer (and rich, for help) but none of what the commands run on: no
database or Redis driver, no YAML, no pydantic, none of migrator's commands, render, mapping,
source... (``migrator --help`` took 0.9-1.8 s importing them all). Checked by the modules
loaded, not by a clock: a fresh interpreter runs each through the console entry point, then
lists ``sys.modules``. benchmarks/cli_bench.py measures the time."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import typer.main

from migrator.cli import app
from tests.test_startup import interrupted_at_import

COMMANDS = sorted(typer.main.get_command(app).commands)  # type: ignore[attr-defined]
LIBRARIES = ("sqlalchemy", "redis", "pymysql", "asyncmy", "MySQLdb", "yaml", "pydantic",
             "prometheus_client", "dask", "distributed")  # fmt: skip
LIGHT = {"migrator", "migrator.__main__", "migrator.errors", "migrator.urls"}  # + migrator.cli.*

# Runs the entry point once per (argv, environment) in this one process, output captured,
# then prints {"out": [what each printed], "modules": [every module imported]} as JSON.
CHILD = """
import contextlib, io, json, os, sys
from migrator.__main__ import main
runs, outs = json.loads(sys.argv[1]), []
for argv, env in runs:
    sys.argv = argv
    os.environ.update(env)
    with contextlib.redirect_stdout(io.StringIO()) as out:
        try:
            main()
        except SystemExit as done:
            assert done.code in (0, None), (argv, env, done.code, out.getvalue())
    for name in env:
        del os.environ[name]
    outs.append(out.getvalue())
print(json.dumps({"out": outs, "modules": sorted(sys.modules)}))
"""


def run_in_one_process(runs: list[tuple[list[str], dict[str, str]]]) -> tuple[list[str], set[str]]:
    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(runs)],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.splitlines()[-1])
    return found["out"], set(found["modules"])


def heavy(modules: set[str]) -> list[str]:
    """The modules a help or a TAB must not need."""
    return sorted(
        m
        for m in modules
        if m.split(".")[0] in LIBRARIES
        or (m.startswith("migrator.") and m not in LIGHT and not m.startswith("migrator.cli"))
    )


def tab(line: str) -> tuple[list[str], dict[str, str]]:
    """A bash completion request for the word at the end of ``line`` (click's protocol)."""
    env = {"_MIGRATOR_COMPLETE": "complete_bash", "COMP_WORDS": line,
           "COMP_CWORD": str(len(line.split(" ")) - 1)}  # fmt: skip
    return ["migrator"], env


def test_help_of_the_app_and_of_every_command_imports_only_typer_and_rich() -> None:
    runs = [(["migrator", "--help"], {})] + [(["migrator", c, "--help"], {}) for c in COMMANDS]
    outs, modules = run_in_one_process(runs)
    assert all("Usage" in out for out in outs), outs  # each help was printed
    assert len(COMMANDS) >= 6 and "Commands" in outs[0]
    assert heavy(modules) == []


def test_a_completion_tab_imports_neither_rich_nor_the_commands() -> None:
    outs, modules = run_in_one_process(
        [tab("migrator mi"), tab("migrator migrate --ta"), tab("migrator sync --health-")]
    )
    assert outs[0].split() == ["migrate"], outs
    assert outs[1].split() == ["--target", "--tables"], outs
    assert outs[2].split() == ["--health-stall", "--health-retries"], outs
    assert heavy(modules) == []
    assert not {m for m in modules if m.split(".")[0] == "rich"}, "rich is for help only"


def test_ctrl_c_while_the_command_imports_its_libraries_is_one_line_and_130() -> None:
    """The command's libraries now load once it is chosen, inside typer, which would turn a
    Ctrl-C there into a silent exit 130: it is the same line as while the program starts
    (tests/test_startup.py), sent here once SQLAlchemy is being imported."""
    code, err = interrupted_at_import(re.compile(r"\|\s+sqlalchemy$"), "SQLAlchemy")
    assert code == 130, err[-1500:]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-1500:]
    assert "error: interrupted while starting: nothing was done" in err, err[-1500:]
