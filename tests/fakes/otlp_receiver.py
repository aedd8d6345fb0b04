"""An OTLP trace receiver for the tests: what a collector (Jaeger, Tempo, Phoenix) would get,
decoded with `opentelemetry-proto`. Speaks OTLP/HTTP (protobuf, POST /v1/traces) and OTLP/gRPC.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as SpanProto

from tests.harness import devserver


@dataclass
class ReceivedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: int
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    links: list[tuple[str, str]]
    status_code: int
    status_message: str
    events: list[tuple[str, dict[str, Any]]]
    resource: dict[str, Any]

    @property
    def duration_ms(self) -> float:
        return (self.end_ns - self.start_ns) / 1e6


def _value(v: AnyValue) -> Any:
    which = v.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [_value(x) for x in v.array_value.values]
    if which == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in v.kvlist_value.values}
    return getattr(v, which)


def _attrs(kvs: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in kvs}


def decode(body: bytes) -> list[ReceivedSpan]:
    req = trace_service_pb2.ExportTraceServiceRequest()
    req.ParseFromString(body)
    return spans_of(req)


def spans_of(req: trace_service_pb2.ExportTraceServiceRequest) -> list[ReceivedSpan]:
    out: list[ReceivedSpan] = []
    for rs in req.resource_spans:
        resource = _attrs(rs.resource.attributes)
        for ss in rs.scope_spans:
            for s in ss.spans:
                out.append(_span(s, resource))
    return out


def _span(s: SpanProto, resource: dict[str, Any]) -> ReceivedSpan:
    return ReceivedSpan(
        name=s.name,
        trace_id=s.trace_id.hex(),
        span_id=s.span_id.hex(),
        parent_span_id=s.parent_span_id.hex(),
        kind=s.kind,
        start_ns=s.start_time_unix_nano,
        end_ns=s.end_time_unix_nano,
        attributes=_attrs(s.attributes),
        links=[(link.trace_id.hex(), link.span_id.hex()) for link in s.links],
        status_code=s.status.code,
        status_message=s.status.message,
        events=[(e.name, _attrs(e.attributes)) for e in s.events],
        resource=resource,
    )


@dataclass
class OtlpReceiver:
    """Start with `start()`; spans accumulate in `spans` (thread-safe reads via `snapshot`)."""

    http_port: int = field(default_factory=devserver.free_port)
    grpc_port: int = field(default_factory=devserver.free_port)
    spans: list[ReceivedSpan] = field(default_factory=list)
    requests: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _http: ThreadingHTTPServer | None = None
    _grpc: Any = None

    def add(self, spans: list[ReceivedSpan]) -> None:
        with self._lock:
            self.spans.extend(spans)
            self.requests += 1

    def snapshot(self) -> list[ReceivedSpan]:
        with self._lock:
            return list(self.spans)

    @property
    def http_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def grpc_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.grpc_port}"

    def env(self, protocol: str = "http/protobuf") -> dict[str, str]:
        """What a worker needs to export here."""
        endpoint = self.grpc_endpoint if protocol == "grpc" else self.http_endpoint
        return {
            "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
            "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
            "OTEL_BSP_SCHEDULE_DELAY": "200",
            "OTEL_SERVICE_NAME": "agentlane-test-worker",
        }

    def start(self) -> OtlpReceiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                if self.path.rstrip("/") != "/v1/traces":
                    self.send_response(404)
                    self.end_headers()
                    return
                receiver.add(decode(body))
                reply = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: object) -> None:
                pass

        self._http = ThreadingHTTPServer(("127.0.0.1", self.http_port), Handler)
        threading.Thread(target=self._http.serve_forever, daemon=True).start()

        import grpc
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc

        class Servicer(trace_service_pb2_grpc.TraceServiceServicer):
            def Export(  # noqa: N802 - the generated service's name
                self, request: trace_service_pb2.ExportTraceServiceRequest, context: object
            ) -> trace_service_pb2.ExportTraceServiceResponse:
                receiver.add(spans_of(request))
                return trace_service_pb2.ExportTraceServiceResponse()

        self._grpc = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Servicer(), self._grpc)
        self._grpc.add_insecure_port(f"127.0.0.1:{self.grpc_port}")
        self._grpc.start()
        return self

    def stop(self) -> None:
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
        if self._grpc is not None:
            self._grpc.stop(0)

    def wait_for(
        self, ok: Callable[[list[ReceivedSpan]], bool], timeout: float = 30
    ) -> list[ReceivedSpan]:
        deadline = time.monotonic() + timeout
        while True:
            spans = self.snapshot()
            if ok(spans) or time.monotonic() > deadline:
                return spans
            time.sleep(0.1)
