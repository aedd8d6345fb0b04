"""When tracing and metrics are on, and what a worker then connects with (workers/telemetry.py);
the trace links workflow code makes (workflows/telemetry.py)."""

from __future__ import annotations

import pytest

from workers import telemetry
from workflows.telemetry import link_to

OTEL_VARS = (
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    "OTEL_SDK_DISABLED",
    "OTEL_TRACES_EXPORTER",
)


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in OTEL_VARS:
        monkeypatch.delenv(name, raising=False)


def test_off_without_an_endpoint_and_free() -> None:
    assert not telemetry.tracing_configured()
    got = telemetry.setup(metrics_address=None)
    assert got.plugins == [] and got.runtime is None and got.interceptors == []
    assert not got.tracing


@pytest.mark.parametrize(
    "name", ["OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]
)
def test_on_with_either_endpoint(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setenv(name, "http://127.0.0.1:4318")
    assert telemetry.tracing_configured()


@pytest.mark.parametrize(
    ("var", "value"), [("OTEL_SDK_DISABLED", "true"), ("OTEL_TRACES_EXPORTER", "none")]
)
def test_the_standard_switches_turn_it_off(
    monkeypatch: pytest.MonkeyPatch, var: str, value: str
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
    monkeypatch.setenv(var, value)
    assert not telemetry.tracing_configured()


def test_protocol_defaults_to_http_and_the_traces_variable_wins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert telemetry.trace_protocol() == "http/protobuf"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    assert telemetry.trace_protocol() == "grpc"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf")
    assert telemetry.trace_protocol() == "http/protobuf"


def test_an_unknown_protocol_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "carrier-pigeon")
    with pytest.raises(ValueError, match="grpc or http/protobuf"):
        telemetry._span_exporter()


def test_links_come_only_from_valid_traceparents() -> None:
    trace_id, span_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    link = link_to(f"00-{trace_id}-{span_id}-01")
    assert link is not None
    assert f"{link.context.trace_id:032x}" == trace_id
    assert f"{link.context.span_id:016x}" == span_id
    for bad in (None, "", "garbage", f"00-{'0' * 32}-{span_id}-01"):
        assert link_to(bad) is None


def test_a_bad_metrics_address_is_a_clear_error() -> None:
    with pytest.raises(telemetry.TelemetryConfigError, match="AGENTLANE_METRICS_ADDRESS"):
        telemetry.setup(metrics_address="nonsense")


def test_the_provider_keeps_its_tracers_and_stays_replay_safe() -> None:
    """The SDK plugin asks for its tracer at every operation: the same one comes back, without
    OpenTelemetry's per-call warnings filter; the plugin still finds a replay-safe provider."""
    import warnings

    from temporalio.contrib.opentelemetry import ReplaySafeTracerProvider, create_tracer_provider

    from workers.telemetry import MAX_KEPT_TRACERS, _keep_tracers

    provider = create_tracer_provider()
    _keep_tracers(provider)
    assert isinstance(provider, ReplaySafeTracerProvider)
    first = provider.get_tracer("temporalio.contrib.opentelemetry")
    filters = list(warnings.filters)
    assert provider.get_tracer("temporalio.contrib.opentelemetry") is first
    assert warnings.filters == filters
    assert provider.get_tracer("other", "1.0") is not first
    assert provider.get_tracer("other", "1.0") is provider.get_tracer("other", "1.0")
    # Attributes make a tracer of their own, every time, as before.
    with_attributes = provider.get_tracer("x", attributes={"a": 1})
    assert with_attributes is not provider.get_tracer("x", attributes={"a": 1})
    # Bounded: names beyond the limit are made anew each time.
    for i in range(MAX_KEPT_TRACERS + 5):
        provider.get_tracer(f"module-{i}")
    assert provider.get_tracer("module-last") is not provider.get_tracer("module-last")
    span = first.start_span("works")
    span.end()
