"""Small helpers shared by the sync tests."""

from __future__ import annotations

from typing import Any

from migrator.source.binlog import BinlogPosition
from migrator.source.binlog_settings import log_status


def master_position(db: Any) -> BinlogPosition:
    """The binary log's current end on a test database's server (SHOW MASTER STATUS, or SHOW
    BINARY LOG STATUS where MySQL 8.4 renamed it)."""
    conn = db.connect(client_flag=0)
    try:
        end = log_status(conn)
    finally:
        conn.close()
    assert end is not None, "the binary log is off"
    return BinlogPosition(*end)


def wkt_of(src: Any) -> Any:
    from migrator.sync.follow import wkt_function

    return wkt_function(src)
