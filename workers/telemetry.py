"""Telemetry for a worker process (issue 12): OpenTelemetry traces exported over OTLP, and the
Temporal runtime's Prometheus endpoint carrying the SDK's metrics and ours.

Both are off unless configured, and then cost nothing: no plugin, no span processor, no runtime
of our own.

- Traces: on when the standard `OTEL_EXPORTER_OTLP_ENDPOINT` or
  `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set (and `OTEL_SDK_DISABLED` / `OTEL_TRACES_EXPORTER=none`
  do not turn them off). The protocol follows `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` /
  `OTEL_EXPORTER_OTLP_PROTOCOL`: `http/protobuf` (the default, port 4318) or `grpc` (4317).
  Spans go through the SDK's replay-safe tracer provider and its `OpenTelemetryPlugin`, so a
  workflow replayed on another worker after a crash makes the same span ids and does not export
  twice what the first worker ended.
- Metrics: on when `AGENTLANE_METRICS_ADDRESS` (host:port) is set; Prometheus scrapes
  `http://<address>/metrics`. Names are in `agentlane/metric_names.py`.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from dataclasses import dataclass, field
from typing import Any

from temporalio.client import Interceptor as ClientInterceptor
from temporalio.plugin import SimplePlugin
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig
from temporalio.worker import Interceptor

from workers.telemetry_interceptor import TelemetryInterceptor

log = logging.getLogger("agentlane.telemetry")

SERVICE_NAME = "agentlane-worker"
# A short export delay: a worker killed with -9 loses only the spans that ended this recently
# (the batch processor's default is 5 s). Overridden by OTEL_BSP_SCHEDULE_DELAY.
DEFAULT_BATCH_DELAY_MS = "1000"
# How long a stopping worker waits for its last spans to reach the collector.
FLUSH_ON_STOP_SECONDS = 3.0


class TelemetryConfigError(ValueError):
    """A telemetry setting the worker cannot start with."""


@dataclass
class Telemetry:
    """What a process connects with, and what it must flush before exiting."""

    plugins: list[SimplePlugin] = field(default_factory=list)
    # Given to the worker's client ahead of the plugins (workers/trace_carriage.py).
    client_interceptors: list[ClientInterceptor] = field(default_factory=list)
    runtime: Runtime | None = None
    tracing: bool = False
    metrics_address: str | None = None
    _provider: object | None = None

    @property
    def interceptors(self) -> list[Interceptor]:
        """Spans and metrics around model calls, tool calls and compactions (none when both
        are off)."""
        if not self.tracing and not self.metrics_address:
            return []
        return [TelemetryInterceptor(self.tracing, bool(self.metrics_address))]

    def shutdown(self) -> None:
        """Export the spans still buffered (called on a clean stop; a kill -9 loses at most the
        last batch delay's worth). A collector that does not answer holds the stop for at most
        FLUSH_ON_STOP_SECONDS, not the exporter's own timeout and retries."""
        shutdown = getattr(self._provider, "shutdown", None)
        if not callable(shutdown):
            return

        def flush() -> None:
            try:
                shutdown()
            except Exception as err:  # noqa: BLE001 - a broken collector must not fail a stop
                log.warning("could not flush traces: %s", err)

        flusher = threading.Thread(target=flush, name="agentlane-trace-flush", daemon=True)
        flusher.start()
        flusher.join(FLUSH_ON_STOP_SECONDS)
        if flusher.is_alive():
            log.warning(
                "traces not all exported: the collector did not answer in %s s",
                FLUSH_ON_STOP_SECONDS,
            )


def _flag_off(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("true", "1", "yes")


def tracing_configured() -> bool:
    if _flag_off("OTEL_SDK_DISABLED"):
        return False
    if os.environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return False
    return bool(
        os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    )


def trace_protocol() -> str:
    return (
        os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    ).strip()


def _span_exporter() -> object:
    protocol = trace_protocol()
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter()
    if protocol in ("http/protobuf", "http"):
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
            OTLPSpanExporter as HttpSpanExporter,
        )

        return HttpSpanExporter()
    raise ValueError(
        f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r} is not supported: use grpc or http/protobuf"
    )


