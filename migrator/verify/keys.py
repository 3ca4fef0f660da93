"""Verify's view of Redis: pipelined reads, and the key patterns of a mapping, used to find
stale keys (keys under the mapping's patterns that no source row explains) with SCAN MATCH.

Every key a table can write is described by a :class:`KeyPattern`: a template (from the
planner, so there is one definition of the key names) and a *family*:

* ``row``: one key per source row (row hashes, ``as: columns`` strings, unique strings). A
  key of this family is explained when the rows its placeholders name exist in the source
  and plan to that very key; checked in chunks against the source, so memory stays flat.
* ``keyed``: a key per distinct value (index and tag sets, sorted sets, counters, unique
  hashes, latest lists). A key is explained when the verify pass expected it.

A scanned key belongs to the pattern that matches it with the most literal characters
(``emp:indices:mgr_id:8`` is an index set, not the row ``emp:{emp_id}``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from migrator.mapping.model import Template
from migrator.plan.planner import TablePlan
from migrator.plan.resp import resp
from migrator.target.sink import retry

try:  # redis-py's hiredis reader, read directly (``_hiredis_replies``) where it is there
    from redis._parsers.hiredis import NOT_ENOUGH_DATA, _HiredisParser
except ImportError:  # pragma: no cover - other redis-py versions: one read_response a reply
    NOT_ENOUGH_DATA = object()

    class _HiredisParser:  # type: ignore[no-redef]  # (no parser is one of these)
        _reader: Any = None


Command = tuple[bytes, ...]
Family = Literal["row", "keyed"]
CHECKPOINT_PREFIX = b"migrator:"


class Reader:
    """Sends read commands as one packed pipeline and returns every reply in order; a
    command Redis refuses (WRONGTYPE...) gives its ResponseError as the reply."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self.scripting = True  # EVAL allowed (cleared when the server refuses it)

    def read(self, commands: Sequence[Command]) -> list[Any]:
        if not commands:
            return []
        payload = resp(commands)
        return retry(lambda: self._send(payload, len(commands)))

    def send(self, commands: Sequence[Command]) -> Pending:
        """Send now, read the replies later (``Pending.wait``), so that Redis works while the
        caller reads the next batch from MySQL. A dropped connection is retried in ``wait``."""
        if not commands:
            return Pending(self, 0, None)
        pending = self.send_packed(resp(commands), len(commands))
        pending.commands = commands
        return pending

    def send_packed(self, payload: bytes, n: int) -> Pending:
        """``send`` for commands already packed as RESP: ``n`` of them in ``payload``."""
        pool = self.client.connection_pool
        conn = None
        if n:
            try:
                conn = pool.get_connection()
                conn.send_packed_command([payload], check_health=False)
            except (RedisConnectionError, RedisTimeoutError, OSError):
                if conn is not None:
                    conn.disconnect()
                    pool.release(conn)
                conn = None
        return Pending(self, n, conn, payload)

    def _receive(self, conn: Any, n: int) -> list[Any]:
        parser = getattr(conn, "_parser", None)
        if isinstance(parser, _HiredisParser) and parser._reader is not None:
            return _hiredis_replies(parser, n)
        replies: list[Any] = []
        for _ in range(n):
            try:
                replies.append(conn.read_response())
            except ResponseError as e:
                replies.append(e)
        return replies

    def _send(self, payload: bytes, n: int) -> list[Any]:
        pool = self.client.connection_pool
        conn = pool.get_connection()
        try:
            conn.send_packed_command([payload], check_health=False)
            return self._receive(conn, n)
        except BaseException:
            conn.disconnect()
            raise
        finally:
            pool.release(conn)

    def scan(self, glob: str, count: int = 2000) -> Iterator[list[bytes]]:
        """Keys matching ``glob``, a SCAN page at a time (a key may come twice)."""
        cursor = 0
        while True:
            cursor, keys = retry(
                lambda: self.client.scan(cursor=cursor, match=glob, count=count)  # noqa: B023
            )
            if keys:
                yield [k if isinstance(k, bytes) else k.encode() for k in keys]
            if int(cursor) == 0:
                return


