"""Delta planning for a table with ``expire:`` (plan/expiry.py): what ``TableDelta`` plans,
and besides, for every row written, the ``PEXPIREAT`` of its own keys and its schedule
entry and memo; and the sweep's removal of a row whose moment has passed.

* An UPDATE is planned as the DELETE of the old image and the INSERT of the new one: Redis
  may already have expired the row's own keys, so they are written whole (a plain update
  would write only the changed fields into a key that is gone). A fixed ``ttl`` is thus
  renewed by every write of the row; a column's moment is computed from the new image.
* An image already past its moment is planned as no row (an UPDATE that moves the moment
  into the past removes the row), its key still raising the counter as a left-out row does.
  An image the row filter leaves out is left to ``TableDelta``, whatever its moment: where the
  table keeps the images of such rows (plan/row_images.py), it keeps them without expiry.
* ``sweep``: a row of the schedule whose moment has passed is planned as a DELETE of its
  memo's image, so every structure's rule applies (unique entries, index, reference and
  tag members, scores removed; latest lists rebuilt; the counter never lowered).
"""

from __future__ import annotations

from migrator.plan.batch import Row
from migrator.plan.delta import REMOVED, Delta, TableDelta
from migrator.plan.expiry import encode_row, gone_key
from migrator.plan.planner import TablePlan


def table_delta(plan: TablePlan) -> TableDelta:
    """The delta planner of a table: with its expiry when it has one."""
    return TableDelta(plan) if plan.expiry is None else ExpiringTableDelta(plan)


class ExpiringTableDelta(TableDelta):
    def __init__(self, plan: TablePlan) -> None:
        super().__init__(plan)
        assert plan.expiry is not None
        self.expiry = plan.expiry
        self.pk = plan.pk_text
        self.fixed = self.expiry.ttl_ms is not None
        self.gone = gone_key(plan.resolved.mapping_name, self.name)

    def change(self, before: Row | None, after: Row | None, into: Delta | None = None) -> Delta:
        delta = Delta() if into is None else into
        expiry = self.expiry
        now = expiry.now_ms()
        moment = None
        if after is not None:
            moment = expiry.moment(after, now)
            filtered_out = self.keeps is not None and not self.keeps(after)
            if moment is not None and moment <= now and not filtered_out:
                self._left_out(after, delta)  # already expired: absent, as migrate leaves it
                after = None
        if before is not None and after is not None:
            super().change(before, None, delta)
            delta.rows -= 1  # one change, planned in two steps
            super().change(None, after, delta)
        else:
            super().change(before, after, delta)
        if before is not None:
            self._unschedule(before, delta)
        if after is not None and self._written(after):
            self._schedule(after, moment, delta)
        return delta

    def sweep(self, row: Row, moment: bytes, delta: Delta) -> None:
        """The row whose moment has passed, as a DELETE of its image (``row``, the memo);
        under a fixed ttl the schedule remembers it as gone (verify: correctly absent)."""
        super().change(row, None, delta)
        self._unschedule(row, delta)
        pk = self.pk(row)
        if self.fixed and pk is not None:
            delta.put(("z", self.gone, pk), moment)

    def _written(self, row: Row) -> bool:
        """Whether the row is written at all (its filter keeps it, its key is whole)."""
        if self.keeps is not None and not self.keeps(row):
            return False
        if self.guarded and self.plan.ambiguous(row) is not None:
            return False
        return self.row_key(row) is not None or self.plan.table.kind == "none"

    def _unschedule(self, row: Row, delta: Delta) -> None:
        pk = self.pk(row)
        if pk is None:
            return
        delta.put(("z", self.expiry.schedule, pk), REMOVED)
        delta.put(("h", self.expiry.memo, pk), REMOVED)
        if self.fixed:
            delta.put(("z", self.gone, pk), REMOVED)

    def _schedule(self, row: Row, moment: int | None, delta: Delta) -> None:
        at = None if moment is None else b"%d" % moment
        for kind, key in self.entries_of(row):
            if kind in ("H", "s", "j"):  # the row's own keys: hash, strings, document
                delta.expires[key] = at
        pk = self.pk(row)
        if at is not None and pk is not None:
            delta.put(("z", self.expiry.schedule, pk), at)
            delta.put(("h", self.expiry.memo, pk), encode_row(row))
