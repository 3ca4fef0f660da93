"""The console entry point (``migrator``, ``python -m migrator``), kept light: ``--version``
answers without importing the command line (typer, rich, SQLAlchemy: seconds on a busy
machine), and a Ctrl-C or SIGTERM while the program is still starting is one line and exit
130, not a Python traceback (nor, for SIGTERM, a death by the signal)."""

from __future__ import annotations

import signal
import sys

from migrator.errors import INTERRUPTED_STARTING


def _terminated(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM while starting: as Ctrl-C (each command sets its own)


def main() -> None:
    signal.signal(signal.SIGTERM, _terminated)
    try:
        if sys.argv[1:] == ["--version"]:
            from migrator import __version__

            sys.stdout.write(f"migrator {__version__}\n")
            sys.exit(0)
        from migrator.cli import main as command_line  # (every command registered)
    except KeyboardInterrupt:
        sys.stderr.write(INTERRUPTED_STARTING)
        sys.exit(130)
    command_line()


if __name__ == "__main__":
    main()
