"""The notes dry-run adds to a table's report: which keys get which TTL (``expire:``), and the
change-stream entry ``sync`` would append for an insert of the table's first row
(``streams:``), with the first load's ``snapshot`` entry of that row when the stream takes
them (``snapshot: true``)."""

from __future__ import annotations

import time

from migrator.plan.batch import Command
from migrator.plan.owners import CURRENT
from migrator.plan.planner import TablePlan
from migrator.plan.stream import ChangeStream
from migrator.source.mysql import Source
from migrator.source.where import clause, condition


def expiry_note(src: Source, plan: TablePlan, planned: int) -> tuple[str, int]:
    """(which keys get which TTL, rows the filter keeps that are already past it)."""
    r = plan.resolved
    rule = r.table.expire
    assert rule is not None
    own = [p for name in ("hash", "columns", "document", "unique-string")
           for p in plan.patterns().get(name, [])]  # fmt: skip
    when = f"{rule.text} after each write" if rule.ttl is not None else f"the moment in {rule.text}"
    text = f"{', '.join(own) or 'no key of its own'}: PEXPIREAT {when}"
    if rule.column is None:
        return text, 0
    keeps = None if r.table.where is None else condition(r.table.where, r.schema)
    return text, src.count(r.name, keeps) - planned


def stream_note(src: Source, plan: TablePlan) -> tuple[Command, int, Command | None]:
    """(the XADD of an insert of the first row (or the
    first operation asked for), at a made-up position and now; the bytes of
    its fields and values, what each entry adds to the stream before Redis's own overhead;
    the first load's snapshot entry of the row, None when the stream takes none)."""
    r = plan.resolved
    assert r.table.streams is not None
    stream = ChangeStream(plan, r.table.streams)
    selector = src.selector(r.name, plan.row_names)
    pages = src.batches(r.name, selector, r.primary_key, 1, page_size=1, where=clause(r))
    rows = next(pages, [])
    pages.close()
    row = rows[0] if rows else tuple(b"" for _ in plan.row_names)
    now = int(time.time())
    # over shards (source/shards.py): as the first shard's process would append it
    token = CURRENT.set(getattr(src, "sources", [("", src)])[0][0])
    try:
        # an insert; without inserts asked for, its delete, else an update of it
        for before, after in ((None, row), (row, None), (row, row)):
            entry = stream.entry(before, after, b"binlog.000001:4", b"", now)
            if entry is not None:
                break
        assert entry is not None
        snap = stream.snapshot_entry(row, b"binlog.000001:4", b"", now) if stream.snapshot else None
    finally:
        CURRENT.reset(token)
    fields = entry[entry.index(b"*") + 1 :]
    return entry, sum(len(x) for x in fields), snap