def _hiredis_replies(parser: Any, n: int) -> list[Any]:
    """``n`` replies straight from redis-py's hiredis reader, without its per-reply calls
    (an error reply is its ResponseError, as in ``Reader._receive``)."""
    gets, more = parser._reader.gets, parser.read_from_socket
    replies: list[Any] = []
    append = replies.append
    while True:  # only these replies can come on this connection: no need to count each
        reply = gets()
        while reply is not NOT_ENOUGH_DATA:
            append(reply)
            reply = gets()
        if len(replies) >= n:
            break
        more()
    if any(issubclass(t, RedisConnectionError) for t in set(map(type, replies))):
        raise next(r for r in replies if isinstance(r, RedisConnectionError))  # LOADING...
    return replies


class Pending:
    """Replies still to be read for ``n`` commands already sent as ``payload`` (over ``conn``;
    without one, they are sent again when wanted: ``commands`` by ``Reader.read`` if given)."""

    def __init__(
        self,
        reader: Reader,
        n: int,
        conn: Any,
        payload: bytes = b"",
        commands: Sequence[Command] | None = None,
    ) -> None:
        self.reader, self.n, self.conn, self.payload = reader, n, conn, payload
        self.commands = commands

    def _again(self) -> list[Any]:
        if self.commands is not None:
            return self.reader.read(self.commands)
        reader, payload, n = self.reader, self.payload, self.n
        return retry(lambda: reader._send(payload, n))

    def wait(self) -> list[Any]:
        if not self.n:
            return []
        conn, self.conn = self.conn, None
        if conn is None:  # the send failed: send again, with retries
            return self._again()
        pool = self.reader.client.connection_pool
        try:
            return self.reader._receive(conn, self.n)
        except (RedisConnectionError, RedisTimeoutError, OSError):
            conn.disconnect()
            return self._again()
        except BaseException:
            conn.disconnect()
            raise
        finally:
            pool.release(conn)


@dataclass(frozen=True)
class KeyPattern:
    table: str
    family: Family
    template: Template
    what: str  # structure name, for notes: hash, columns, unique-string, index, ...

    @property
    def literal_chars(self) -> int:
        return sum(len(p) for p in self.template.parts if isinstance(p, str))

    def regex(self) -> re.Pattern[bytes]:
        out = []
        seen: set[int] = set()
        for p in self.template.parts:
            if isinstance(p, str):
                out.append(re.escape(p.encode()))
            elif p in seen:
                out.append(b"(?P=g%d)" % p)
            else:
                seen.add(p)
                out.append(b"(?P<g%d>.*)" % p)
        return re.compile(b"".join(out), re.DOTALL)


def literal(text: str) -> Template:
    return Template.parse(text.replace("{", "{{").replace("}", "}}"))


def table_patterns(plan: TablePlan) -> list[KeyPattern]:
    """Every key pattern a table's plan writes, by family."""
    r, t, name = plan.resolved, plan.table, plan.table.name
    out: list[KeyPattern] = []
    if t.kind == "hash":
        out.append(KeyPattern(name, "row", r.key, "hash"))
    elif t.kind == "columns":
        sep = plan.table_sep.replace("{", "{{").replace("}", "}}")
        for c in (*r.columns, *r.primary_key):
            text = r.key.text + sep + c.replace("{", "{{").replace("}", "}}")
            out.append(KeyPattern(name, "row", Template.parse(text), "columns"))
    for u in t.unique:
        if u.key is not None:
            out.append(KeyPattern(name, "row", u.key, "unique-string"))
        else:
            key = plan.unique_hash_key(u.columns).decode()
            out.append(KeyPattern(name, "keyed", literal(key), "unique"))
    for ix in r.index_sets():
        out.append(KeyPattern(name, "keyed", plan.index_template(ix.columns), "index"))
    out += [KeyPattern(name, "keyed", s.key, "sorted") for s in t.sorted]
    out += [KeyPattern(name, "keyed", s.key, "set") for s in t.sets]
    out += [KeyPattern(name, "keyed", x.key, "latest") for x in t.latest]
    if r.counter is not None:
        out.append(KeyPattern(name, "keyed", r.counter, "counter"))
    return out


