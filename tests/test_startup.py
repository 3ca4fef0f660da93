"""The program while it starts (issue 27 items 3 and 6): ``migrator --version`` answers without
importing the command line's libraries (it took 1.3-3 s importing SQLAlchemy), and a Ctrl-C
while the program is still starting is one line, exit 130, saying nothing was done (it was
a ``KeyboardInterrupt`` traceback and exit -2)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

HEAVY = ("sqlalchemy", "typer", "rich", "redis", "pymysql")
HEAVY_LINE = re.compile(rf"\|\s+({'|'.join(HEAVY)})\b")


def test_version_imports_none_of_the_heavy_libraries() -> None:
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "migrator", "--version"],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0 and done.stdout.startswith("migrator "), done
    imported = {line.split("|")[-1].strip().split(".")[0] for line in done.stderr.splitlines()}
    assert not imported & set(HEAVY), sorted(imported & set(HEAVY))


def test_ctrl_c_while_starting_is_130_without_a_traceback() -> None:
    """SIGINT once the command line's imports are under way (seen in ``-X importtime``'s
    lines as they come), before any command runs."""
    code, err = interrupted_at_import(HEAVY_LINE, "a heavy library")
    assert code == 130, err[-1500:]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-1500:]
    assert "error: interrupted while starting: nothing was done" in err


def interrupted_at_import(
    line: re.Pattern[str], what: str, sig: signal.Signals = signal.SIGINT, again: bool = False
) -> tuple[int, str]:
    """``migrator validate`` sent ``sig`` once ``-X importtime`` shows ``line`` being
    imported (``again``: and once more as soon as it says it was interrupted); (its exit
    code, its stderr)."""
    proc = subprocess.Popen(
        [sys.executable, "-X", "importtime", "-m", "migrator", "validate", "nowhere.yaml"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    watchdog = threading.Timer(60, proc.kill)
    watchdog.start()
    try:
        assert proc.stderr is not None
        while not line.search(text := proc.stderr.readline()):
            assert text, f"the imports ended before {what} was seen"
        proc.send_signal(sig)
        said = ""
        while again and "interrupted" not in said:
            said = proc.stderr.readline()
            assert said, "it ended without saying it was interrupted"
        if again:
            proc.send_signal(sig)  # a second Ctrl-C as the line is said
        _, err = proc.communicate(timeout=60)
        err = said + err
    finally:
        watchdog.cancel()
    return proc.returncode, err


STARTING = "error: interrupted while starting: nothing was done"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_second_interrupt_as_the_line_is_said_changes_nothing(sig: signal.Signals) -> None:
    """Issue 35 item 3: the second Ctrl-C (or SIGTERM) arrived as the line was written and
    ended the process by SIGINT, with a traceback."""
    code, err = interrupted_at_import(HEAVY_LINE, "a heavy library", sig, again=True)
    assert code == 130, err[-1500:]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-1500:]
    assert err.count(STARTING) == 1, err[-1500:]


#: the command line's last import, as typer builds it: the parse comes next
PARSING = re.compile(r"\|\s*typer\._adapters$")


def test_sigterm_as_typer_reads_the_command_line_is_one_line_and_130() -> None:
    """Issue 35 item 3: an interrupt while typer builds and parses the command line was
    typer's silent exit 130, or a traceback and a death by the signal."""
    code, err = interrupted_at_import(PARSING, "typer's adapters", signal.SIGTERM)
    assert code == 130, err[-1500:]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-1500:]
    assert "interrupted" in err.replace("import time", ""), err[-1500:]


#: ``migrator COMMAND nowhere.yaml`` in a process that signals itself right after the error line
#: is said (the window where the early-signal fault schedule saw exit -2: 14 of 40 runs)
SIGNAL_AFTER_THE_LINE = """
import os, signal, sys
import migrator.render.console as console
said = console.say
def say(*args, **kwargs):
    said(*args, **kwargs)
    if args[0] == "error":
        os.kill(os.getpid(), signal.{sig})
console.say = say
sys.argv = ["migrator", "{command}", "nowhere.yaml"]
from migrator.__main__ import main
main()
"""


@pytest.mark.parametrize("command", ["sync", "migrate"])
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_a_signal_once_the_outcome_is_said_changes_nothing(command: str, sig: str) -> None:
    """Issue 35 item 3: a Ctrl-C just after ``sync`` said why it stops (a mapping file that
    does not exist) was a second outcome ("interrupted: nothing was done", 130), or a death by
    the signal (-2): the exit is the said outcome's, 2, and nothing more is said."""
    done = subprocess.run([sys.executable, "-c", SIGNAL_AFTER_THE_LINE.format(
        sig=sig, command=command)], capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 2, done.stderr[-1500:]
    assert "mapping file not found" in done.stderr
    assert "interrupted" not in done.stderr and "Traceback" not in done.stderr, done.stderr


#: a module run as ``python -m``, as the fault schedules run migrator: a KeyboardInterrupt left
#: an exec() of a string (as one does in a dataclass's generated __init__ while a module is
#: imported) and was caught; then ``migrator --version`` runs to its end
CAUGHT_IN_EXEC = """
import sys
import migrator.cli  # (every module the command needs already imported)
from migrator.__main__ import main
try:
    exec("raise KeyboardInterrupt")
except KeyboardInterrupt:
    pass
sys.argv = ["migrator", "--version"]
main()
"""


def test_an_interrupt_caught_in_an_exec_does_not_end_the_process_by_sigint(
    tmp_path: Path,
) -> None:
    """Issue 35 item 3: 9 of 60 runs of ``python -m migrator`` sent SIGINT or SIGTERM in their
    first 0.6 s said "interrupted while starting" and then died by SIGINT (-2): CPython marks
    the KeyboardInterrupt as unhandled when it leaves an exec() of a string, and ends a ``-m``
    run by the signal whatever its exit code. The decided exit stands (errors.decided)."""
    (tmp_path / "caught_in_exec.py").write_text(CAUGHT_IN_EXEC)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    done = subprocess.run([sys.executable, "-m", "caught_in_exec"], capture_output=True,
                          text=True, timeout=60, env=env, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr[-1500:]
    assert done.stdout.startswith("migrator ") and "Traceback" not in done.stderr
