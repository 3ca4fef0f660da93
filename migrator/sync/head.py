"""Where the source's log ends, asked of the source itself, for a lag that is true under a
backlog.

The reader learns how far the log reaches from what it reads: when it is the part that is
behind (a backlog of small transactions), everything it has read may well be applied, and
the lag computed from it would read 0 while sync is minutes behind. ``HeadWatch`` asks the
source every ``interval`` seconds, on a connection of its own, where its log ends
(``SHOW MASTER STATUS`` / ``SHOW BINARY LOG STATUS``) and its GTID state
(``@@gtid_binlog_pos`` on MariaDB, ``@@gtid_executed`` on MySQL), and, when the applied
position is in an older file, the sizes of the files between (``SHOW BINARY LOGS``); the
figures (``figures.SyncFigures.head_at``) turn that into the lag's evidence and into the
bytes and transactions between the applied position and the log's end. A failed poll is
tried again at the next one: the follow loop finds lost connections of its own.
"""

from __future__ import annotations

import threading
from contextlib import suppress
from typing import Any

from migrator.source.binlog.settings import log_status
from migrator.source.mysql import Source
from migrator.sync.figures import SyncFigures

HEAD_POLL_SECONDS = 0.25


class HeadWatch:
    """A thread that tells ``figures`` where the source's log ends, every ``interval`` s."""

    def __init__(self, url: str, figures: SyncFigures, interval: float = HEAD_POLL_SECONDS):
        self.url, self.figures, self.interval = url, figures, interval
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="source-head", daemon=True)
        self.source: Source | None = None
        self.mariadb: bool | None = None

    def start(self) -> None:
        self.thread.start()

    def close(self) -> None:
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join(5.0)

    def _run(self) -> None:
        try:
            while not self.stop.is_set():
                try:
                    self.poll()
                except Exception:  # a lost connection: a new one at the next poll
                    self._drop()
                self.stop.wait(self.interval)
        finally:
            self._drop()

    def _drop(self) -> None:
        if self.source is not None:
            with suppress(Exception):
                self.source.close()
            self.source = None

    def poll(self) -> None:
        if self.source is None:
            self.source = Source(self.url)
        conn = self.source.raw_connection()
        if self.mariadb is None:
            self.mariadb = "mariadb" in _value(conn, "SELECT VERSION()").lower()
        head = log_status(conn)
        if head is None:
            return
        gtid = _value(conn, "SELECT @@GLOBAL.gtid_binlog_pos" if self.mariadb
                      else "SELECT @@GLOBAL.gtid_executed")  # fmt: skip
        applied = self.figures.position
        sizes: dict[str, int] | None = None
        if applied is not None and applied.file != head[0]:
            sizes = {_text(r[0]): int(_text(r[1])) for r in _rows(conn, "SHOW BINARY LOGS")}
        conn.rollback()
        self.figures.head_at(head[0], head[1], gtid.replace("\n", ""), sizes)


def _rows(conn: Any, sql: str) -> list[Any]:
    cursor = conn.cursor()
    try:
        cursor.execute(sql)
        return list(cursor.fetchall())
    finally:
        cursor.close()


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, (bytes, bytearray)) else str(value)


def _value(conn: Any, sql: str) -> str:
    rows = _rows(conn, sql)
    return _text(rows[0][0]) if rows and rows[0][0] is not None else ""
