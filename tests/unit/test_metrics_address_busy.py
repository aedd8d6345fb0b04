"""A metrics address another process holds is said to be busy, not malformed."""

from __future__ import annotations

import socket

import pytest

from workers.telemetry import TelemetryConfigError, setup


def test_a_busy_metrics_port_is_said_to_be_busy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(TelemetryConfigError) as err:
            setup(f"127.0.0.1:{port}")
    assert "another process listens there: choose a free port" in str(err.value)
    assert "give host:port" not in str(err.value)
