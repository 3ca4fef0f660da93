"""The binary-log stream's pure parts (source/binlog/stream.py, the GTID state of
source/binlog/reader.py): packet framing, checksums, rotation, the end of a non-blocking stream,
errors and lost connections, MySQL's compressed transactions, GTIDs of both engines."""

from __future__ import annotations

import io
import random
import struct
import zlib

import pymysql
import pytest
import zstandard
from sqlalchemy.engine import make_url

from migrator.errors import SourceError
from migrator.source.binlog.reader import GtidState, _query
from migrator.source.binlog.reconnect import SourceLost
from migrator.source.binlog.rows import _decimal, _text
from migrator.source.binlog.stream import (
    GTID,
    MARIADB_GTID,
    QUERY,
    ROTATE,
    TRANSACTION_PAYLOAD,
    XID,
    LogStream,
    RawEvent,
    _payload,
    length_coded,
)


def _event(type_: int, body: bytes, next_pos: int, *, checksum: bool = True) -> bytes:
    size = 19 + len(body) + (4 if checksum else 0)
    raw = struct.pack("<IBIIIH", 1700000000, type_, 7, size, next_pos, 0) + body
    return raw + struct.pack("<I", zlib.crc32(raw)) if checksum else raw


def _packet(payload: bytes, seq: int = 1) -> bytes:
    return struct.pack("<I", len(payload))[:3] + bytes([seq]) + payload


class _Conn:
    def close(self) -> None:
        pass


def _stream(wire: bytes, checksum: bool = True, blocking: bool = False) -> LogStream:
    stream = LogStream(make_url("mysql+pymysql://u@127.0.0.1:1"), server_id=5,
                       file="bin.000001", pos=4, blocking=blocking)  # fmt: skip
    stream.conn, stream.checksum = _Conn(), checksum  # open() does nothing more
    stream.read1 = io.BytesIO(wire).read1
    return stream


EOF_PACKET = _packet(b"\xfe\x00\x00\x02\x00")


def test_events_come_with_their_body_and_the_position_after_them() -> None:
    wire = (_packet(b"\x00" + _event(XID, b"\x01" * 8, 500))
            + _packet(b"\x00" + _event(ROTATE, struct.pack("<Q", 4) + b"bin.000002", 0))
            + _packet(b"\x00" + _event(XID, b"\x02" * 8, 900)) + EOF_PACKET)  # fmt: skip
    stream = _stream(wire)
    seen = []
    for event in stream:
        seen.append((event.type, event.body, stream.file, stream.pos))
    assert seen == [
        (XID, b"\x01" * 8, "bin.000001", 500),
        (ROTATE, struct.pack("<Q", 4) + b"bin.000002", "bin.000002", 4),
        (XID, b"\x02" * 8, "bin.000002", 900),
    ]
    assert stream.ended


def test_the_end_of_a_blocking_stream_is_a_lost_connection() -> None:
    """A server that shuts down cleanly ends the dump it was asked to keep open (MySQL 9.7):
    an end nobody asked for is a lost connection, never the log's end (issue 35 item 1)."""
    wire = _packet(b"\x00" + _event(XID, b"\x01" * 8, 500)) + EOF_PACKET
    stream = _stream(wire, blocking=True)
    events = iter(stream)
    assert next(events).type == XID
    with pytest.raises(SourceLost, match="the server ended the stream"):
        next(events)
    assert not stream.ended


def test_without_checksums_the_body_is_the_rest_of_the_event() -> None:
    wire = _packet(b"\x00" + _event(XID, b"\x05" * 8, 77, checksum=False)) + EOF_PACKET
    (event,) = list(_stream(wire, checksum=False))
    assert event.body == b"\x05" * 8


def test_a_wrong_checksum_is_an_error_naming_the_position() -> None:
    raw = bytearray(_event(XID, b"\x01" * 8, 500))
    raw[20] ^= 0xFF
    with pytest.raises(SourceError) as raised:
        list(_stream(_packet(b"\x00" + bytes(raw))))
    assert "bin.000001:4" in raised.value.message and "checksum" in raised.value.message
    # exit 2, "starting again repeats it": the hint sends to the log, never to a plain rerun
    assert raised.value.exit_code == 2 and "again" not in (raised.value.hint or "")


