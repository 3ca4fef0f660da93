"""The counts ``init`` asks of the rows (``migrator.mapping.profile``): per table one
``SELECT COUNT(*), COUNT(DISTINCT a), COUNT(DISTINCT a, b) ...``, a single scan (read only,
identifiers quoted by SQLAlchemy's MySQL dialect)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from migrator.errors import SourceError
from migrator.mapping.profile import Columns, Profile


def count_distinct(engine: Engine, asked: Mapping[str, Sequence[Columns]]) -> Profile:
    """Each table's row count and, per set of columns in ``asked[table]``, its number of
    distinct combinations without a NULL."""
    quote = engine.dialect.identifier_preparer.quote
    profile = Profile()
    with engine.connect() as conn:
        for table, column_sets in asked.items():
            if not column_sets:
                continue
            counts = ", ".join(
                "COUNT(DISTINCT " + ", ".join(quote(c) for c in cols) + ")" for cols in column_sets
            )
            sql = f"SELECT COUNT(*), {counts} FROM {quote(table)}"
            try:
                total, *distinct = conn.execute(sa.text(sql)).one()
            except sa.exc.DBAPIError as e:
                raise SourceError(
                    f"cannot count the values of table {table!r}: {e.orig}",
                    "init needs SELECT on the tables it drafts",
                ) from None
            profile.rows[table] = int(total)
            for cols, n in zip(column_sets, distinct):
                profile.distinct[(table, tuple(cols))] = int(n)
    return profile
