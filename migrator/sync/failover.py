"""sync pointed at another server than the one its position was made on (a replica promoted
to primary, or a failover behind the same address): where to continue, by the stored GTID
state (``migrator.source.binlog.gtid``), or the refusal."""

from __future__ import annotations

from typing import Any

from migrator.source.binlog import gtid
from migrator.source.mysql import Source
from migrator.store.sink import retry


def failover(
    src: Source,
    client: Any,
    key: bytes,
    stored: dict[str, str],
    ident: str,
    server: str,
    reader_id: int,
) -> dict[str, str]:
    """The stored fields, moved to the position right after the stored GTID state on the
    server ``src`` reads (``ident``: its host:port/database, ``server``: its server id); they
    are stored at once, in one HSET. Raises MigratorError (exit 2: another database, no
    MariaDB GTID state) or ``gtid.FailoverRefused`` (exit 1: the server cannot continue
    exactly)."""
    file, pos = gtid.failover_position(src.raw_connection(), src.url, stored, ident, reader_id)
    moved = {"file": file, "pos": str(pos), "source": ident, "server": server}
    retry(lambda: client.hset(key, mapping=moved))
    return {**stored, **moved}
