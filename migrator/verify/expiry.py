"""verify's checks of a table with ``expire:`` (docs/mapping.md#expire).

* A row already past its moment is correctly absent: a column's moment leaves it out of the
  read (source/expiry.py); under a fixed ``ttl`` the schedule holds its moment (or the sweep
  remembered it as gone), read per batch.
* A row whose moment is within ``TOLERANCE`` of now is not judged: Redis and sync's sweep
  may or may not have removed it yet. The reads of the table take rows up to ``TOLERANCE``
  past their moment, so that such a row explains its keys and members.
* Every other row's own keys must carry a TTL that ends within ``TOLERANCE`` of the row's
  moment (none for a NULL moment): ``missing TTL`` for a key that has none (it would never
  expire), ``wrong TTL`` for one elsewhere; ``--fix`` sets it (PEXPIREAT / PERSIST).
* A repair that writes a row's own key is followed by its PEXPIREAT and the row's schedule
  entry: ``--fix`` never writes a row that is expired, nor one without its TTL.

"now" is the clock of the machine running migrator.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from migrator.plan.batch import Batch, Command, Row
from migrator.plan.expiry import RowExpiry, gone_key
from migrator.plan.planner import TablePlan
from migrator.verify import report as vr

#: seconds either side of a row's moment in which it is not judged; the largest difference
#: allowed between a key's TTL and its row's moment
TOLERANCE = 2.0
_OWN = ("hash", "columns", "document", "unique-string")  # structures writing own keys
UNKNOWN = -1  # a fixed-ttl row the schedule does not know: any TTL up to the ttl


class ExpiryChecks:
    def __init__(self, plan: TablePlan, read: Callable[[list[Command]], list[Any]]) -> None:
        assert plan.expiry is not None
        self.expiry: RowExpiry = plan.expiry
        self.read = read
        self.own = [s for s in plan.structures if s.name in _OWN]
        self.gone = gone_key(plan.resolved.mapping_name, plan.table.name)
        self.tol = int(TOLERANCE * 1000)
        # own key -> (row, moment) of the batches in flight (a batch is read while the one
        # before it is checked): the repairs' PEXPIREAT and schedule entry
        self.current: dict[bytes, tuple[Row, int | None]] = {}
        self.near: list[Row] = []
        self.previous: dict[bytes, tuple[Row, int | None]] = {}

    def judged(self, rows: Sequence[Row]) -> list[tuple[Row, int | None, list[bytes]]]:
        """(row, moment, own keys) of the rows to judge; those within the tolerance of their
        moment are kept in ``near``."""
        self.previous, self.current = self.current, {}
        self.near = []
        e = self.expiry
        now = e.now_ms()
        scheduled: list[Any] = [None] * len(rows)
        gone: list[Any] = [None] * len(rows)
        if e.ttl_ms is not None and rows:
            pks = [e.pk_text(r) or b"" for r in rows]
            scheduled, gone = self.read([(b"ZMSCORE", e.schedule, *pks),
                                         (b"ZMSCORE", self.gone, *pks)])  # fmt: skip
        out = []
        for row, at, went in zip(rows, scheduled, gone):
            moment: int | None
            if e.ttl_ms is None:
                moment = e.moment(row, now)
            elif at is not None:
                moment = int(float(at))
            elif went is not None:
                continue  # swept: correctly absent
            else:
                moment = UNKNOWN
            if moment is not None and moment != UNKNOWN and moment <= now + self.tol:
                if moment > now - self.tol:
                    self.near.append(row)  # too close to judge
                continue
            b = Batch()
            for s in self.own:
                s.add(row, b)
            keys = [c[1] for c in b.commands]
            for k in keys:
                self.current[k] = (row, moment)
            out.append((row, moment, keys))
        return out

    def explaining(self, rows: Sequence[Row]) -> list[Row]:
        """The rows that may explain a member of a shared structure: under a fixed ttl, not
        those the schedule has past their moment by more than the tolerance, nor those the
        sweep removed (their members are leftovers a sweep owes); a column's moment: all (the
        read already left out the rows past it)."""
        e = self.expiry
        if e.ttl_ms is None or not rows:
            return list(rows)
        now = e.now_ms()
        pks = [e.pk_text(r) or b"" for r in rows]
        scheduled, gone = self.read([(b"ZMSCORE", e.schedule, *pks),
                                     (b"ZMSCORE", self.gone, *pks)])  # fmt: skip
        return [
            row
            for row, at, went in zip(rows, scheduled, gone)
            if went is None and (at is None or int(float(at)) > now - self.tol)
        ]

    def expired_rows(self) -> int:
        """Under a fixed ttl, the rows MySQL holds that the schedule says are past it (or the
        sweep removed); 0 for a column's moment (the read leaves those out)."""
        e = self.expiry
        if e.ttl_ms is None:
            return 0
        due, gone = self.read([(b"ZCOUNT", e.schedule, b"-inf", b"%d" % e.now_ms()),
                               (b"ZCARD", self.gone)])  # fmt: skip
        return int(due) + int(gone)

    def reads(self, judged: list[tuple[Row, int | None, list[bytes]]]) -> list[Command]:
        return [(b"PTTL", k) for _, _, keys in judged for k in keys]

    def ttls(
        self,
        replies: list[Any],
        judged: list[tuple[Row, int | None, list[bytes]]],
        found: Callable[..., None],
    ) -> None:
        """Each own key's TTL against its row's moment."""
        e = self.expiry
        now = e.now_ms()
        got = iter(replies)
        for _, moment, keys in judged:
            for key in keys:
                left = next(got)
                if not isinstance(left, int) or left == -2:
                    continue  # no such key: the row's own checks report it
                if moment is None:
                    if left != -1:
                        found(vr.WRONG_TTL, key, None, "none", f"{left} ms", [(b"PERSIST", key)])
                    continue
                at = now + e.ttl_ms if moment == UNKNOWN and e.ttl_ms is not None else moment
                fix = [(b"PEXPIREAT", key, b"%d" % at)]
                if left == -1:
                    found(vr.MISSING_TTL, key, None, f"expires at {at} ms", "no TTL", fix)
                elif moment != UNKNOWN and abs(now + left - moment) > self.tol:
                    found(vr.WRONG_TTL, key, None, f"expires at {moment} ms",
                          f"expires at {now + left} ms", fix)  # fmt: skip

    def repair(self, commands: Sequence[Command]) -> list[Command]:
        """A repair's commands, and after those that write a row's own key, its expiry."""
        out = list(commands)
        e = self.expiry
        for cmd in commands:
            if len(cmd) < 2 or cmd[0] in (b"PEXPIREAT", b"PERSIST"):
                continue
            seen = self.current.get(cmd[1]) or self.previous.get(cmd[1])
            if seen is None:
                continue
            row, moment = seen
            if moment == UNKNOWN:
                moment = e.now_ms() + (e.ttl_ms or 0)
            out += e.commands(row, [cmd[1]], moment)
        return out