def test_a_packet_of_16_mib_continues_in_the_next() -> None:
    body = b"q" * (0xFFFFFF + 10)
    event = b"\x00" + _event(QUERY, body, 123)
    wire = _packet(event[:0xFFFFFF]) + _packet(event[0xFFFFFF:], 2) + EOF_PACKET
    (got,) = list(_stream(wire))
    assert got.body == body


def test_an_error_packet_is_the_servers_error() -> None:
    error = b"\xff" + struct.pack("<H", 1236) + b"#HY000" + b"Could not find first log file"
    with pytest.raises(pymysql.err.OperationalError) as raised:
        list(_stream(_packet(error)))
    assert raised.value.args[0] == 1236


def test_a_connection_cut_mid_packet_is_lost() -> None:
    wire = _packet(b"\x00" + _event(XID, b"\x01" * 8, 500))
    with pytest.raises(SourceLost):
        list(_stream(wire[:-3]))


def test_length_coded_integers() -> None:
    assert length_coded(b"\x05", 0) == (5, 1)
    assert length_coded(b"\xfc\x34\x12", 0) == (0x1234, 3)
    assert length_coded(b"\xfd\x01\x02\x03", 0) == (0x030201, 4)
    assert length_coded(b"\xfe" + (2**40).to_bytes(8, "little"), 0) == (2**40, 9)


