"""The codec server answers the Temporal UI where `agentlane server start` put it: the UI's port
(AGENTLANE_UI_PORT) by either host name, one origin per answer as CORS requires."""

from __future__ import annotations

import http.client
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer

import pytest
from temporalio.converter import DataConverter

from clients.codec_server import make_handler


@pytest.fixture
def port() -> Iterator[int]:
    origins = ["http://localhost:48333", "http://127.0.0.1:48333"]
    server = ThreadingHTTPServer(
        ("127.0.0.1", 0), make_handler(DataConverter.default, origins, None)
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def allowed_origin(port: int, origin: str) -> str | None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    conn.request("OPTIONS", "/decode", headers={"Origin": origin})
    answer = conn.getresponse()
    answer.read()
    conn.close()
    return answer.getheader("Access-Control-Allow-Origin")


def test_either_name_of_the_ui_is_allowed(port: int) -> None:
    assert allowed_origin(port, "http://127.0.0.1:48333") == "http://127.0.0.1:48333"
    assert allowed_origin(port, "http://localhost:48333") == "http://localhost:48333"


def test_another_origin_is_not_echoed(port: int) -> None:
    assert allowed_origin(port, "http://evil.example") == "http://localhost:48333"


def test_the_default_follows_the_ui_port(monkeypatch: pytest.MonkeyPatch) -> None:
    import clients.cli as cli

    seen: list[list[str]] = []
    monkeypatch.setattr("clients.codec_server.serve", lambda h, p, o: seen.append(o))
    monkeypatch.setenv("AGENTLANE_UI_PORT", "48333")
    args = cli.build_parser().parse_args(["codec-server"])
    assert args.func(args) == 0
    assert seen == [["http://localhost:48333", "http://127.0.0.1:48333"]]
