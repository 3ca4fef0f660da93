"""Redis protocol (RESP) encoding of planned commands: what migrate sends, dry-run --resp
writes and ``redis-cli --pipe`` reads."""

from __future__ import annotations

from collections.abc import Iterable
from itertools import chain

from migrator.plan.batch import Command


class _Heads(dict[int, bytes]):
    """Bulk-string length headers (``$n``), made once for the usual lengths."""

    def __missing__(self, n: int) -> bytes:
        head = b"$%d" % n
        if n < 4096:
            self[n] = head
        return head


_HEADS = _Heads()


def resp(commands: Iterable[Command]) -> bytes:
    """The Redis protocol (RESP2) for commands, as redis-cli --pipe expects it.

    ``*n`` CRLF, then ``$len`` CRLF arg CRLF per argument: every argument and its header is a
    part of one CRLF join, the headers laid in by slice (C loops, the hot path of sync and
    migrate); the ``*n`` of each command goes in front of its first header."""
    commands = list(commands)
    args = list(chain.from_iterable(commands))
    parts = [b""] * (2 * len(args) + 1)  # the last one: the final CRLF
    parts[0:-1:2] = map(_HEADS.__getitem__, map(len, args))
    parts[1::2] = args
    i = 0
    for cmd in commands:
        if not cmd:  # ``*0``: no header to go in front of
            return b"".join(resp([c]) if c else b"*0\r\n" for c in commands)
        parts[i] = b"*%d\r\n%b" % (len(cmd), parts[i])
        i += 2 * len(cmd)
    return b"\r\n".join(parts)
