"""Small helpers shared by the sync tests."""

from __future__ import annotations

from typing import Any

from migrator.source.binlog import BinlogPosition


def master_position(db: Any) -> BinlogPosition:
    """The binary log's current end (SHOW MASTER STATUS) on a test database's server."""
    row = db.query("SHOW MASTER STATUS")[0]
    return BinlogPosition(str(row[0]), int(row[1]))


def wkt_of(src: Any) -> Any:
    from migrator.commands.follow import wkt_function

    return wkt_function(src)
