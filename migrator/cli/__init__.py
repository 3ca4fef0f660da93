"""The command line: parse options, call commands, map errors to exit codes — the app and
its shared options (``app``, ``options``), then one module per command, each registered on
the app when imported, in the order ``--help`` lists them."""

# isort: off
from migrator.cli import migrate, init, validate, dryrun, verify, sync  # noqa: F401

# isort: on
from migrator.cli.app import app, main, run

__all__ = ["app", "main", "run"]
