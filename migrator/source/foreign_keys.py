"""Whether the server writes the rows its foreign keys' cascades change to the binary log.

InnoDB's own foreign keys (MariaDB, MySQL 8.x, MySQL 9.x with ``innodb_native_foreign_keys=ON``)
change the child rows inside the storage engine: the log holds the parent's row change only,
and ``sync`` applies the rule itself (``migrator.plan.cascade``). A MySQL that runs foreign
keys in its SQL layer (``innodb_native_foreign_keys=OFF``, MySQL 9.7's default) logs each
cascaded child row as an ordinary row event, before the parent's. The variable is read-only:
it changes only with a restart, after which ``sync`` reads it again (a new connection).
"""

from __future__ import annotations

from typing import Any

VARIABLE = "innodb_native_foreign_keys"


def cascades_logged(conn: Any) -> bool:
    """True when the server on the DBAPI connection ``conn`` logs cascaded rows."""
    cursor = conn.cursor()
    try:
        cursor.execute(f"SHOW GLOBAL VARIABLES LIKE '{VARIABLE}'")
        rows = list(cursor.fetchall())
    finally:
        cursor.close()
    if not rows:
        return False  # MariaDB, MySQL before SQL-layer foreign keys
    value = rows[0][1]
    text = value.decode() if isinstance(value, (bytes, bytearray)) else str(value)
    return text.upper() in ("OFF", "0")
