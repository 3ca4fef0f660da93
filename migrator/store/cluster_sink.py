"""migrate's sinks for a Redis Cluster: ClusterSink (the end-of-table writes: checkpoints,
counters, the per-key transactions of latest lists) and ClusterWriter (the hot path's
batches), both routing every command to its slot's primary through ``cluster.Router``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from redis.cluster import RedisCluster

from migrator.retry import Retrying
from migrator.store.cluster import Router, first_error
from migrator.store.sink import BackgroundWriter, Client, PackedWriter, RedisSink, retry

if TYPE_CHECKING:
    from migrator.plan.planner import Row, Stats, TablePlan

Command = tuple[bytes, ...]


class ClusterSink:
    """RedisSink for a cluster: each batch split per primary, every reply checked."""

    def __init__(self, client: RedisCluster, retrying: Retrying | None = None) -> None:
        self.client = client
        self.router = Router(client)
        self.retrying = retrying
        self.commands_sent = 0

    def write(self, commands: Sequence[Command]) -> None:
        if not commands:
            return
        replies = retry(
            lambda: self.router.send(commands), what="the Redis Cluster", retrying=self.retrying
        )
        first_error(commands, replies)
        self.commands_sent += len(commands)


class Writer(Protocol):
    """migrate's batch writer: PackedWriter (one server) or ClusterWriter."""

    commands_sent: int

    def pack(self, plan: TablePlan, rows: Sequence[Row]) -> tuple[Any, int, Stats]: ...

    def put(self, payload: Any, count: int, checkpoint: Command | None = None) -> None: ...

    def close(self) -> Command | None: ...


class ClusterWriter(BackgroundWriter):
    """PackedWriter for a cluster: a batch is planned as commands (``TablePlan.plan``, the
    same commands ``pack`` encodes) and routed per slot from the background thread."""

    thread_name = "cluster-writer"

    def __init__(
        self, client: RedisCluster, depth: int = 2, retrying: Retrying | None = None
    ) -> None:
        self.router = Router(client)
        self.retrying = retrying
        super().__init__(depth)

    def pack(self, plan: TablePlan, rows: Sequence[Row]) -> tuple[list[Command], int, Stats]:
        commands, stats = plan.plan(rows)
        return commands, len(commands), stats

    def _deliver(self, payload: list[Command], count: int, pending: Command | None) -> None:
        commands = payload if pending is None else [pending, *payload]
        replies = retry(
            lambda: self.router.send(commands), what="the Redis Cluster", retrying=self.retrying
        )
        first_error(commands, replies)


def writer_for(client: Client, retrying: Retrying | None = None) -> Writer:
    """The hot path's writer for this target; transient failures retried as ``retrying``
    says (default policy when None)."""
    if isinstance(client, RedisCluster):
        return ClusterWriter(client, retrying=retrying)
    return PackedWriter(client, retrying=retrying)


def sink_for(client: Client, retrying: Retrying | None = None) -> RedisSink | ClusterSink:
    if isinstance(client, RedisCluster):
        return ClusterSink(client, retrying)
    return RedisSink(client, retrying)
