"""GTIDs of the source: the state sync's stored position carries, and a failover by it.

MariaDB numbers every transaction ``domain-server-sequence``; a server's GTID *state* is the
last GTID of each replication domain, ``0-1-4711[,1-3-20...]``, the form of
``@@gtid_binlog_pos`` and of ``BINLOG_GTID_POS(file, pos)``. MySQL numbers them ``uuid:n``,
and its state is the set of every transaction executed, ``uuid:1-4711[,...]``, the form of
``@@gtid_executed`` (``gtid_set``). sync stores that state with the file and offset of its
position (``gtid``, kept up to date per transaction by ``advance``), and the source's
``@@server_id`` (``server``).

A replica promoted to primary logs the same GTIDs in other files at other offsets. When sync
finds its position was made on another server (another address, or another server id behind
the same address), ``failover_position`` checks that the new server's log holds every
transaction up to the stored state (MariaDB, ``missing``: per domain, its last sequence
number must reach the stored one; MySQL: the stored set less ``@@gtid_executed`` must be
empty) and then ``locate``s, on that server, the file and offset right after
the stored state: it asks the server to stream from that state, as a replica connecting by
GTID does, and takes the start of the first transaction the server sends (the first one the
state does not cover), or, when there is none, the end of the log its heartbeat names. With
one GTID domain that is exactly after the last transaction applied; with several whose
transactions interleave differently on the new server, transactions of another domain that
the state covers may follow it and are applied again (a replay, which converges: each domain
is replayed in its own order). The server itself refuses a state
its log does not hold (error 1236: a GTID it never logged, histories that diverged, or logs
purged past it). A refusal is ``FailoverRefused`` (exit 1): Redis holds changes the source
does not, so following it cannot be exact.
"""

from __future__ import annotations

import re
import time
from typing import Any

import pymysql
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import GtidEvent, HeartbeatLogEvent, MariadbGtidEvent
from sqlalchemy.engine import URL

from migrator.errors import EXIT_DIFFERENCE, ConnectError, MigratorError
from migrator.source.binlog import gtid_set

STATE = re.compile(r"^\d+-\d+-\d+(,\d+-\d+-\d+)*$")
LOCATE_SECONDS = 60.0


class FailoverRefused(MigratorError):
    """The source sync was pointed at lacks transactions Redis already holds (exit 1)."""

    exit_code = EXIT_DIFFERENCE


def parse(state: str) -> dict[int, tuple[int, int]]:
    """``'0-1-10,1-2-5'`` -> {domain: (server id, sequence)}."""
    out: dict[int, tuple[int, int]] = {}
    for gtid in filter(None, state.replace(" ", "").split(",")):
        domain, server, seq = (int(p) for p in gtid.split("-"))
        out[domain] = (server, seq)
    return out


def render(state: dict[int, tuple[int, int]]) -> str:
    return ",".join(f"{d}-{s}-{n}" for d, (s, n) in sorted(state.items()))


def is_state(text: str) -> bool:
    """Whether ``text`` is a MariaDB GTID state (MySQL's GTID sets are not)."""
    return bool(STATE.match(text.replace(" ", "")))


def advance(state: str, gtid: str) -> str:
    """The state after a transaction whose GTID is ``gtid``. MariaDB (``0-1-5``): its
    domain's entry replaced. MySQL (``uuid:n``): the executed set with it added (``gtid_set``;
    "" is the empty set: a server whose log had no GTID yet)."""
    if not is_state(gtid):
        return gtid_set.advance(state, gtid) if ":" in gtid else gtid
    if state and not is_state(state):
        return gtid
    now = parse(state)
    now.update(parse(gtid))
    return render(now)


def missing(stored: str, held: str) -> list[str]:
    """Per domain, what the source's log (its state ``held``) lacks of ``stored``."""
    have = parse(held)
    out = []
    for domain, (server, seq) in sorted(parse(stored).items()):
        last = have.get(domain)
        if last is None:
            out.append(f"domain {domain}: Redis holds changes up to {domain}-{server}-{seq}, "
                       "the source's binary log has no transaction of that domain")  # fmt: skip
        elif last[1] < seq:
            out.append(
                f"domain {domain}: Redis holds changes up to {domain}-{server}-{seq}, the "
                f"source's binary log ends at {domain}-{last[0]}-{last[1]} "
                f"({seq - last[1]} transaction(s) missing)"
            )
    return out


def _value(conn: Any, sql: str, args: tuple[Any, ...] | None = None) -> str:
    cursor = conn.cursor()
    try:
        cursor.execute(sql, args)
        row = cursor.fetchone()
    finally:
        cursor.close()
    value = row[0] if row else None
    return value.decode() if isinstance(value, (bytes, bytearray)) else str(value or "")


