"""``sync --metrics HOST:PORT``: a small HTTP server on a thread of its own, with

* ``/metrics``: the figures (``migrator.sync.figures``) in Prometheus' text format, written
  by ``prometheus_client`` (the project's client library) from a collector that reads them at
  scrape time — nothing is counted twice;
* ``/healthz``: 200 or 503, and one line saying why (``SyncFigures.health``).

A shard's sync (``--shard NAME``, docs/sharding.md#sync) labels every metric
``shard="NAME"`` besides ``mapping``, and its ``/healthz`` line begins ``shard NAME:``;
``migrator_sync_collisions_total{table}`` counts the rows it left out because another shard
owns their primary key (sync/shard_rows.py).

Every metric is named ``migrator_sync_*``; the list is in docs/sync.md.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterable, Iterator
from socketserver import ThreadingMixIn
from typing import Any, Protocol
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily
from prometheus_client.registry import Collector

from migrator.errors import MigratorError

P = "migrator_sync_"


class Figures(Protocol):
    """What is served (``migrator.sync.figures.SyncFigures``)."""

    def as_dict(self) -> dict[str, Any]: ...

    def health(self) -> tuple[bool, str]: ...


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT``, ``[IPv6]:PORT`` or ``:PORT`` (127.0.0.1) -> (host, port)."""
    host, sep, port = text.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    if not sep or not port.isdigit() or not 0 <= int(port) < 65536:
        raise MigratorError(
            f"--metrics {text!r} is not HOST:PORT",
            "e.g. --metrics 127.0.0.1:9108 (0.0.0.0:9108 to be scraped from other hosts)",
        )
    return host, int(port)


class Collided(Protocol):
    """A shard's collisions (``migrator.sync.shard_rows.Collisions``): rows per table."""

    def per_table(self) -> dict[str, int]: ...


class CollisionsCollector(Collector):
    """``migrator_sync_collisions_total``: a shard's rows left out, per table."""

    def __init__(self, collisions: Collided, labels: dict[str, str]) -> None:
        self.collisions, self.labels = collisions, labels

    def collect(self) -> Iterator[Any]:
        m = CounterMetricFamily(
            P + "collisions", "Row changes of this shard left out because another shard owns "
            "their primary key", labels=[*self.labels, "table"],
        )  # fmt: skip
        for table, n in sorted(self.collisions.per_table().items()):
            m.add_metric([*self.labels.values(), table], n)
        yield m


