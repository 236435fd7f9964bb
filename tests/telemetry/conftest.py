"""A local OTLP/HTTP receiver: what the command line exports, decoded as the collector
would (``opentelemetry-proto``'s messages), for the telemetry tests."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

pytest.importorskip(
    "opentelemetry.proto", reason="the telemetry tests need pip install 'asyncrecall[otel]'"
)

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


def value_of(value: AnyValue) -> Any:
    """An OTLP attribute value as Python."""
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [value_of(v) for v in value.array_value.values]
    return getattr(value, kind) if kind else None


@dataclass
class Span:
    name: str
    span_id: bytes
    parent_span_id: bytes
    trace_id: bytes
    kind: int
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]]
    resource: dict[str, Any]


@dataclass
class Receiver:
    """What reached ``/v1/traces`` and ``/v1/metrics``."""

    endpoint: str = ""
    spans: list[Span] = field(default_factory=list)
    #: metric name -> its data points' (attributes, value) pairs
    metrics: dict[str, list[tuple[dict[str, Any], float]]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add_traces(self, body: bytes) -> None:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        for resource_spans in request.resource_spans:
            resource = {a.key: value_of(a.value) for a in resource_spans.resource.attributes}
            for scope in resource_spans.scope_spans:
                for span in scope.spans:
                    with self.lock:
                        self.spans.append(
                            Span(
                                span.name,
                                span.span_id,
                                span.parent_span_id,
                                span.trace_id,
                                span.kind,
                                {a.key: value_of(a.value) for a in span.attributes},
                                [
                                    (e.name, {a.key: value_of(a.value) for a in e.attributes})
                                    for e in span.events
                                ],
                                resource,
                            )
                        )

    def add_metrics(self, body: bytes) -> None:
        request = ExportMetricsServiceRequest()
        request.ParseFromString(body)
        for resource_metrics in request.resource_metrics:
            for scope in resource_metrics.scope_metrics:
                for metric in scope.metrics:
                    kind = metric.WhichOneof("data")
                    for point in getattr(metric, kind).data_points:
                        attributes = {a.key: value_of(a.value) for a in point.attributes}
                        if kind == "histogram":
                            number = float(point.count)  # how many were recorded
                        else:
                            number = float(point.as_int or point.as_double)
                        with self.lock:
                            self.metrics.setdefault(metric.name, []).append((attributes, number))


@pytest.fixture
def otlp_receiver() -> Iterator[Receiver]:
    """An OTLP/HTTP (protobuf) receiver on 127.0.0.1; ``endpoint`` is its base URL."""
    receiver = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.path == "/v1/traces":
                receiver.add_traces(body)
            elif self.path == "/v1/metrics":
                receiver.add_metrics(body)
            else:
                self.send_response(404)
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    receiver.endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=30)
