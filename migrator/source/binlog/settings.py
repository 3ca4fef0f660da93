"""What ``sync`` needs from the source, checked before anything is read, each gap with its fix.

Row changes can only be kept exact from a binary log in row format with full before/after
images and full metadata (column names, ENUM/SET labels, charsets): ``log_bin``,
``binlog_format=ROW``, ``binlog_row_image=FULL``, ``binlog_row_metadata=FULL`` (MariaDB >= 10.5,
MySQL >= 8.0.14). The reading account needs ``REPLICATION SLAVE`` (to stream the log),
``REPLICATION CLIENT`` (``SHOW BINARY LOG STATUS`` / ``SHOW MASTER STATUS``; shown as BINLOG
MONITOR in MariaDB 10.11) and ``SELECT``; no RELOAD: the first load's snapshot takes its
position without ``FLUSH TABLES WITH READ LOCK`` (MariaDB: the snapshot's own position; MySQL:
after ``@@gtid_executed``, ``snapshot.gtid_snapshot``) — except on a MySQL whose executed set
holds tagged GTIDs, which the binlog library cannot ask for: there the lock is taken, and
RELOAD is asked for. Besides, per engine (``_engine_gaps``): on MySQL no partial JSON updates
(``binlog_row_value_options=''``) and ``gtid_mode=ON`` (compressed transactions,
``binlog_transaction_compression=ON``, are read: ``stream``); on MariaDB no compressed
events (``log_bin_compress=OFF``). A session can still change most of these for itself: the reader
stops at such an event (``guard``).
"""

from __future__ import annotations

import weakref
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

from migrator.errors import SourceError
from migrator.source.binlog.gtid_set import GtidSet


@dataclass(frozen=True)
class Gap:
    problem: str
    fix: str


def _rows(conn: Any, sql: str) -> list[tuple[Any, ...]]:
    cursor = conn.cursor()
    try:
        cursor.execute(sql)
        return list(cursor.fetchall())
    finally:
        cursor.close()


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, (bytes, bytearray)) else str(v)


def _variable(conn: Any, name: str) -> str | None:
    rows = _rows(conn, f"SHOW GLOBAL VARIABLES LIKE '{name}'")
    return _text(rows[0][1]) if rows else None


def gaps(conn: Any, user: str) -> list[Gap]:
    """Every setting or privilege ``sync`` lacks on this server (empty when all is well)."""
    out: list[Gap] = []
    log_bin = (_variable(conn, "log_bin") or "OFF").upper()
    if log_bin != "ON":
        out.append(
            Gap(
                "the binary log is off (log_bin=OFF)",
                "start the server with --log-bin (my.cnf [mysqld]: log_bin = mysql-bin, "
                "server_id = 1), then restart it",
            )
        )
    wanted = (
        ("binlog_format", "ROW", "SET GLOBAL binlog_format = 'ROW'"),
        ("binlog_row_image", "FULL", "SET GLOBAL binlog_row_image = 'FULL'"),
        ("binlog_row_metadata", "FULL", "SET GLOBAL binlog_row_metadata = 'FULL'"),
    )
    for name, value, statement in wanted:
        have = _variable(conn, name)
        if have is None:
            out.append(
                Gap(
                    f"the server has no {name} setting",
                    f"upgrade to MariaDB >= 10.5 or MySQL >= 8.0.14 (needed for {name}={value})",
                )
            )
        elif have.upper() != value:
            out.append(
                Gap(
                    f"{name} is {have}, not {value}",
                    f"{statement}; and {name} = {value} under [mysqld] in my.cnf to keep it "
                    "(sessions opened before SET GLOBAL keep the old value)",
                )
            )
    out += _engine_gaps(conn)
    lock = _needs_lock(conn)
    wanted_grants = "REPLICATION SLAVE, REPLICATION CLIENT, SELECT" + (", RELOAD" if lock else "")
    grant = f"GRANT {wanted_grants} ON *.* TO {user}"
    privileges = {_text(r[0]).upper() for r in _rows(conn, _PRIVILEGES)}
    if not privileges & {"REPLICATION SLAVE", "ALL PRIVILEGES"} and not _has_all(conn):
        out.append(Gap("the user lacks the REPLICATION SLAVE privilege", grant))
    try:
        log_status(conn)
    except Exception:
        out.append(Gap("the user lacks the REPLICATION CLIENT privilege", grant))
    # a MySQL whose executed GTID set is tagged: the first load's snapshot reads its log
    # position under FLUSH TABLES WITH READ LOCK, which wants RELOAD (or FLUSH_TABLES)
    if (
        lock
        and not privileges & {"RELOAD", "FLUSH_TABLES", "ALL PRIVILEGES"}
        and not _granted(conn, ("RELOAD", "FLUSH_TABLES", "ALL PRIVILEGES ON *.*"))
    ):
        out.append(
            Gap(
                "the user lacks the RELOAD privilege (this MySQL executed tagged GTIDs, so the "
                "first load's snapshot takes its binary-log position under FLUSH TABLES WITH "
                "READ LOCK)",
                grant,
            )
        )
    return out


