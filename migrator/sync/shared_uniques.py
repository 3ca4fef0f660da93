"""The entries of a ``unique:`` MySQL does not enforce, under ``sync`` (issue 27 item 5): a
value several rows hold has one entry naming one of them (as migrate writes it), so a row that
lets go of its value (deleted, or its value changed) must not take the entry with it while
another row still holds the value. The delta marks such values (``Delta.dirty_unique``); after
the group's own commands, each entry is set from MySQL's rows as they are now — to a row that
holds the value, or removed when none does — in the group's MULTI, as latest lists are rebuilt.
MySQL may be ahead of the group: a later change of the log sets the entry again, so the entry
converges as latest lists do. Only rows the mapping keeps (its ``where:``, its expiry) hold
an entry, and a string entry gets its holder's TTL (``expire:``), as migrate writes it."""

from __future__ import annotations

from collections.abc import Iterable

from migrator.plan.batch import Command
from migrator.plan.planner import TablePlan
from migrator.source.mysql import Source
from migrator.source.selects import keyset_value
from migrator.source.where import clause


def shared_entries(
    src: Source, plans: dict[str, TablePlan], dirty: Iterable[tuple[str, int, tuple[bytes, ...]]]
) -> list[Command]:
    """Per marked value: HSET/SET of its entry to a row that holds it, else HDEL/DEL."""
    conn = src.raw_connection()
    conn.rollback()  # a fresh read view: the rows as committed now
    out: list[Command] = []
    for table, n, values in sorted(dirty):
        plan = plans[table]
        r = plan.resolved
        u = r.table.unique[n]
        kinds = [r.schema.column(c).kind for c in u.columns]
        wanted = tuple(keyset_value(v, k) for v, k in zip(values, kinds))
        # rows the mapping keeps: one its where: or expiry leaves out names no entry
        kept = clause(r)
        rows = src.rows_where(table, src.selector(table, plan.select), u.columns, [wanted], kept)
        positions = [plan.pos[c] for c in u.columns]
        # byte for byte, as the entries are (a collation may call 'A@x' and 'a@x' equal)
        holders = [row for row in rows if tuple(row[i] for i in positions) == values]
        shape: list[bytes | None] = [None] * len(plan.select)
        for i, v in zip(positions, values):
            shape[i] = v
        pk = plan.pk_text(holders[0]) if holders else None
        if u.key is None:
            key, field = plan.unique_hash_key(u.columns), plan.join_fn(u.columns)(shape)
            if field is not None:
                out.append((b"HSET", key, field, pk) if pk is not None else (b"HDEL", key, field))
        else:
            at = plan.key_fn(u.key)(shape)
            if at is not None:
                out.append((b"SET", at, pk) if pk is not None else (b"DEL", at))
                if pk is not None and plan.expiry is not None:  # the holder's TTL, as migrate
                    moment = plan.expiry.moment(holders[0], plan.expiry.now_ms())
                    out.append((b"PEXPIREAT", at, b"%d" % moment) if moment is not None else
                               (b"PERSIST", at))  # fmt: skip
    return out