class Patterns:
    """All tables' key patterns; decides which table and family a scanned key belongs to."""

    def __init__(self, plans: Sequence[TablePlan]) -> None:
        self.all = [p for plan in plans for p in table_patterns(plan)]
        self.compiled = {p: p.regex() for p in self.all}

    def globs(self, table: str) -> list[str]:
        """The table's SCAN globs, leaving out those another of its globs already covers."""
        own = [p for p in self.all if p.table == table]
        globs: list[str] = []
        for p in sorted(own, key=lambda p: p.literal_chars):
            sample = _sample(p.template)
            if not any(_glob_regex(g).fullmatch(sample) for g in globs):
                globs.append(p.template.glob())
        return globs

    def candidates(self, table: str) -> list[KeyPattern]:
        """Patterns that can match keys under the table's globs, most specific first."""
        heads = [_head(p.template) for p in self.all if p.table == table]
        near = [
            p
            for p in self.all
            if any(
                _head(p.template).startswith(h) or h.startswith(_head(p.template)) for h in heads
            )
        ]
        return sorted(near, key=lambda p: -p.literal_chars)

    def owned(
        self, table: str, keys: Sequence[bytes], candidates: Sequence[KeyPattern]
    ) -> Iterator[tuple[bytes, KeyPattern]]:
        """The keys whose most specific pattern is one of ``table``'s, with that pattern."""
        for key in keys:
            if key.startswith(CHECKPOINT_PREFIX):
                continue
            for p in candidates:
                if self.compiled[p].fullmatch(key):
                    if p.table == table:
                        yield key, p
                    break

    def invert(self, pattern: KeyPattern, key: bytes) -> dict[str, bytes] | None:
        """The placeholder values a key was rendered from (None if it does not match)."""
        m = self.compiled[pattern].fullmatch(key)
        if m is None:
            return None
        cols = pattern.template.columns
        return {cols[i]: m.group(f"g{i}") for i in range(len(cols))}

    def scan_owned(self, reader: Reader, table: str) -> Iterator[list[tuple[bytes, KeyPattern]]]:
        """Every key the table owns, a SCAN page at a time; each glob's keys are left out
        when an earlier glob of the table also matches them, so a key comes once per page."""
        cands = self.candidates(table)
        done: list[re.Pattern[bytes]] = []
        for glob in self.globs(table):
            for keys in reader.scan(glob):
                page = [k for k in keys if not any(g.fullmatch(k) for g in done)]
                owned = list(self.owned(table, page, cands))
                if owned:
                    yield owned
            done.append(_glob_regex(glob))


def _head(t: Template) -> str:
    first = t.parts[0] if t.parts else ""
    return first if isinstance(first, str) else ""


def _sample(t: Template) -> bytes:
    """A key the template renders with a placeholder value no literal text contains."""
    return "".join(p if isinstance(p, str) else "\x00" for p in t.parts).encode()


def _glob_regex(glob: str) -> re.Pattern[bytes]:
    """A regex for the globs Template.glob() writes: ``*`` and backslash escapes."""
    out = []
    i = 0
    while i < len(glob):
        ch = glob[i]
        if ch == "\\" and i + 1 < len(glob):
            out.append(re.escape(glob[i + 1]))
            i += 2
            continue
        out.append(".*" if ch == "*" else "." if ch == "?" else re.escape(ch))
        i += 1
    return re.compile("".join(out).encode(), re.DOTALL)
