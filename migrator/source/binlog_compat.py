"""Where python-mysql-replication 1.0 lags the servers: patched in place, once, on first use.

* A query event's status variables: MySQL 9 logs keys the library does not know (0x15,
  one byte, on a statement-logged INSERT of 9.7), and it
  raises ``StatusVariableMismatch`` for the whole event (a DDL, a ``BEGIN``), which stops
  sync. The block's length is in the event's post-header, so an unknown key ends the block's
  parsing there and the rest of the event (database, statement) is read as usual; the
  variables sync reads (none of the block's) are unaffected.
"""

from __future__ import annotations

from typing import Any

from pymysqlreplication import event as _event


def patch_status_vars() -> None:
    cls: Any = _event.QueryEvent
    if getattr(cls, "_migrator_status_vars", False):
        return
    known = cls._read_status_vars_value_for_key

    def read(self: Any, key: int) -> None:
        packet = self.packet
        if not hasattr(self, "_migrator_status_end"):  # the key byte is read already
            self._migrator_status_end = packet.read_bytes - 1 + self.status_vars_length
        try:
            known(self, key)
        except _event.StatusVariableMismatch:
            packet.advance(self._migrator_status_end - packet.read_bytes)

    cls._read_status_vars_value_for_key = read
    cls._migrator_status_vars = True
