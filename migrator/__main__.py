"""The console entry point (``migrator``, ``python -m migrator``), kept light: ``--version``
answers without importing the command line (typer, rich, SQLAlchemy: seconds on a busy
machine), and a Ctrl-C or SIGTERM while the program is still starting is one line and exit
130, not a Python traceback (nor, for SIGTERM, a death by the signal): SIGTERM is made an
interrupt before anything else of migrator is imported, and once the line is decided a second
Ctrl-C or SIGTERM is ignored (it was a traceback and a death by SIGINT, the line half said).
Once a command's outcome is decided (errors.decided) the process is deaf too, and a signal that
still slips in as it unwinds to exit ends it with the decided code, never by the signal.
A signal in the interpreter's own start, before this module runs, is Python's."""

from __future__ import annotations

import signal
import sys


def _terminated(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM while starting: as Ctrl-C (each command sets its own)


signal.signal(signal.SIGTERM, _terminated)  # first: the imports below take their time

from migrator.errors import interrupted_starting, outcome, own_process  # noqa: E402


def main() -> None:
    signal.signal(signal.SIGTERM, _terminated)
    own_process()
    try:
        _main()
    finally:
        # CPython (3.11, 3.12) marks a KeyboardInterrupt that left any exec() of a string as
        # unhandled even when it was caught later (a Ctrl-C in a dataclass's generated
        # __init__ as a module is imported), and then ends `python -m migrator` by SIGINT
        # whatever its exit code: every exec of a string clears the mark, this one last
        exec("None")


def _main() -> None:
    try:
        if sys.argv[1:] == ["--version"]:
            from migrator import __version__

            sys.stdout.write(f"migrator {__version__}\n")
            sys.exit(0)
        from migrator.cli import main as command_line  # (every command registered)
    except KeyboardInterrupt:
        interrupted_starting()
    try:
        command_line()
    except KeyboardInterrupt:  # a signal as the outcome was said, or as the process unwound
        code = outcome()
        if code is None:
            interrupted_starting("error: interrupted: nothing was done\n")
        sys.exit(code)


if __name__ == "__main__":
    main()
