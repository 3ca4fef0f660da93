"""What the binary log may carry that sync cannot apply exactly: found in the stream, stopped on.

``settings`` refuses a server whose *global* settings make the log unusable; but MySQL
lets every session change most of them for itself (``SET SESSION binlog_row_image=MINIMAL``,
``binlog_row_value_options=PARTIAL_JSON``, ``binlog_transaction_compression=ON``), and a
global change takes effect for new sessions while sync runs. python-mysql-replication 1.0
reads such events without complaint and yields something wrong or nothing: a compressed
transaction (a Transaction_payload event, type 40) comes through as its GTID event alone, every
row change inside it dropped. So the reader hands every event of those kinds to the checks
here, which raise ``UnsafeLog`` (exit 2) naming the event's position and the setting to fix:

* ``payload``: a Transaction_payload event (``binlog_transaction_compression=ON``) — its row
  changes are not decoded (on any table: which tables it touches is inside the compressed
  bytes); likewise MariaDB's compressed events (``log_bin_compress=ON``, a global setting),
  and MySQL's tagged GTIDs (8.3+, ``uuid:tag:n``: the stored executed set would lack them);
* ``images``: a rows event of a mapped table whose before or after image lacks columns
  (``binlog_row_image=MINIMAL`` or ``NOBLOB``; an INSERT with MINIMAL logs only the columns
  given), or whose table map names no columns (``binlog_row_metadata=MINIMAL``);
* ``partial_json``: an update of a mapped table that logs a JSON column as a partial change
  (``binlog_row_value_options=PARTIAL_JSON``; the library reads only the first of a column's
  changes, so they cannot be replayed). An update event of that kind whose JSON columns are
  logged whole, or unchanged ("same as before"), is applied as any update.

Everything before the event is applied and its position stored; the event's transaction is
not. The transaction stays in the log, so the fix is a new snapshot once no session writes
that way (``sync --reload``).
"""

from __future__ import annotations

from typing import Any

from pymysqlreplication.json_binary import JsonDiff

from migrator.errors import SourceError

#: MySQL's Transaction_payload_event (binlog_transaction_compression=ON)
TRANSACTION_PAYLOAD_EVENT = 40
#: MySQL 8.3+'s GTID event of a tagged GTID (``uuid:tag:n``), which the library does not decode
GTID_TAGGED_LOG_EVENT = 42
#: MariaDB's compressed query and rows events (log_bin_compress=ON): QUERY_COMPRESSED_EVENT,
#: then {WRITE,UPDATE,DELETE}_ROWS_COMPRESSED_EVENT v1 and v2
MARIADB_COMPRESSED = range(165, 172)
_STOPPING = frozenset({TRANSACTION_PAYLOAD_EVENT, GTID_TAGGED_LOG_EVENT, *MARIADB_COMPRESSED})
#: the library's note on an after-image JSON column logged as an empty partial change
_SAME = "same with before values"


class UnsafeLog(SourceError):
    """The binary log holds an event sync cannot apply exactly (exit 2): the settings of the
    session that wrote it, named with the fix."""


RELOAD = (
    "then 'migrator sync MAPPING --reload' loads a new snapshot (the event stays in the log; "
    "everything before it is applied)"
)


def at(event: Any, log_file: str) -> str:
    """Where ``event`` starts in the log (``file:offset``), for messages."""
    return f"{log_file}:{event.packet.log_pos - event.event_size}"


def payload(event: Any, log_file: str) -> None:
    """Raise for a compressed transaction or event (a NotImplementedEvent of type 40, or
    MariaDB's 165-171); other events the library does not implement (MySQL's anonymous GTID
    event, ...) pass."""
    kind = getattr(event, "event_type", None)
    if isinstance(kind, int) and kind in _STOPPING:
        refuse(kind, at(event, log_file))