def _needs_lock(conn: Any) -> bool:
    """A MySQL with GTIDs on whose ``@@gtid_executed`` holds tagged GTIDs (``uuid:tag:n``):
    its snapshot's position is read under the global read lock (``snapshot.gtid_snapshot``
    cannot locate a tagged set). GTIDs off is refused by ``_engine_gaps``."""
    if "mariadb" in _text(_rows(conn, "SELECT VERSION()")[0][0]).lower():
        return False
    executed = _text(_rows(conn, "SELECT @@GLOBAL.gtid_executed")[0][0])
    try:
        return GtidSet.parse(executed).tagged
    except ValueError:
        return False


def _engine_gaps(conn: Any) -> list[Gap]:
    """The settings one engine has that make its log unreadable or inexact for sync."""
    version = _text(_rows(conn, "SELECT VERSION()")[0][0]).lower()
    if "mariadb" in version:
        wanted = [("log_bin_compress", "OFF", "SET GLOBAL log_bin_compress = OFF")]
    else:
        wanted = [
            # partial JSON changes cannot be replayed exactly (guard); 8.0.3+
            ("binlog_row_value_options", "", "SET GLOBAL binlog_row_value_options = ''"),
            # the online snapshot's chunks wait for the applied GTIDs to be visible
            # (docs/consistency.md) and a failover continues by the executed GTID set
            ("gtid_mode", "ON", "SET GLOBAL gtid_mode = ... step by step up to ON (MySQL's "
             "manual: 'Enabling GTID Transactions Online')"),
        ]  # fmt: skip
    out = []
    for name, value, statement in wanted:
        have = _variable(conn, name)
        if have is None or have.upper() == value:  # absent: older servers lack the feature
            continue
        shown = value or "empty"
        out.append(
            Gap(
                f"{name} is {have or 'empty'}, not {shown}",
                f"{statement}; and {name} = {value or chr(39) * 2} under [mysqld] in my.cnf to "
                "keep it",
            )
        )
    return out


#: per connection, the statement that answered (MySQL 8.2+ renamed SHOW MASTER STATUS and
#: 8.4 removed the old name; MariaDB and older MySQL have only the old one)
_STATUS: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
_NAMES = ("SHOW BINARY LOG STATUS", "SHOW MASTER STATUS")


def log_status(conn: Any) -> tuple[str, int] | None:
    """The end of the binary log (file, position), or None when it is off: ``SHOW BINARY
    LOG STATUS``, or ``SHOW MASTER STATUS`` where that is the only name."""
    known = _STATUS.get(conn)
    if known is not None:
        rows = _rows(conn, known)
    else:
        try:
            rows = _rows(conn, _NAMES[0])
            known = _NAMES[0]
        except Exception:
            rows = _rows(conn, _NAMES[1])
            known = _NAMES[1]
        with suppress(TypeError):  # a connection that takes no weak reference
            _STATUS[conn] = known
    if not rows:
        return None
    return _text(rows[0][0]), int(_text(rows[0][1]))


# the current user's global privileges (USER_PRIVILEGES shows only one's own rows)
_PRIVILEGES = (
    "SELECT PRIVILEGE_TYPE FROM information_schema.USER_PRIVILEGES WHERE GRANTEE = "
    "CONCAT('''', SUBSTRING_INDEX(CURRENT_USER(), '@', 1), '''@''', "
    "SUBSTRING_INDEX(CURRENT_USER(), '@', -1), '''')"
)


def _has_all(conn: Any) -> bool:
    """A user with every privilege through a role or a grant USER_PRIVILEGES does not list."""
    try:
        grants = " ".join(_text(r[0]) for r in _rows(conn, "SHOW GRANTS"))
    except Exception:
        return False
    return "ALL PRIVILEGES ON *.*" in grants.upper() or "REPLICATION SLAVE" in grants.upper()


def _granted(conn: Any, words: tuple[str, ...]) -> bool:
    """SHOW GRANTS names one of ``words`` (a grant through a role USER_PRIVILEGES omits)."""
    try:
        grants = " ".join(_text(r[0]) for r in _rows(conn, "SHOW GRANTS")).upper()
    except Exception:
        return False
    return any(w in grants for w in words)


def refuse_gaps(conn: Any, user: str, where: str) -> None:
    """Raise one SourceError (exit 2) naming every gap and its fix."""
    found = gaps(conn, user)
    if not found:
        return
    lines = "; ".join(g.problem for g in found)
    fixes = "\n  ".join(f"- {g.problem}: {g.fix}" for g in found)
    raise SourceError(
        f"sync cannot follow the binary log of {where}: {lines}",
        "fix on the source server, then run sync again:\n  " + fixes,
    )
