"""The gateway app without a Temporal server: what it refuses before any call reaches one."""

from __future__ import annotations

import importlib.util
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from agentlane.settings import Settings
from clients.gateway.app import create_app
from clients.gateway.auth import TokenStore


def http_for(tmp_path: Path, token: str | None = None, **settings: object) -> httpx.AsyncClient:
    # An address nothing listens on: any route that reached Temporal would fail with 503.
    base = Settings(data_dir=tmp_path, temporal_address="127.0.0.1:9")
    app = create_app(base.model_copy(update=settings))
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://gw", headers=headers
    )


async def test_refusals_before_temporal(tmp_path: Path) -> None:
    token = TokenStore(tmp_path).create()[1]
    async with http_for(tmp_path) as anon:
        assert (await anon.get("/healthz")).status_code == 200
        r = await anon.post("/v1/sessions/a/messages", json={"text": "hi"})
        assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer")
        assert r.headers["content-type"] == "application/problem+json"
    async with http_for(tmp_path, token, gateway_max_body_bytes=100) as http:
        r = await http.post("/v1/sessions/a/messages", json={"text": "x" * 200})
        assert r.status_code == 413 and r.json()["title"] == "Content Too Large"

        async def body() -> AsyncIterator[bytes]:
            for part in (b"{", b"x" * 200, b"}"):
                yield part

        chunked = await http.post("/v1/sessions/a/messages", content=body())
        assert chunked.status_code == 413
        r = await http.get("/v1/sessions/a/events?vocabulary=klingon")
        assert r.status_code == 422 and "vocabulary" in r.json()["detail"]
        assert (await http.get("/v1/sessions/a:run/events")).status_code == 400
        nowhere = await http.get("/v1/nowhere")
        assert nowhere.status_code == 404 and nowhere.json()["status"] == 404
        down = await http.get("/v1/sessions/a")
        assert down.status_code == 503 and "Temporal" in down.json()["title"]


@pytest.mark.skipif(
    importlib.util.find_spec("clients.gateway.agui") is not None,
    reason="the AG-UI vocabulary is there",
)
async def test_agui_vocabulary_is_501_until_its_module_exists(tmp_path: Path) -> None:
    token = TokenStore(tmp_path).create()[1]
    async with http_for(tmp_path, token) as http:
        r = await http.get("/v1/sessions/a/events?vocabulary=agui")
    assert r.status_code == 501 and "agui" in r.json()["detail"]


async def test_a_chat_adapter_cannot_claim_to_be_cron(tmp_path: Path) -> None:
    token = TokenStore(tmp_path).create()[1]
    async with http_for(tmp_path, token) as http:
        r = await http.post("/v1/sessions/a/messages", json={"text": "hi", "source": "cron"})
        assert r.status_code == 422 and "source: not accepted" in r.json()["detail"]