def server_id(conn: Any) -> str:
    """The source's ``@@server_id`` (unique within a replication topology)."""
    return _value(conn, "SELECT @@GLOBAL.server_id")


def moved(stored: dict[str, str], source: str, server: str) -> bool:
    """Whether the stored position was made on another server than the one answering now:
    another address (``source``: host:port/database), or another ``@@server_id`` at the
    same address (a virtual IP or DNS name moved to a promoted replica)."""
    if stored.get("source") not in (None, source):
        return True
    return stored.get("server") not in (None, "", server)


def failover_position(
    conn: Any, url: URL, stored: dict[str, str], source: str, reader_id: int
) -> tuple[str, int]:
    """Where to continue on the server at ``url`` (``conn``: a connection to it) from a
    position stored on another server; raises MigratorError (exit 2) when the stored state
    is of another database or has no GTID state, FailoverRefused (exit 1) when the server
    lacks transactions up to it. MariaDB: the state per domain; MySQL: the executed set
    (``gtid_set``), compared by the server itself (``GTID_SUBTRACT``)."""
    was, gtid = stored.get("source") or "", stored.get("gtid") or ""
    database = source.rsplit("/", 1)[-1]
    mysql = not is_state(gtid) and gtid_set.is_set(gtid)
    if was.rsplit("/", 1)[-1] != database or not (is_state(gtid) or mysql):
        why = "" if was.rsplit("/", 1)[-1] != database else " without a GTID state"
        raise MigratorError(
            f"Redis holds sync state of another source ({was}{why}), not {source}",
            "sync into another Redis database, or delete the key migrator:<mapping>:sync and "
            "the mapping's keys first ('migrator sync MAPPING --reload' does both)",
        )
    if mysql and gtid_set.GtidSet.parse(gtid).tagged:
        raise MigratorError(
            f"the stored GTID set holds tagged GTIDs ({gtid}): a failover by it cannot be "
            f"asked of {source}",
            "start over from this source: 'migrator sync MAPPING --reload'",
        )
    if mysql:
        lacking = _value(conn, "SELECT GTID_SUBTRACT(%s, @@GLOBAL.gtid_executed)", (gtid,))
        gaps = [f"Redis holds changes of GTIDs {lacking.replace(chr(10), '')} that the "
                "source never executed"] if lacking else []  # fmt: skip
    else:
        gaps = missing(gtid, _value(conn, "SELECT @@GLOBAL.gtid_binlog_pos"))
    if gaps:
        raise FailoverRefused(
            f"the source {source} lacks transactions that sync already applied to Redis from "
            f"{was}: {'; '.join(gaps)}",
            refusal_hint(),
        )
    return locate(url, reader_id, gtid)


def _mysql_set(gtid: str) -> str:
    """A stored MySQL GTID set as the binlog library's auto-position wants it (no newlines)."""
    return str(gtid_set.GtidSet.parse(gtid))


def refusal_hint() -> str:
    return (
        "point sync at a server that holds them (the old primary, or a replica that received "
        "them), or start over from this source: 'migrator sync MAPPING --reload'"
    )


def locate(
    url: URL, reader_id: int, state: str, seconds: float = LOCATE_SECONDS
) -> tuple[str, int]:
    """The file and offset right after GTID ``state`` in the log of the server at ``url``
    (see the module docstring)."""
    mariadb = is_state(state)
    stream = BinLogStreamReader(
        connection_settings={
            "host": url.host or "127.0.0.1", "port": url.port or 3306,
            "user": url.username or "root", "passwd": url.password or "",
            "charset": "utf8mb4", "connect_timeout": 10,
        },
        server_id=reader_id, is_mariadb=mariadb,
        auto_position=state if mariadb else _mysql_set(state), blocking=True,
        slave_heartbeat=0.2, only_events=[MariadbGtidEvent, GtidEvent, HeartbeatLogEvent],
        enable_logging=False,
    )  # fmt: skip
    deadline = time.monotonic() + seconds
    try:
        for event in stream:
            header = event.packet
            if isinstance(event, (MariadbGtidEvent, GtidEvent)):  # the first not covered
                return stream.log_file, int(header.log_pos - header.event_size)
            if isinstance(event, HeartbeatLogEvent):  # nothing after: the end of the log
                return stream.log_file, int(header.log_pos)
            if time.monotonic() > deadline:
                break
    except pymysql.err.MySQLError as e:
        code = e.args[0] if e.args else None
        text = str(e.args[1]) if len(e.args) > 1 else str(e)
        if code == 1236:
            raise FailoverRefused(
                f"the source cannot continue from the GTID state sync stored ({state}): {text}",
                refusal_hint(),
            ) from None
        raise ConnectError(f"reading the binary log of the source failed: {text}") from None
    finally:
        stream.close()
    raise ConnectError(
        f"the source did not say where GTID state {state} ends within {seconds:.0f}s"
    )