def _tracer_provider(service_name: str) -> object:
    import opentelemetry.trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from temporalio.contrib.opentelemetry import create_tracer_provider

    os.environ.setdefault("OTEL_BSP_SCHEDULE_DELAY", DEFAULT_BATCH_DELAY_MS)
    # OTEL_SERVICE_NAME wins over the default name; OTEL_RESOURCE_ATTRIBUTES adds to these.
    own: dict[str, str | int] = {
        "service.instance.id": f"{socket.gethostname()}:{os.getpid()}",
        "process.pid": os.getpid(),
        "host.name": socket.gethostname(),
    }
    if not os.environ.get("OTEL_SERVICE_NAME"):
        own["service.name"] = service_name
    resource = Resource.create(own)
    provider = create_tracer_provider(resource=resource)
    _keep_tracers(provider)
    provider.add_span_processor(BatchSpanProcessor(_span_exporter()))  # type: ignore[arg-type]
    opentelemetry.trace.set_tracer_provider(provider)
    return provider


# Tracers kept per provider at most; beyond, each call makes a new one as before.
MAX_KEPT_TRACERS = 64


def _keep_tracers(provider: Any) -> None:
    """The SDK's OpenTelemetry plugin asks the global provider for its tracer at every
    operation (each activity scheduled, started, each signal), and OpenTelemetry's SDK builds a
    new one each time, installing and removing a warnings filter (a regex compiled, the
    interpreter's warning caches reset): about a tenth of a millisecond a step. The same tracer
    is returned for the same name, version and schema, which the OpenTelemetry API allows; a
    call with attributes still gets a new one."""
    make = provider.get_tracer
    kept: dict[tuple[str, str | None, str | None], Any] = {}

    def get_tracer(
        instrumenting_module_name: str,
        instrumenting_library_version: str | None = None,
        schema_url: str | None = None,
        attributes: Any = None,
    ) -> Any:
        if attributes:
            return make(
                instrumenting_module_name, instrumenting_library_version, schema_url, attributes
            )
        key = (instrumenting_module_name, instrumenting_library_version, schema_url)
        tracer = kept.get(key)
        if tracer is None:
            tracer = make(*key)
            if len(kept) < MAX_KEPT_TRACERS:
                kept[key] = tracer
        return tracer

    # On the instance: it stays the SDK's `ReplaySafeTracerProvider`, which its plugin requires.
    setattr(provider, "get_tracer", get_tracer)  # noqa: B010


def setup(metrics_address: str | None, service_name: str = SERVICE_NAME) -> Telemetry:
    """Build the process's telemetry from its environment. Call once, before connecting."""
    telemetry = Telemetry(metrics_address=metrics_address or None)
    if tracing_configured():
        from temporalio.contrib.opentelemetry import OpenTelemetryPlugin

        from workers.trace_carriage import TraceCarriage

        telemetry._provider = _tracer_provider(service_name)
        telemetry.plugins.append(OpenTelemetryPlugin())
        telemetry.client_interceptors.append(TraceCarriage())
        telemetry.tracing = True
        log.info("tracing to %s over %s", _endpoint(), trace_protocol())
    if telemetry.metrics_address:
        try:
            telemetry.runtime = Runtime(
                telemetry=TelemetryConfig(
                    metrics=PrometheusConfig(bind_address=telemetry.metrics_address)
                )
            )
        except ValueError as err:
            advice = (
                "another process listens there: choose a free port"
                if "in use" in str(err).lower()
                else "give host:port, e.g. 0.0.0.0:9464"
            )
            raise TelemetryConfigError(
                f"AGENTLANE_METRICS_ADDRESS={telemetry.metrics_address!r} is not usable ({err}): "
                + advice
            ) from None
        log.info("metrics on http://%s/metrics", telemetry.metrics_address)
    return telemetry


def _endpoint() -> str:
    return (
        os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        or ""
    )
