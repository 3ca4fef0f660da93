"""A consistent snapshot of the source, and where it stands in the binary log.

``start_snapshot(conn)`` opens ``START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY`` at
REPEATABLE READ on a DBAPI connection: every read on that connection until its next COMMIT
sees the source as of one moment. It returns that moment (the server's UTC time) and, when
the server's binary log is on, the log file, position and GTID of the snapshot, from which
``sync`` can follow the log without a gap (notes/binlog.md):

* MariaDB: ``SHOW STATUS LIKE 'binlog_snapshot_%'`` is the position of this very snapshot
  (it stays fixed while others commit); ``BINLOG_GTID_POS(file, pos)`` is its GTID.
* MySQL: there is no such status; the position is read under a short global read lock taken
  around the start of the snapshot (``FLUSH TABLES WITH READ LOCK`` ... ``UNLOCK TABLES``),
  which needs the RELOAD privilege, and ``SHOW BINARY LOG STATUS``, which needs REPLICATION
  CLIENT; without either the snapshot is taken without a position and ``Snapshot.note`` says
  why. sync takes its snapshot and position without a lock where GTIDs are on
  (``gtid_snapshot``).

Works on a connection with or without the drivers' type conversion (values may be bytes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import URL

from migrator.errors import SourceError
from migrator.source.binlog.gtid import locate
from migrator.source.binlog.gtid_set import GtidSet
from migrator.source.connection import first_line

SET_ISOLATION = "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ"
START = "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY"


@dataclass(frozen=True)
class Snapshot:
    """The moment a snapshot shows, and its binary-log coordinates (None: log off)."""

    moment: str  # server time, UTC, 'YYYY-MM-DD HH:MM:SS.ffffff'
    binlog_file: str | None = None
    binlog_position: int | None = None
    gtid: str | None = None  # MariaDB 'domain-server-seq[,...]' or MySQL's GTID set
    note: str | None = None  # why the coordinates are missing, when the log is on

    @property
    def has_position(self) -> bool:
        return self.binlog_file is not None and self.binlog_position is not None

    def as_dict(self) -> dict[str, Any]:
        return {
            "moment": self.moment,
            "binlog_file": self.binlog_file,
            "binlog_position": self.binlog_position,
            "gtid": self.gtid,
            "note": self.note,
        }

    def describe(self) -> str:
        """One line for people: the moment, and the log position when there is one."""
        text = f"MySQL as of {self.moment} UTC"
        if self.has_position:
            text += f", binlog {self.binlog_file}:{self.binlog_position}"
            if self.gtid:
                text += f", GTID {self.gtid}"
        elif self.note:
            text += f" ({self.note})"
        return text


def _text(value: Any) -> str:
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "replace")
    return "" if value is None else str(value)


def _rows(conn: Any, sql: str, args: tuple[Any, ...] | None = None) -> list[tuple[Any, ...]]:
    cursor = conn.cursor()
    try:
        cursor.execute(sql, args)
        return [tuple(r) for r in cursor.fetchall()]
    finally:
        cursor.close()


def is_mariadb(conn: Any) -> bool:
    return "mariadb" in _text(_rows(conn, "SELECT VERSION()")[0][0]).lower()


def binlog_on(conn: Any) -> bool:
    return _text(_rows(conn, "SELECT @@GLOBAL.log_bin")[0][0]) in ("1", "ON")


def start_snapshot(conn: Any) -> Snapshot:
    """Begin a consistent read-only snapshot on ``conn``; returns where it stands. Ends any
    transaction open on ``conn`` first (a snapshot replaces the previous one)."""
    conn.rollback()
    _rows(conn, SET_ISOLATION)
    logging = binlog_on(conn)
    if not logging:
        _rows(conn, START)
        return Snapshot(_moment(conn))
    if is_mariadb(conn):
        _rows(conn, START)
        status = {
            _text(k).lower(): _text(v)
            for k, v in _rows(conn, "SHOW STATUS LIKE 'binlog_snapshot_%'")
        }
        file = status.get("binlog_snapshot_file") or None
        pos = int(status.get("binlog_snapshot_position") or 0)
        gtid = None
        if file is not None:
            gtid = _text(_rows(conn, "SELECT BINLOG_GTID_POS(%s, %s)", (file, pos))[0][0]) or None
        return Snapshot(_moment(conn), file, pos if file else None, gtid)
    return _mysql_snapshot(conn)


def gtid_snapshot(conn: Any, url: URL, reader_id: int) -> Snapshot | None:
    """MySQL with ``gtid_mode=ON``: a consistent snapshot on ``conn`` and a log position to
    follow it from, without a lock (no RELOAD privilege, no FLUSH TABLES WITH READ LOCK
    waiting behind long queries). ``@@GLOBAL.gtid_executed`` is read first: a GTID enters it
    only once InnoDB committed its transaction, so the snapshot begun right after sees every
    transaction of that set, and perhaps a few more that committed in between. The position
    is where that set ends in the log, asked of the server as a replica connecting by GTID
    asks (``gtid.locate``): every transaction before it is in the set, so nothing the snapshot
    lacks comes before it; the few the snapshot already holds beyond the set come after it and
    are applied again, in log order, which converges (a replay, as after a crash). ``reader_id``
    is the server id the position is asked with. None elsewhere (MariaDB, the log off, GTIDs
    off, no GTID executed yet, tagged GTIDs executed): take ``start_snapshot``."""
    conn.rollback()
    if not binlog_on(conn) or is_mariadb(conn):
        return None
    mode = _rows(conn, "SHOW GLOBAL VARIABLES LIKE 'gtid_mode'")
    if not mode or _text(mode[0][1]).upper() != "ON":
        return None
    _rows(conn, SET_ISOLATION)
    executed = _text(_rows(conn, "SELECT @@GLOBAL.gtid_executed")[0][0]).replace("\n", "")
    if not executed or GtidSet.parse(executed).tagged:  # the library cannot locate tags
        return None
    _rows(conn, START)
    moment = _moment(conn)
    file, pos = locate(url, reader_id, executed)
    return Snapshot(moment, file, pos, executed)


def _mysql_snapshot(conn: Any) -> Snapshot:
    """MySQL: the log position under a short global read lock around the snapshot's start."""
    try:
        _rows(conn, "FLUSH TABLES WITH READ LOCK")
    except Exception as e:  # no RELOAD privilege: a snapshot without a position
        _rows(conn, START)
        note = f"binlog position unknown: FLUSH TABLES WITH READ LOCK refused ({first_line(e)})"
        return Snapshot(_moment(conn), note=note)
    try:
        _rows(conn, START)
        try:
            status = _rows(conn, "SHOW BINARY LOG STATUS")  # MySQL 8.4 and later
        except Exception as e:
            try:
                status = _rows(conn, "SHOW MASTER STATUS")
            except Exception:  # no REPLICATION CLIENT: a snapshot without a position
                note = f"binlog position unknown: SHOW BINARY LOG STATUS refused ({first_line(e)})"
                return Snapshot(_moment(conn), note=note)
    finally:
        _rows(conn, "UNLOCK TABLES")
    if not status:
        return Snapshot(_moment(conn), note="binlog position unknown: no binary log status")
    row = status[0]
    gtid = _text(row[4]).replace("\n", "") if len(row) > 4 else ""
    return Snapshot(_moment(conn), _text(row[0]), int(_text(row[1])), gtid or None)


