"""Whether the server writes the rows its foreign keys' cascades change to the binary log.

InnoDB's own foreign keys (MariaDB, MySQL 8.x, MySQL 9.x with ``innodb_native_foreign_keys=ON``)
change the child rows inside the storage engine: the log holds the parent's row change only,
and ``sync`` applies the rule itself (``migrator.plan.cascade``). A MySQL that runs foreign
keys in its SQL layer (``innodb_native_foreign_keys=OFF``, MySQL 9.7's default) logs each
cascaded child row as an ordinary row event, before the parent's. The variable is read-only:
it changes only with a restart, after which ``sync`` reads it again (a new connection).

Where it does not, ``sync`` reads the row changes of each cascading foreign key's parent the
mapping leaves out, a table of another database of the server included (``with_others``).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from migrator.errors import ConnectError
from migrator.mapping.schema import ForeignKey, TableSchema

if TYPE_CHECKING:
    from migrator.source.mysql import Source

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


def with_others(
    src: Source, own: Mapping[str, TableSchema], fks: Iterable[ForeignKey], mapped: Collection[str]
) -> dict[str, TableSchema]:
    """``own`` (the source's tables the mapping leaves out), and the parent tables in another
    database of the server of the cascading ``fks``, read from it and keyed
    ``database.table`` (``ForeignKey.parent_key``; a source's table of that very name keeps
    its key: plan/cascade.py refuses the foreign key as ambiguous). A database the account
    cannot read gives nothing: plan/cascade_parents.py ``unmapped`` names the grant."""
    wanted: dict[str, set[str]] = {}
    for fk in fks:
        if fk.parent_database and fk.unlogged_rules and fk.parent_key not in mapped:
            wanted.setdefault(fk.parent_database, set()).add(fk.parent)
    out = dict(own)
    for database, names in sorted(wanted.items()):
        try:
            read = src.schema(sorted(names), database).tables
        except ConnectError:  # no privilege on the database (MySQL's 1044)
            continue
        for name, ts in read.items():
            out.setdefault(f"{database}.{name}", ts)
    return out