class FiguresCollector(Collector):
    """The figures as Prometheus metric families, read when scraped."""

    def __init__(self, figures: Figures, labels: dict[str, str]) -> None:
        self.figures = figures
        self.labels = labels  # constant labels: the mapping

    def collect(self) -> Iterator[Any]:
        f = self.figures.as_dict()
        names, values = list(self.labels), list(self.labels.values())

        def family(kind: Callable[..., Any], name: str, doc: str, *extra: str) -> Any:
            return kind(P + name, doc, labels=[*names, *extra])

        def one(kind: Callable[..., Any], name: str, doc: str, value: float) -> Any:
            m = family(kind, name, doc)
            m.add_metric(values, value)
            return m

        def by(
            kind: Callable[..., Any], name: str, doc: str, label: str, of: dict[str, Any]
        ) -> Any:
            m = family(kind, name, doc, label)
            for key, value in of.items():
                m.add_metric([*values, key], value)
            return m

        yield one(GaugeMetricFamily, "lag_seconds", "Seconds behind the source's log "
                  "(0 when all is applied; defined in the docs' sync.md)",
                  f["lag_seconds"])  # fmt: skip
        yield one(GaugeMetricFamily, "healthy", "1 when /healthz answers 200", int(f["healthy"]))
        phases = {p: int(f["phase"] == p) for p in ("starting", "loading", "following", "stopped")}
        yield by(GaugeMetricFamily, "phase", "1 for the current phase", "phase", phases)
        yield one(CounterMetricFamily, "transactions", "Source transactions applied (those "
                  "touching no mapped table too)", f["transactions"])  # fmt: skip
        rows = family(CounterMetricFamily, "row_changes", "Row changes applied",
                      "table", "operation")  # fmt: skip
        txns = family(CounterMetricFamily, "table_transactions", "Transactions applied that "
                      "changed rows of the table so", "table", "operation")  # fmt: skip
        for metric, per_table in ((rows, f["row_changes"]), (txns, f["table_transactions"])):
            for table, ops in per_table.items():
                for op, n in ops.items():
                    metric.add_metric([*values, table, op], n)
            yield metric
        yield by(CounterMetricFamily, "stream_entries", "Change-stream entries appended "
                 "(streams:), by stream", "stream", f["stream_entries"])  # fmt: skip
        info = family(InfoMetricFamily, "position", "The binary-log position stored in Redis "
                      "with the last applied transaction")  # fmt: skip
        pos = f["position"] or {"file": "", "pos": "", "gtid": ""}
        info.add_metric(values, {k: str(pos[k]) for k in ("file", "pos", "gtid")})
        yield info
        head = f["source_position"] or {"file": "", "pos": "", "gtid": ""}
        info = family(InfoMetricFamily, "source_position", "How far the source's log is "
                      "known to reach (SHOW MASTER STATUS asked every 0.25 s, heartbeats, "
                      "events)")  # fmt: skip
        info.add_metric(values, {k: str(head[k]) for k in ("file", "pos", "gtid")})
        yield info
        for name, doc in (("behind_bytes", "Bytes of binary log between the applied "
                           "position and the source's log end"),
                          ("behind_transactions", "Transactions of the source's GTID state "
                           "not applied yet")):  # fmt: skip
            if f[name] is not None:  # not known (no GTIDs; files whose sizes are not asked)
                yield one(GaugeMetricFamily, name, doc, f[name])
        yield one(CounterMetricFamily, "heartbeats", "Heartbeats received from the source",
                  f["heartbeats"])  # fmt: skip
        yield one(GaugeMetricFamily, "source_silence_seconds", "Seconds since the source last "
                  "sent an event or a heartbeat", f["seconds_since_source_heard"])  # fmt: skip
        yield one(CounterMetricFamily, "reconnects", "Binary-log connections opened again "
                  "after a loss", f["reconnects"])  # fmt: skip
        yield by(CounterMetricFamily, "retries", "Retries of transient failures", "what",
                 f["retries"])  # fmt: skip
        yield one(GaugeMetricFamily, "failures_in_a_row", "Transient failures in a row now "
                  "(0 once a try succeeded)", f["failures_in_a_row"])  # fmt: skip
        yield by(CounterMetricFamily, "errors", "Failures met, by kind", "kind", f["errors"])
        yield by(CounterMetricFamily, "schema_changes", "DDL of mapped tables applied (not "
                 "failures), by effect", "effect", f["schema_changes"])  # fmt: skip
        snap = f["snapshot"]
        yield by(CounterMetricFamily, "snapshot_rows", "Rows written by the first load",
                 "table", {t: s["rows"] for t, s in snap.items()})  # fmt: skip
        yield by(CounterMetricFamily, "snapshot_chunks", "Batches (chunks) written by the "
                 "first load", "table", {t: s["chunks"] for t, s in snap.items()})  # fmt: skip
        yield by(GaugeMetricFamily, "snapshot_table_done", "1 once the table is loaded",
                 "table", {t: int(s["done"]) for t, s in snap.items()})  # fmt: skip
        yield one(CounterMetricFamily, "redis_round_trips", "Requests sent to Redis and "
                  "waited for (a MULTI/EXEC group, a batch of the load)",
                  f["redis_round_trips"])  # fmt: skip


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _Server6(_Server):
    address_family = socket.AF_INET6


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # no access log on stderr
        pass


class MetricsServer:
    """Serves ``/metrics`` and ``/healthz`` for ``figures`` until ``close()``."""

    def __init__(
        self,
        address: str,
        figures: Figures,
        mapping: str,
        shard: str = "",
        collisions: Collided | None = None,
    ) -> None:
        host, port = parse_address(address)
        self.figures = figures
        self.shard = shard
        registry = CollectorRegistry(auto_describe=False)
        labels = {"mapping": mapping, **({"shard": shard} if shard else {})}
        registry.register(FiguresCollector(figures, labels))
        if shard and collisions is not None:
            registry.register(CollisionsCollector(collisions, labels))
        self.metrics_app = make_wsgi_app(registry)
        server_class = _Server6 if ":" in host else _Server
        try:
            self.server = make_server(host, port, self.app, server_class, _Quiet)
        except OSError as e:
            raise MigratorError(
                f"--metrics {address}: cannot listen there: {e.strerror or e}",
                "another process (a second sync?) may hold the port: choose another one",
            ) from None
        self.port = int(self.server.server_address[1])
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.2}, name="metrics",
            daemon=True,
        )  # fmt: skip
        self.thread.start()

    def app(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "/")
        if path == "/healthz":
            ok, why = self.figures.health()
            status = "200 OK" if ok else "503 Service Unavailable"
            start_response(status, [("Content-Type", "text/plain; charset=utf-8")])
            who = f"shard {self.shard}: " if self.shard else ""
            return [f"{who}{'ok' if ok else 'unhealthy'}: {why}\n".encode()]
        if path == "/metrics":
            return self.metrics_app(environ, start_response)
        start_response("404 Not Found", [("Content-Type", "text/plain; charset=utf-8")])
        return [b"not found: /metrics and /healthz are served here\n"]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(2.0)
