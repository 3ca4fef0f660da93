"""How far the applied position is from the source's log end: bytes of log and transactions
(the ``behind_bytes`` and ``behind_transactions`` of ``/metrics`` and ``--json``)."""

from __future__ import annotations

import re


def bytes_between(
    applied: tuple[str, int], head: tuple[str, int], sizes: dict[str, int] | None
) -> int | None:
    """Bytes of log from ``applied`` to ``head`` (None: in other files whose sizes are not
    known)."""
    if head <= applied:
        return 0
    if applied[0] == head[0]:
        return head[1] - applied[1]
    if not sizes or applied[0] not in sizes:
        return None
    between = sum(size for name, size in sizes.items() if applied[0] < name < head[0])
    return max(0, sizes[applied[0]] - applied[1]) + between + head[1]


_MARIADB = re.compile(r"(\d+)-(\d+)-(\d+)")
_MYSQL = re.compile(r"([0-9a-fA-F-]{36}(?::[A-Za-z_]\w*)?)((?::\d+(?:-\d+)?)+)")


def transactions_between(applied: str, head: str) -> int | None:
    """Transactions the source's GTID state ``head`` has past ``applied`` (the stored
    state): per MariaDB domain, the difference of the sequence numbers; per MySQL source
    UUID, of the last transaction numbers. None when either is not a GTID state."""
    if not head:
        return None
    maria_head = {int(d): int(s) for d, _, s in _MARIADB.findall(head)}
    if maria_head and ":" not in head:
        done = {int(d): int(s) for d, _, s in _MARIADB.findall(applied)}
        return sum(max(0, seq - done.get(d, 0)) for d, seq in maria_head.items())
    last_head, last_done = _mysql_last(head), _mysql_last(applied)
    if not last_head:
        return None
    return sum(max(0, n - last_done.get(uuid, 0)) for uuid, n in last_head.items())


def _mysql_last(state: str) -> dict[str, int]:
    """Per source UUID (and tag), the highest transaction number of a MySQL GTID set or GTID."""
    out: dict[str, int] = {}
    for uuid, ranges in _MYSQL.findall(state):
        numbers = [int(n) for n in re.findall(r"\d+", ranges)]
        if numbers:
            out[uuid.lower()] = max(out.get(uuid.lower(), 0), max(numbers))
    return out


def behind(
    applied: tuple[str, int] | None,
    head: tuple[str, int] | None,
    gtid: str | None,
    head_gtid: str,
    sizes: dict[str, int] | None,
) -> dict[str, int | None]:
    """``behind_bytes`` and ``behind_transactions`` between the ``applied`` position (its GTID
    state ``gtid``) and the source's log end ``head`` (``head_gtid``); None: not known (no
    position yet, no GTIDs, files whose sizes are not known)."""
    if applied is None or head is None:
        return {"behind_bytes": None, "behind_transactions": None}
    txns = None
    if head <= applied:
        txns = 0
    elif head_gtid and gtid is not None:
        txns = transactions_between(gtid, head_gtid)
    return {"behind_bytes": bytes_between(applied, head, sizes), "behind_transactions": txns}