def _field(kind: int, value: int) -> bytes:
    encoded = value.to_bytes(max(1, (value.bit_length() + 7) // 8), "little")
    return bytes([kind, len(encoded)]) + encoded


@pytest.mark.parametrize("compression", [0, 255])
def test_a_compressed_transaction_yields_its_events(compression: int) -> None:
    inner = _event(QUERY, b"x" * 30, 0, checksum=False) + _event(XID, b"\x09" * 8, 0,
                                                                 checksum=False)  # fmt: skip
    packed = zstandard.ZstdCompressor().compress(inner) if compression == 0 else inner
    body = _field(1, len(packed)) + _field(2, compression) + _field(3, len(inner)) + b"\x00"
    events = list(_payload(body + packed))
    assert [(e.type, e.body) for e in events] == [(QUERY, b"x" * 30), (XID, b"\x09" * 8)]
    wire = _packet(b"\x00" + _event(TRANSACTION_PAYLOAD, body + packed, 4321)) + EOF_PACKET
    stream = _stream(wire)
    assert [(e.type, stream.pos) for e in stream] == [(QUERY, 4321), (XID, 4321)]


def test_an_unknown_compression_is_refused() -> None:
    with pytest.raises(SourceError):
        list(_payload(_field(2, 7) + b"\x00" + b"zz"))


def test_mariadb_gtids_keep_the_last_of_each_domain() -> None:
    state = GtidState("0-1-10,2-1-5")

    def gtid(domain: int, server: int, seq: int) -> RawEvent:
        body = struct.pack("<QIB", seq, domain, 0)
        return RawEvent(MARIADB_GTID, 0, server, body, b"")

    state.event(gtid(0, 3, 11))
    assert state.state == "0-3-11,2-1-5"
    state.event(gtid(1, 3, 1))
    assert state.state == "0-3-11,1-3-1,2-1-5"
    alone = GtidState("")
    alone.event(gtid(0, 1, 1))
    assert alone.state == "0-1-1"


def test_a_mysql_gtid_is_uuid_and_number() -> None:
    sid = bytes.fromhex("3e11fa4771ca11e19e33c80aa9429562")
    body = b"\x01" + sid + struct.pack("<Q", 23) + b"\x02" + b"\x00" * 16
    state = GtidState("")
    state.event(RawEvent(GTID, 0, 1, body, b""))
    assert state.state == "3e11fa47-71ca-11e1-9e33-c80aa9429562:23"


def test_a_query_event_gives_its_database_and_statement() -> None:
    status = b"\x00\x00\x00\x00\x00"
    body = struct.pack("<IIBHH", 9, 0, 2, 0, len(status)) + status + b"db\x00ALTER TABLE t"
    assert _query(body) == ("db", b"ALTER TABLE t")


def test_ascii_text_of_an_ascii_compatible_charset_is_kept_as_its_bytes() -> None:
    latin1 = _text(1, "latin1")
    assert latin1(b"\x03abc", 0) == (b"abc", 4)  # the same bytes in UTF-8
    assert latin1(b"\x04caf\xe9", 0) == ("caf\xe9", 5)  # decoded (then encoded to UTF-8)
    utf16 = _text(1, "utf16")
    value, end = utf16(b"\x02\x00A", 0)  # ASCII-looking bytes, not ASCII text: decoded
    assert (value, end) == ("A", 3)


@pytest.mark.parametrize(
    "charset, raw",
    [("utf16", b"\x00A\x00\xe9"), ("ucs2", b"\x00A\x00\xe9"), ("utf16le", b"A\x00\xe9\x00"),
     ("utf32", b"\x00\x00\x00A\x00\x00\x00\xe9")],
)  # fmt: skip
def test_mysql_wide_charsets_are_decoded_in_their_byte_order(charset: str, raw: bytes) -> None:
    # MySQL stores utf16, ucs2 and utf32 big-endian; utf16le is its own charset
    assert _text(1, charset)(bytes([len(raw)]) + raw, 0) == ("Aé", 1 + len(raw))


def _packed_decimal(text: str, precision: int, scale: int) -> bytes:
    """MySQL's binary DECIMAL of ``text`` (decimal2bin): 9-digit groups in 4 bytes, the
    leftover digits in 1-4, big-endian; the top bit set for >= 0, every byte inverted < 0."""
    sizes = [0, 1, 1, 2, 2, 3, 3, 4, 4, 4]
    negative = text.startswith("-")
    whole, _, frac = text.lstrip("-").partition(".")
    whole, frac = whole.lstrip("0").zfill(precision - scale), frac.ljust(scale, "0")
    out = b""
    lead = len(whole) % 9
    groups = ([whole[:lead]] if lead else []) + [
        whole[i : i + 9] for i in range(lead, len(whole), 9)
    ]
    groups += [frac[i : i + 9] for i in range(0, len(frac), 9)]
    for g in groups:
        out += int(g).to_bytes(sizes[len(g)], "big")
    raw = bytearray(out)
    if negative:
        raw = bytearray(b ^ 0xFF for b in raw)
    raw[0] ^= 0x80
    return bytes(raw)


@pytest.mark.parametrize(
    "precision, scale",
    [(10, 2), (5, 0), (1, 0), (8, 8), (16, 8), (12, 4), (3, 3), (9, 0), (18, 9), (15, 2),
     (30, 20), (65, 30)],
)  # fmt: skip
def test_decimals_are_their_text(precision: int, scale: int) -> None:
    """Every width (one group each side: the fast path; more: the groups), both signs, zero,
    the extremes and random digits, read at an offset: the text MySQL prints."""
    rng = random.Random(precision * 100 + scale)
    integral = precision - scale
    texts = {"0" + ("." + "0" * scale if scale else ""), "-" + "9" * max(integral, 1)}
    for _ in range(300):
        digits = "".join(rng.choice("0123456789") for _ in range(precision))
        whole = digits[:integral].lstrip("0") or "0"
        text = whole + ("." + digits[integral:] if scale else "")
        texts.add(("-" if rng.random() < 0.5 else "") + text)
    texts.add(
        "9" * integral + ("." + "9" * scale if scale else "") if integral else "0." + "9" * scale
    )
    read = _decimal(precision, scale)
    for text in texts:
        if integral == 0 and text.startswith("-9"):
            continue
        text = text if "." in text or not scale else text + "." + "0" * scale
        packed = _packed_decimal(text, precision, scale)
        assert read(b"xx" + packed + b"yy", 2) == (text.encode(), 2 + len(packed)), text