def refuse(kind: int, where: str) -> None:
    """Raise for an event of type ``kind`` at ``where`` (``file:offset``) that sync stops
    on: MariaDB's compressed events, a tagged GTID, a compressed transaction (the library's
    reader; sync's own stream, ``stream``, unpacks those)."""
    if kind in MARIADB_COMPRESSED:
        raise UnsafeLog(
            f"the binary log holds a compressed event at {where} (log_bin_compress=ON): its "
            "row changes cannot be read, so sync stopped before it",
            f"SET GLOBAL log_bin_compress = OFF (and in my.cnf); {RELOAD}",
        )
    if kind == GTID_TAGGED_LOG_EVENT:
        raise UnsafeLog(
            f"the binary log holds a transaction with a tagged GTID at {where} (uuid:tag:n, "
            "SET gtid_next = 'AUTOMATIC:tag'): sync cannot read the tag, so the GTID set it "
            "stores for a failover would be wrong, and it stopped before it",
            f"write without GTID tags; {RELOAD}",
        )
    raise UnsafeLog(
        f"the binary log holds a compressed transaction at {where} "
        "(binlog_transaction_compression=ON): its row changes cannot be read, so sync "
        "stopped before it",
        "SET GLOBAL binlog_transaction_compression = OFF (and in my.cnf), and make sure no "
        f"session turns it on (SET SESSION binlog_transaction_compression); {RELOAD}",
    )


def full(bitmap: bytes, count: int) -> bool:
    """Whether a columns-present bitmap names all ``count`` columns."""
    whole, rest = divmod(count, 8)
    if bitmap[:whole] != b"\xff" * whole:
        return False
    return not rest or (bitmap[whole] & ((1 << rest) - 1)) == (1 << rest) - 1


def images(event: Any, log_file: str) -> None:
    """Raise unless the rows event logs every column of its table, with names."""
    table = f"{event.schema}.{event.table}"
    if any(getattr(c, "name", None) is None for c in event.columns):
        where = at(event, log_file)
        raise UnsafeLog(
            f"the binary log's table map of {table} at {where} names no columns "
            "(binlog_row_metadata=MINIMAL): its rows cannot be matched to columns exactly",
            f"SET GLOBAL binlog_row_metadata = 'FULL' (and in my.cnf); {RELOAD}",
        )
    count = len(event.columns)
    bitmaps = [event.columns_present_bitmap]
    if hasattr(event, "columns_present_bitmap2"):
        bitmaps.append(event.columns_present_bitmap2)
    if all(full(b, count) for b in bitmaps):
        return
    where = at(event, log_file)
    raise UnsafeLog(
        f"a row change of {table} at {where} is logged without all of its columns "
        "(binlog_row_image=MINIMAL or NOBLOB, set by the server or a session): sync needs "
        "the whole row before and after",
        "SET GLOBAL binlog_row_image = 'FULL' (and in my.cnf), and make sure no session "
        f"changes it (SET SESSION binlog_row_image); {RELOAD}",
    )


def partial_json(event: Any, log_file: str) -> None:
    """Make the decoded rows of a partial-update event whole: a JSON column logged as an
    empty change takes its before value; raise for one logged as a change (a diff)."""
    table = event.table
    for row in event.rows:
        after, before = row["after_values"], row["before_values"]
        sources = row["after_none_sources"]
        for name, value in after.items():
            if isinstance(value, JsonDiff):
                where = at(event, log_file)
                raise UnsafeLog(
                    f"an update of {table} at {where} logs JSON column '{name}' as a partial "
                    "change (binlog_row_value_options=PARTIAL_JSON), which sync cannot "
                    "replay exactly",
                    "SET GLOBAL binlog_row_value_options = '' (and in my.cnf), and make sure "
                    f"no session sets PARTIAL_JSON; {RELOAD}",
                )
            if value is None and sources.get(name) == _SAME:
                after[name] = before.get(name)
                sources.pop(name)
                if after[name] is None:
                    sources[name] = row["before_none_sources"].get(name, "null")