#: how long a chunk waits for the applied transactions to become visible (it takes a
#: commit's last step: milliseconds)
VISIBLE_SECONDS = 60


def wait_visible(conn: Any, gtid: str, seconds: float = VISIBLE_SECONDS) -> None:
    """MySQL: return once every transaction of the GTID set ``gtid`` is committed in the
    storage engine, so that a read view begun afterwards sees them all. MySQL writes a
    transaction to the binary log (where a log reader may already have read it) before it
    commits it in InnoDB, and adds its GTID to ``@@GLOBAL.gtid_executed`` only after that
    commit; ``WAIT_FOR_EXECUTED_GTID_SET`` waits for exactly that. Ends the transaction open
    on ``conn`` (before and after: the wait itself reads no table). An empty set: at once."""
    if not gtid:
        return
    conn.rollback()
    done = _rows(conn, "SELECT WAIT_FOR_EXECUTED_GTID_SET(%s, %s)", (gtid, seconds))[0][0]
    conn.rollback()
    if _text(done) != "0":
        raise SourceError(
            f"the source did not commit the transactions up to GTID set {gtid} within "
            f"{seconds:.0f} s (WAIT_FOR_EXECUTED_GTID_SET returned {_text(done)})",
            "check the server (a stalled commit, a full disk); sync can be started again",
        )


def _moment(conn: Any) -> str:
    return _text(_rows(conn, "SELECT UTC_TIMESTAMP(6)")[0][0])
