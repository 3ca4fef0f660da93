"""The replication protocol, only as far as sync needs it: raw events off the wire.

python-mysql-replication builds, for every event, a packet wrapper, an event object and (for
every table map, one per table per transaction) a ``Table`` with its ``Column`` objects, and
reads the packet a few bytes per call: on small OLTP transactions that was ~0.9 ms of CPU per
transaction, 85 % of sync's time (docs/performance.md). ``LogStream`` does the part of its
work that sync needs, directly on the bytes: it registers as a replica (checksums, heartbeat
period, MariaDB's capability so GTID events come through), asks for the log from a file and
position (COM_BINLOG_DUMP), frames packets off the socket's buffered reader, checks each
event's CRC32, and yields ``RawEvent``s — the 19-byte header unpacked, the body as bytes
without its checksum — keeping the position (file, offset after the event) as the server
advances it (rotations, the header's next position). MySQL's compressed transactions
(``Transaction_payload``, binlog_transaction_compression=ON) are unpacked with zstd and their
events yielded in place, each at the payload's end position.

What the events mean is decided elsewhere (``tables``: table maps and rows;
``binlog``: transactions, DDL, heartbeats). A lost connection is ``SourceLost``; an error
the server sends (a purged log: 1236) is PyMySQL's ``OperationalError``.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pymysql
from sqlalchemy.engine import URL

from migrator.errors import SourceError
from migrator.source.binlog import guard
from migrator.source.binlog.reconnect import SourceLost, StreamConnection

# event types (MySQL's binlog_event.h; MariaDB's log_event.h from 160 on)
QUERY = 2
ROTATE = 4
FORMAT_DESCRIPTION = 15
XID = 16
TABLE_MAP = 19
WRITE_V1, UPDATE_V1, DELETE_V1 = 23, 24, 25
HEARTBEAT = 27
WRITE_V2, UPDATE_V2, DELETE_V2 = 30, 31, 32
GTID = 33
ANONYMOUS_GTID = 34
PARTIAL_UPDATE = 39
TRANSACTION_PAYLOAD = 40
HEARTBEAT_V2 = 41
GTID_TAGGED = 42
MARIADB_GTID = 162
# MariaDB's compressed events (log_bin_compress=ON): a query, and rows v1 / v2
MARIADB_COMPRESSED = frozenset({165, 166, 167, 168, 169, 170, 171})
REFUSED = MARIADB_COMPRESSED | {GTID_TAGGED}  # stopped on (guard)

ROWS = frozenset({WRITE_V1, UPDATE_V1, DELETE_V1, WRITE_V2, UPDATE_V2, DELETE_V2, PARTIAL_UPDATE})
WRITES = frozenset({WRITE_V1, WRITE_V2})
UPDATES = frozenset({UPDATE_V1, UPDATE_V2, PARTIAL_UPDATE})
V2 = frozenset({WRITE_V2, UPDATE_V2, DELETE_V2, PARTIAL_UPDATE})

_HEADER = struct.Struct("<IBIIIH")  # timestamp, type, server id, size, next position, flags
HEADER_SIZE = 19
COM_BINLOG_DUMP = 0x12
BINLOG_DUMP_NON_BLOCK = 0x01
MAX_PACKET = 0xFFFFFF
READ_SIZE = 1 << 16  # what a socket read asks for (up to), 64 KiB


@dataclass(slots=True)
class RawEvent:
    """One event: its header's fields and its body (after the 19-byte header, without the
    checksum)."""

    type: int
    timestamp: int
    server_id: int
    body: bytes
    header: bytes  # the 19 bytes as sent (the library's parsers are handed them back)


def length_coded(buf: bytes, off: int) -> tuple[int, int]:
    """A length-encoded integer at ``off``: (value, offset after it)."""
    first = buf[off]
    if first < 251:
        return first, off + 1
    if first == 252:
        return buf[off + 1] | buf[off + 2] << 8, off + 3
    if first == 253:
        return int.from_bytes(buf[off + 1 : off + 4], "little"), off + 4
    return int.from_bytes(buf[off + 1 : off + 9], "little"), off + 9


class LogStream:
    """The binary log from ``file``:``pos``; iterate for ``RawEvent``s. ``file``/``pos`` are
    always the position after the last event yielded (for the events of a compressed
    transaction: after the whole payload). ``blocking=False`` ends at the log's end."""

    def __init__(
        self,
        url: URL,
        *,
        server_id: int,
        file: str,
        pos: int,
        heartbeat: float = 0.2,
        blocking: bool = True,
    ) -> None:
        self.file, self.pos = file, pos
        self.url, self.server_id, self.blocking, self.heartbeat = (
            url,
            server_id,
            blocking,
            heartbeat,
        )
        self.conn: Any = None
        self.mariadb = self.checksum = self.ended = False
        #: called before the socket is read (it may wait): what was read can be passed on
        self.before_read: Callable[[], None] | None = None

    def open(self) -> None:
        """Connect, register as a replica and ask for the log (the first iteration does it:
        a source that does not answer fails in the reading thread, as a lost one does)."""
        if self.conn is not None:
            return
        url = self.url
        read_timeout = max(30, int(self.heartbeat * 20))  # a silent network is a lost link
        self.conn = StreamConnection(
            host=url.host or "127.0.0.1", port=url.port or 3306, user=url.username or "root",
            password=url.password or "", charset="utf8mb4", connect_timeout=10,
            read_timeout=read_timeout,
        )  # fmt: skip
        self.mariadb = "mariadb" in str(self.conn.server_version).lower()
        self.checksum = self._checksum()
        period = int(min(read_timeout / 2.0, self.heartbeat) * 1_000_000_000)
        with self.conn.cursor() as cur:
            if self.checksum:  # the server sends checksums only to a replica that says so
                cur.execute("SET @master_binlog_checksum = @@global.binlog_checksum, "
                            "@source_binlog_checksum = @@global.binlog_checksum")  # fmt: skip
            cur.execute("SET @master_heartbeat_period = %s, @source_heartbeat_period = %s",
                        (period, period))  # fmt: skip
            # MariaDB sends its GTID events only to a replica that understands them
            cur.execute("SET @mariadb_slave_capability = 4")
        flags = 0 if self.blocking else BINLOG_DUMP_NON_BLOCK
        command = struct.pack("<BIHI", COM_BINLOG_DUMP, self.pos, flags, self.server_id)
        command += self.file.encode()
        self.conn._write_bytes(struct.pack("<I", len(command))[:3] + b"\x00" + command)
        self.read1 = self.conn._rfile.read1

    def _checksum(self) -> bool:
        with self.conn.cursor() as cur:
            cur.execute("SHOW GLOBAL VARIABLES LIKE 'binlog_checksum'")
            row = cur.fetchone()
        return row is not None and str(row[1]).upper() != "NONE"

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()

    def _more(self, buf: bytes, off: int, need: int) -> tuple[bytes, int]:
        """``buf`` from ``off`` with at least ``need`` bytes (read from the socket)."""
        buf = buf[off:]
        if self.before_read is not None:
            self.before_read()
        while len(buf) < need:
            try:
                chunk = self.read1(READ_SIZE)
            except OSError as e:  # a timeout, a reset
                raise SourceLost(f"reading the binary log: {e or type(e).__name__}") from None
            if not chunk:
                raise SourceLost("reading the binary log: the server closed the connection")
            buf += chunk
        return buf, 0

    def __iter__(self) -> Iterator[RawEvent]:
        self.open()
        unpack = _HEADER.unpack_from
        crc = zlib.crc32
        checksum = self.checksum
        buf, off = b"", 0  # what the socket gave and is not framed yet
        while True:
            # one packet: a 3-byte length and a sequence byte, then the payload, continued
            # in the next packet when it is 16 MiB - 1 long
            if len(buf) - off < 4:
                buf, off = self._more(buf, off, 4)
            n = buf[off] | buf[off + 1] << 8 | buf[off + 2] << 16
            if len(buf) - off < 4 + n:
                buf, off = self._more(buf, off, 4 + n)
            data = buf[off + 4 : off + 4 + n]
            off += 4 + n
            while n == MAX_PACKET:
                buf, off = self._more(buf, off, 4)
                n = buf[off] | buf[off + 1] << 8 | buf[off + 2] << 16
                buf, off = self._more(buf, off, 4 + n)
                data += buf[4 : 4 + n]
                off = 4 + n
            kind = data[0]
            if kind == 0xFE and len(data) < 9:  # EOF: the end of the log (non-blocking)
                if self.blocking:  # nobody asked for an end: the server is shutting down
                    raise SourceLost(
                        "reading the binary log: the server ended the stream (it is shutting "
                        "down or stopped its dump thread)"
                    )
                self.ended = True
                return
            if kind == 0xFF:
                pymysql.err.raise_mysql_exception(data)
            timestamp, type_, server, _, next_pos, _ = unpack(data, 1)
            end = len(data)
            if (checksum and type_ != FORMAT_DESCRIPTION) or _fde_checksum(data, type_):
                end -= 4
                # the CRC-32 of a message followed by its CRC is this constant
                if crc(memoryview(data)[1:]) != 0x2144DF1C:
                    raise SourceError(
                        f"the binary log event at {self.file}:{self.pos} (type {type_}) "
                        "arrived with a wrong checksum: the stream or the server's log is "
                        "damaged",
                        "check the source's log: mysqlbinlog --verify-binlog-checksum; once it "
                        "reads whole, sync resumes from the last whole transaction applied",
                    )
            body = data[20:end]
            if type_ == ROTATE:
                self.pos = int.from_bytes(body[:8], "little")
                self.file = body[8:].decode()
            elif next_pos:
                self.pos = next_pos
            if type_ == TRANSACTION_PAYLOAD:
                yield from _payload(body)
                continue
            if type_ in REFUSED:  # MariaDB's compressed events, a tagged GTID
                guard.refuse(type_, f"{self.file}:{self.pos - (len(data) - 1)}")
            yield RawEvent(type_, timestamp, server, body, data[1:20])


