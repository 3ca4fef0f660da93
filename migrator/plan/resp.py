"""Redis protocol (RESP) encoding of planned commands: what migrate sends, dry-run --resp
writes and ``redis-cli --pipe`` reads."""

from __future__ import annotations

from collections.abc import Iterable

from migrator.plan.batch import Command


def resp(commands: Iterable[Command]) -> bytes:
    """The Redis protocol (RESP2) for commands, as redis-cli --pipe expects it."""
    out = bytearray()
    for cmd in commands:
        out += b"*%d\r\n" % len(cmd)
        for arg in cmd:
            out += b"$%d\r\n%b\r\n" % (len(arg), arg)
    return bytes(out)
