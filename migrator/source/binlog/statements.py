"""The statements of the binary log that name a table sync reads (source/binlog/reader.py):
DDL, decided by sync/schema_watch.py, and row changes logged as statements, which end the
reading."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from migrator.plan.schema_change import without_comments

DDL = re.compile(
    r"^\s*(alter|rename|drop|truncate|create\s+or\s+replace)\b", re.IGNORECASE | re.DOTALL
)
# row changes logged as statements (a session with binlog_format=STATEMENT or MIXED)
DML = re.compile(r"^\s*(insert|update|delete|replace|load\s+data)\b", re.IGNORECASE | re.DOTALL)


def ddl_table(
    query: str,
    schema: str,
    database: str,
    tables: Sequence[str],
    kinds: re.Pattern[str] = DDL,
    elsewhere: Mapping[str, tuple[str, str] | None] | None = None,
) -> str | None:
    """The mapped table a DDL statement (or, with ``kinds=DML``, a statement-logged row
    change) names, or None. ``schema`` is the statement's default database; ``elsewhere``:
    per table key, (database, table) where it is another database's."""
    text = without_comments(query)
    if not kinds.match(text):
        return None
    for table in tables:
        home, named = (elsewhere or {}).get(table) or (database, table)
        name = re.escape(named)
        for m in re.finditer(rf"(?:`?([\w$]+)`?\s*\.\s*)?`?(?<![\w$]){name}(?![\w$])`?", text):
            qualifier = m.group(1)
            if (qualifier or schema) == home:
                return table
    return None