def _fde_checksum(data: bytes, type_: int) -> bool:
    """Whether a format description event carries a checksum: its algorithm byte (the one
    before the last 4 bytes) says CRC32 (1). It is sent before the checksum setting is
    known to apply, so it says so itself."""
    return type_ == FORMAT_DESCRIPTION and len(data) > 25 and data[-5] == 1


def _payload(body: bytes) -> Iterator[RawEvent]:
    """The events of a MySQL ``Transaction_payload`` (8.0.20+): fields (type, length, value
    as length-encoded integers) up to an end mark, then the events, zstd-compressed (or not),
    each with its header and without a checksum."""
    off, compression, size = 0, 0, -1
    while off < len(body):
        field, off = length_coded(body, off)
        if field == 0:  # OTW_PAYLOAD_HEADER_END_MARK
            break
        length, off = length_coded(body, off)
        value = int.from_bytes(body[off : off + length], "little") if length <= 8 else 0
        if field == 2:  # compression type: 0 zstd, 255 none
            compression = value
        elif field == 3:  # uncompressed size
            size = value
        off += length
    packed = body[off:]
    if compression == 255:
        events = packed
    elif compression == 0:
        events = _zstd(packed, size)
    else:
        raise SourceError(
            f"a compressed transaction in the binary log uses compression type {compression}, "
            "which sync does not know",
            "SET GLOBAL binlog_transaction_compression = OFF on the source",
        )
    unpack = _HEADER.unpack_from
    off = 0
    while off + HEADER_SIZE <= len(events):
        timestamp, type_, server, length, _, _ = unpack(events, off)
        raw = events[off : off + length]
        body_end = length
        if length > HEADER_SIZE + 4 and zlib.crc32(raw[:-4]) == int.from_bytes(raw[-4:], "little"):
            body_end -= 4  # written with its checksum
        yield RawEvent(type_, timestamp, server, raw[HEADER_SIZE:body_end], raw[:HEADER_SIZE])
        off += length


def _zstd(packed: bytes, size: int) -> bytes:
    try:
        import zstandard
    except ImportError:  # pragma: no cover - a dependency; only a broken install lacks it
        raise SourceError(
            "the binary log holds a compressed transaction and the zstandard module is missing",
            "pip install zstandard (a dependency of migrator: reinstall it)",
        ) from None
    decompressor: Any = zstandard.ZstdDecompressor()
    return bytes(decompressor.decompress(packed, max_output_size=max(size, 0)))
