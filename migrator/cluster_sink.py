"""migrate's sinks for a Redis Cluster: ClusterSink (the end-of-table writes: checkpoints,
counters, the per-key transactions of latest lists) and ClusterWriter (the hot path's
batches), both routing every command to its slot's primary through ``cluster.Router``."""

from __future__ import annotations

import queue
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from redis.cluster import RedisCluster

from migrator.cluster import Router, first_error
from migrator.sink import Client, PackedWriter, RedisSink, retry

if TYPE_CHECKING:
    from migrator.planner import Row, Stats, TablePlan

Command = tuple[bytes, ...]


class ClusterSink:
    """RedisSink for a cluster: each batch split per primary, every reply checked."""

    def __init__(self, client: RedisCluster) -> None:
        self.client = client
        self.router = Router(client)
        self.commands_sent = 0

    def write(self, commands: Sequence[Command]) -> None:
        if not commands:
            return
        replies = retry(lambda: self.router.send(commands), what="the Redis Cluster")
        first_error(commands, replies)
        self.commands_sent += len(commands)


class Writer(Protocol):
    """migrate's batch writer: PackedWriter (one server) or ClusterWriter."""

    commands_sent: int

    def pack(self, plan: TablePlan, rows: Sequence[Row]) -> tuple[Any, int, Stats]: ...

    def put(self, payload: Any, count: int, checkpoint: Command | None = None) -> None: ...

    def close(self) -> Command | None: ...


class ClusterWriter:
    """PackedWriter for a cluster: a batch is planned as commands (``TablePlan.plan``, the
    same commands ``pack`` encodes) and routed per slot from a background thread; a batch's
    checkpoint goes out with the next batch, once this one was acknowledged."""

    def __init__(self, client: RedisCluster, depth: int = 2) -> None:
        self.router = Router(client)
        self.queue: queue.Queue[tuple[list[Command], Command | None] | None] = queue.Queue(depth)
        self.pending: Command | None = None
        self.commands_sent = 0
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="cluster-writer", daemon=True)
        self.thread.start()

    def pack(self, plan: TablePlan, rows: Sequence[Row]) -> tuple[list[Command], int, Stats]:
        commands, stats = plan.plan(rows)
        return commands, len(commands), stats

    def put(self, payload: list[Command], count: int, checkpoint: Command | None = None) -> None:
        while True:
            self._check()
            try:
                self.queue.put((payload, checkpoint), timeout=0.5)
                return
            except queue.Full:
                continue

    def close(self) -> Command | None:
        while self.thread.is_alive():
            try:
                self.queue.put(None, timeout=0.5)
                break
            except queue.Full:
                continue
        self.thread.join()
        self._check()
        return self.pending

    def _check(self) -> None:
        if self.error is not None:
            error, self.error = self.error, None
            raise error

    def _run(self) -> None:
        try:
            while (item := self.queue.get()) is not None:
                commands, checkpoint = item
                if self.pending is not None:
                    commands = [self.pending, *commands]
                replies = retry(lambda c=commands: self.router.send(c), what="the Redis Cluster")  # type: ignore[misc]
                first_error(commands, replies)
                self.commands_sent += len(commands)
                self.pending = checkpoint
        except BaseException as e:  # handed to the producer at its next put/close
            self.error = e
            while True:
                try:
                    self.queue.get_nowait()
                except queue.Empty:
                    break


def writer_for(client: Client) -> Writer:
    """The hot path's writer for this target."""
    if isinstance(client, RedisCluster):
        return ClusterWriter(client)
    return PackedWriter(client)


def sink_for(client: Client) -> RedisSink | ClusterSink:
    if isinstance(client, RedisCluster):
        return ClusterSink(client)
    return RedisSink(client)
