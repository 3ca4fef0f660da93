"""Redis Cluster targets: connecting, routing commands per slot, and the sinks migrate uses.

The rule: a target is a cluster when its URL is ``redis+cluster://host:port[,host:port...]``
(seed nodes; ``rediss+cluster://`` for TLS), or when the server a ``redis://`` URL names
reports ``cluster_enabled:1`` in ``INFO cluster``. Either way the tool then talks to every
primary through redis-py's ``RedisCluster`` (its slot map and connection pools).

Every command migrate sends names one key (HSET, SADD, ZADD, SET, and the per-key
``MULTI / DEL / RPUSH / EXEC`` of a latest list), so a batch is split by the slot of each
command's key: one packed pipeline per primary, all sent before any reply is read. A
``MOVED`` reply refreshes the slot map and sends the redirected commands again (writes are
idempotent); ``ASK`` sends the command to the importing node after ``ASKING``; ``TRYAGAIN``
and ``CLUSTERDOWN`` wait a little and try again, a bounded number of times.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import unquote

import hiredis
import redis
from redis.cluster import ClusterNode, RedisCluster
from redis.crc import key_slot
from redis.exceptions import (
    AskError,
    MovedError,
    RedisClusterException,
    ResponseError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from migrator.errors import ConnectError, MigratorError
from migrator.plan.resp import resp
from migrator.retry import Retrying
from migrator.store.failures import connect_failure, refused_login
from migrator.store.sink import Client, TransientReply, connect, refused
from migrator.urls import mask, readable

Command = tuple[bytes, ...]
SCHEMES = ("redis+cluster", "rediss+cluster")
#: rounds of redirected or refused (TRYAGAIN, CLUSTERDOWN) commands before giving up
REDIRECT_ROUNDS = 12


# -- connecting ---------------------------------------------------------------------------------
def is_cluster(client: Client) -> bool:
    return isinstance(client, RedisCluster)


def connect_any(url: str, *, timeout: float = 10.0, retrying: Retrying | None = None) -> Client:
    """A checked client of the target: ``redis.Redis`` for a single server, ``RedisCluster``
    for a cluster (see the module's rule). Failures become ConnectError, never with the
    password. ``retrying``: a single server that refuses connections is tried again
    (``sink.connect``)."""
    if url.split("://", 1)[0].lower() in SCHEMES:
        return _seeded(url, timeout)
    try:
        client = connect(url, timeout=timeout, retrying=retrying)
    except ConnectError as e:
        if "SELECT is not allowed in cluster mode" not in e.message:
            raise
        raise MigratorError(
            f"{mask(url)} is a Redis Cluster node, and a cluster has only database 0",
            "drop the database number from the target URL (e.g. redis://host:7000)",
        ) from None
    if not cluster_enabled(client):
        return client
    client.close()
    return _opened(lambda: RedisCluster.from_url(url, **_timeouts(timeout)), url)


def cluster_enabled(client: redis.Redis) -> bool:
    """Whether the server says ``cluster_enabled:1`` (False when INFO is not allowed)."""
    try:
        info = client.info("cluster")
    except ResponseError:
        return False
    return bool(int(info.get("cluster_enabled", 0) or 0))


def _timeouts(timeout: float) -> dict[str, Any]:
    return {"socket_connect_timeout": timeout, "socket_timeout": max(timeout, 60.0)}


def parse_seeds(url: str) -> tuple[list[tuple[str, int]], dict[str, Any]]:
    """``redis+cluster://[user:password@]h1:p1,h2:p2[/0][?option=value&...]`` -> seed nodes
    and client options. Query options are redis-py's own (``ssl_ca_certs``, ``ssl_certfile``,
    ``ssl_keyfile``, ``ssl_cert_reqs``, timeouts...), read as ``redis.from_url`` reads them."""
    url = readable(url, "target")
    scheme, rest = url.split("://", 1)
    rest, _, query = rest.partition("?")
    netloc, _, path = rest.partition("/")
    tls = scheme.lower().startswith("rediss")
    options: dict[str, Any] = {"ssl": tls}
    if query:
        try:
            extra = redis.connection.parse_url(f"{'rediss' if tls else 'redis'}://x/?{query}")
        except ValueError as e:
            raise MigratorError(f"not a cluster URL: {mask(url)} ({e})") from None
        for key in ("host", "connection_class"):
            extra.pop(key, None)
        if extra.pop("db", 0) != 0:
            raise MigratorError(
                f"{mask(url)} names a database; a Redis Cluster has only database 0",
                "drop 'db=' from the target URL",
            )
        options.update(extra)
    if "@" in netloc:
        auth, netloc = netloc.rsplit("@", 1)
        user, _, password = auth.partition(":")
        options["username"] = unquote(user) or None
        options["password"] = unquote(password) or None
    db = path.strip("/")
    if db not in ("", "0"):
        raise MigratorError(
            f"{mask(url)} names database {db}; a Redis Cluster has only database 0",
            f"drop '/{db}' from the target URL",
        )
    seeds = []
    for part in netloc.split(","):
        host, _, port = part.strip().rpartition(":")
        if not host or not port.isdigit():
            raise MigratorError(
                f"not a cluster URL: {mask(url)} ('{part}' is not host:port)",
                "write it as redis+cluster://host1:7000,host2:7001",
            )
        seeds.append((host.strip("[]"), int(port)))
    return seeds, options


def _seeded(url: str, timeout: float) -> RedisCluster:
    seeds, options = parse_seeds(url)
    nodes = [ClusterNode(h, p) for h, p in seeds]
    options = {**_timeouts(timeout), **options}  # the URL's own timeouts win
    return _opened(lambda: RedisCluster(startup_nodes=nodes, **options), url)


def _opened(make: Any, url: str) -> RedisCluster:
    try:
        client: RedisCluster = make()
        client.ping(target_nodes=RedisCluster.PRIMARIES)
    except redis.AuthenticationError as e:
        raise refused_login(url, e, "Redis Cluster") from None
    except (RedisConnectionError, RedisTimeoutError, ResponseError, OSError) as e:
        raise connect_failure(url, e) from None
    except RedisClusterException as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ConnectError(
            f"cannot use the Redis Cluster at {mask(url)}: {first}",
            "are the nodes up and the cluster formed (cluster_state:ok)? "
            "For a single server, write redis://host:port/0",
        ) from None
    return client


# -- routing ------------------------------------------------------------------------------------
def units(commands: Sequence[Command]) -> list[list[Command]]:
    """Commands in sending units: one command, or a whole ``MULTI ... EXEC`` block."""
    if not any(cmd[0] == b"MULTI" for cmd in commands):
        return [[cmd] for cmd in commands]
    out: list[list[Command]] = []
    block: list[Command] | None = None
    for cmd in commands:
        if block is not None:
            block.append(cmd)
            if cmd[0].upper() in (b"EXEC", b"DISCARD"):
                out.append(block)
                block = None
        elif cmd[0].upper() == b"MULTI":
            block = [cmd]
        else:
            out.append([cmd])
    if block is not None:
        out.append(block)
    return out


def unit_key(unit: list[Command]) -> bytes:
    for cmd in unit:
        name = cmd[0].upper()
        if name in (b"EVAL", b"EVALSHA"):  # EVAL script numkeys key ...: routed by its key
            if len(cmd) > 3 and cmd[2] != b"0":
                return cmd[3]
            continue
        if len(cmd) > 1 and name not in (b"MULTI", b"EXEC", b"DISCARD"):
            return cmd[1]
    return b""


class Router:
    """Sends commands to the primaries that own their keys, one packed pipeline per node."""

    def __init__(self, client: RedisCluster) -> None:
        self.client = client
        self.nodes: dict[int, ClusterNode] = {}  # slot -> primary

    def node_of(self, key: bytes) -> ClusterNode:
        slot = key_slot(key)
        node = self.nodes.get(slot)
        if node is None:
            node = self.client.nodes_manager.get_node_from_slot(slot)
            self.nodes[slot] = node
        return node

    def refresh(self) -> None:
        self.nodes.clear()
        self.client.nodes_manager.initialize()

    def send(self, commands: Sequence[Command]) -> list[Any]:
        """Every command's reply, in order; a refused command's reply is its ResponseError."""
        replies: list[Any] = [None] * len(commands)
        todo: list[tuple[int, list[Command], ClusterNode | None]] = []
        at = 0
        for unit in units(commands):
            todo.append((at, unit, None))
            at += len(unit)
        for round_ in range(REDIRECT_ROUNDS):
            again: list[tuple[int, list[Command], ClusterNode | None]] = []
            moved = False
            for (start, unit, _asked), got in self._round(todo):
                redirect: ResponseError | None = next(
                    (r for r in got if isinstance(r, AskError)), None
                )
                if redirect is None and unit[0][0].upper() == b"MULTI":
                    redirect = _redirect_in_exec(got)
                busy = any(_busy(r) for r in got)
                if redirect is not None and type(redirect) is AskError and len(unit) == 1:
                    again.append((start, unit, self._ask_node(redirect)))
                elif redirect is not None or busy:
                    moved = moved or redirect is not None
                    again.append((start, unit, None))
                else:
                    replies[start : start + len(unit)] = got
            if not again:
                return replies
            if moved or round_ > 2:
                self.refresh()
            time.sleep(min(0.05 * 2**round_, 1.0) if round_ else 0)
            todo = again
        # a MOVED/TRYAGAIN storm: the caller's retry policy waits and sends the batch again
        raise TransientReply(
            f"the cluster kept redirecting or refusing {len(todo)} command(s) "
            "(resharding or failing over?)"
        )

    def _ask_node(self, e: AskError) -> ClusterNode:
        node = self.client.nodes_manager.get_node(e.host, e.port)
        if node is None:
            self.refresh()
            node = self.client.nodes_manager.get_node(e.host, e.port)
        if node is None:
            raise ConnectError(f"the Redis Cluster redirected to an unknown node {e.host}:{e.port}")
        return node

    def _round(
        self, todo: list[tuple[int, list[Command], ClusterNode | None]]
    ) -> list[tuple[tuple[int, list[Command], ClusterNode | None], list[Any]]]:
        """Send each node its units (to all nodes before any reply is read)."""
        by_node: dict[str, tuple[ClusterNode, list[Any]]] = {}
        node_of = self.node_of
        for item in todo:
            node = item[2] or node_of(unit_key(item[1]))
            got = by_node.get(node.name)
            if got is None:
                by_node[node.name] = (node, [item])
            else:
                got[1].append(item)
        sent = []
        try:
            for node, items in by_node.values():
                pool = self.client.get_redis_connection(node).connection_pool
                conn = pool.get_connection()
                sent.append((pool, conn, items))
                payload = resp(
                    cmd
                    for _, unit, asked in items
                    for cmd in ([(b"ASKING",), *unit] if asked is not None else unit)
                )
                if conn._sock is None:
                    conn.connect()
                sock: Any = conn._sock  # redis-py's reader stays idle: _receive reads
                sock.sendall(payload)
            results = []
            for _pool, conn, items in sent:
                n = sum(len(u) + (a is not None) for _, u, a in items)
                replies = iter(_receive(conn._sock, n))
                for item in items:
                    if item[2] is not None:
                        next(replies)  # ASKING's +OK
                    results.append((item, [next(replies) for _ in item[1]]))
            return results
        except (RedisConnectionError, RedisTimeoutError, OSError) as e:
            for _pool, conn, _ in sent:
                conn.disconnect()
            self.nodes.clear()  # a node may have failed over: ask for the map again
            raise RedisConnectionError(str(e)) from None
        except BaseException:
            for _pool, conn, _ in sent:
                conn.disconnect()
            raise
        finally:
            for pool, conn, _ in sent:
                pool.release(conn)


def _receive(sock: Any, n: int) -> list[Any]:
    """n replies read straight from the socket (redis-py's reader stays idle); an error
    reply becomes its ResponseError (MovedError, AskError: the redirections)."""
    reader = hiredis.Reader()
    out: list[Any] = []
    while len(out) < n:
        reply = reader.gets()
        if reply is False:
            chunk = sock.recv(1 << 20)
            if not chunk:
                raise RedisConnectionError("connection closed by Redis")
            reader.feed(chunk)
            continue
        out.append(_error(reply) if isinstance(reply, hiredis.ReplyError) else reply)
    return out


def _error(reply: Any) -> ResponseError:
    text = str(reply)
    if text.startswith("MOVED "):
        return MovedError(text[6:])
    if text.startswith("ASK "):
        return AskError(text[4:])
    return ResponseError(text)


def _busy(reply: Any) -> bool:
    """TRYAGAIN (a multi-key command during resharding) or CLUSTERDOWN: wait, try again."""
    return isinstance(reply, ResponseError) and str(reply).startswith(("TRYAGAIN", "CLUSTERDOWN"))


def _redirect_in_exec(got: list[Any]) -> ResponseError | None:
    """A MULTI block that was aborted because one of its commands was redirected."""
    if any(isinstance(r, ResponseError) and str(r).startswith("EXECABORT") for r in got):
        return ResponseError("EXECABORT")
    return None


def first_error(commands: Sequence[Command], replies: Sequence[Any]) -> None:
    """Raise TargetError naming the first command Redis refused (also inside an EXEC)."""
    for cmd, reply in zip(commands, replies):
        errors = reply if isinstance(reply, list) else [reply]
        for e in errors:
            if isinstance(e, ResponseError):
                raise refused(cmd, e)
