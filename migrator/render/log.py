"""sync's log as the command line writes it (the events: sync/log.py, logger
``migrator.sync``): on stderr, one record a line, ``text`` (no colour) or ``json`` (one
object a line, for log shippers)."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import IO

from migrator.errors import MigratorError
from migrator.render.console import err

FORMATS = ("text", "json")
LOGGER = logging.getLogger("migrator.sync")  # the one sync/log.py writes to


def _time(record: logging.LogRecord) -> str:
    moment = datetime.fromtimestamp(record.created, timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


class TextFormatter(logging.Formatter):
    """``2026-11-29T02:30:00.123Z info ddl: <message>``: one line, no colour."""

    def format(self, record: logging.LogRecord) -> str:
        name = getattr(record, "event", "log")
        message = " ".join(record.getMessage().split())  # one line, whatever it says
        return f"{_time(record)} {record.levelname.lower()} {name}: {message}"


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``time``, ``level``, ``event``, ``message``, ``fields``."""

    def format(self, record: logging.LogRecord) -> str:
        return json.dumps(
            {
                "time": _time(record),
                "level": record.levelname.lower(),
                "event": getattr(record, "event", "log"),
                "message": record.getMessage(),
                "fields": getattr(record, "fields", {}),
            },
            default=str,
        )


@contextmanager
def logging_to(stream: IO[str], fmt: str = "text") -> Iterator[None]:
    """sync's events written to ``stream`` (one line each, flushed) while the block runs."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    before = LOGGER.level
    LOGGER.addHandler(handler)
    LOGGER.setLevel(logging.INFO)
    try:
        yield
    finally:
        LOGGER.removeHandler(handler)
        LOGGER.setLevel(before)


@contextmanager
def sync_logs(fmt: str | None) -> Iterator[bool]:
    """sync's log on stderr while the block runs, in ``fmt`` (``text``, ``json``), or as
    text when none is given and stderr is not a terminal; yields whether it is written. An
    error that ends the run is logged too (an ``error`` event) before the command line prints
    it."""
    if fmt is not None and fmt not in FORMATS:
        raise MigratorError(f"--log-format {fmt!r} is not one of {', '.join(FORMATS)}",
                            "e.g. --log-format json (one JSON object per line)")  # fmt: skip
    if fmt is None and err.is_terminal:
        yield False
        return
    with logging_to(sys.stderr, fmt or "text"):
        try:
            yield True
        except MigratorError as e:
            _event("error", e.message, hint=e.hint, exit_code=e.exit_code)
            raise
        except KeyboardInterrupt as e:
            _event("interrupted", "stopped before the first load was done",
                   hint=getattr(e, "hint", None), exit_code=130)  # fmt: skip
            raise


def _event(name: str, message: str, **fields: object) -> None:
    LOGGER.error(message, extra={"event": name, "fields": fields})
