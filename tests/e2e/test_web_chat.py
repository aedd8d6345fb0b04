"""The web chat page, in a real browser (Debian's Chromium driven by Playwright), against the
real gateway app (uvicorn in a thread), a real dev server and a worker, with the offline model:
enter a token, create a session, watch a tool call and the streamed reply, abort a long reply.
A screenshot of the page goes to the test's temporary folder, or to docs/web-chat.png (the README's)
with AGENTLANE_UPDATE_SCREENSHOT=1, so a test run leaves the repository as it was.

Skipped, saying why, when the gateway app (clients/gateway/app.py) or Chromium is missing
(`./dev test` installs Chromium where it can)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentlane.ids import storage_name
from tests.conftest import settings_for
from tests.harness import REPO, Deployment, devserver

CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOT = REPO / "docs" / "web-chat.png"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _missing() -> str | None:
    """Why the test cannot run here, if it cannot."""
    if importlib.util.find_spec("clients.gateway.app") is None:
        return "the gateway app (clients/gateway/app.py) is not in this checkout yet"
    if not CHROMIUM.exists():
        return f"no Chromium at {CHROMIUM}: `apt-get install chromium` (./dev test does, as root)"
    if importlib.util.find_spec("playwright") is None:
        return "playwright is not installed (pip install -e '.[test]')"
    return None


# Decided at collection, before the dev server and the worker are started for nothing.
pytestmark = pytest.mark.skipif(_missing() is not None, reason=_missing() or "")


@pytest.fixture
def gateway(shared: Deployment) -> Iterator[tuple[str, str]]:
    """The real gateway app on a free port: (its base URL, a bearer token for it)."""
    import uvicorn

    from clients.gateway import app as gateway_app
    from clients.gateway import auth as gateway_auth

    settings = settings_for(shared)
    _, token = gateway_auth.TokenStore(settings.data_dir).create("web-chat-test")
    port = devserver.free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            gateway_app.create_app(settings), host="127.0.0.1", port=port, log_level="warning"
        )
    )
    thread = threading.Thread(target=server.run, name="gateway", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the gateway did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}", token
    finally:
        server.should_exit = True
        thread.join(15)


def test_web_chat_streams_a_tool_call_and_aborts_a_long_reply(
    gateway: tuple[str, str], shared: Deployment, tmp_path: Path
) -> None:
    from playwright.sync_api import expect, sync_playwright

    base, token = gateway
    tmp_shot = tmp_path / "web-chat.png"
    key = f"web-{uuid.uuid4().hex[:8]}"
    # The session's workspace (created by its first message) with a file for the model to read.
    workspace = settings_for(shared).workspaces_dir / storage_name(key)
    workspace.mkdir(parents=True)
    (workspace / "notes.txt").write_text("alpha line\nbeta line\ngamma\n")

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 760})
            errors: list[Any] = []
            page.on("pageerror", lambda err: errors.append(err))
            page.goto(base + "/")
            expect(page).to_have_title("agentlane chat")

            page.fill("#token", token)
            page.click("#token-form button")
            page.fill("#session-key", key)
            page.click("#session-form button")
            log = page.locator("#log")
            expect(log).to_contain_text(f"{key} is a new session")

            # A message that makes the offline model call a tool, then answer.
            page.fill("#text", "read notes.txt then say done reading")
            page.click("#send")
            expect(page.locator(".msg.user").first).to_have_text(
                "read notes.txt then say done reading"
            )
            tool = page.locator(".tool").first
            expect(tool.locator(".call")).to_have_text("⚙ read notes.txt", timeout=30_000)
            expect(tool.locator(".result.ok")).to_contain_text("✓")
            expect(log).to_contain_text("ended: no_tool_calls", timeout=30_000)
            replies = page.locator(".msg.assistant")
            assert "done reading" in replies.last.inner_text()
            # Every reply's text appears once: no retried or re-published text shown twice.
            for reply in replies.all():
                text = reply.inner_text()
                assert text.count("done reading") <= 1, text
            expect(page.locator("#status")).to_contain_text("idle", timeout=10_000)

            # A long reply, streamed, then aborted from the page.
            page.select_option("#mode", "followup")
            page.fill("#text", "count slowly to 200")
            page.click("#send")
            counting = page.locator(".msg.assistant").last
            expect(counting).to_contain_text("1 2 3 4 5", timeout=30_000)
            # The connection drops (as the network would drop it): the page resumes with
            # Last-Event-ID; the count below shows nothing was lost or doubled.
            with page.expect_request(lambda r: "/events" in r.url, timeout=15_000) as again:
                page.evaluate("window.agentlaneChat.dropConnection()")
            assert again.value.headers.get("last-event-id", "").isdigit(), again.value.headers
            assert "from=" not in again.value.url
            expect(page.locator("#conn")).to_have_text("● live", timeout=15_000)
            expect(counting).to_contain_text(" 30 ", timeout=30_000)  # it streams on
            expect(page.locator("#abort")).to_be_enabled(timeout=10_000)
            page.click("#abort")
            expect(log).to_contain_text("ended: abort_signal", timeout=30_000)
            numbers = [int(n) for n in re.findall(r"\d+", counting.inner_text())]
            # In order, none twice, and stopped well before 200.
            assert numbers == list(range(1, len(numbers) + 1)), numbers
            assert 5 <= len(numbers) < 200
            expect(page.locator("#status")).to_contain_text("idle", timeout=10_000)
            expect(page.locator("#abort")).to_be_disabled()
            assert not errors, errors

            SCREENSHOT.parent.mkdir(exist_ok=True)
            shot = SCREENSHOT if os.environ.get("AGENTLANE_UPDATE_SCREENSHOT") else tmp_shot
            page.screenshot(path=str(shot))
        finally:
            browser.close()
    check_agui_replay(base, token, key)
    shutil.rmtree(workspace, ignore_errors=True)


def check_agui_replay(base: str, token: str, key: str) -> None:
    """The same session in the AG-UI vocabulary: valid events in a valid order, each reply's
    text once."""
    from tests.unit.test_agui import check_order, validate, visible_text

    events: list[dict[str, Any]] = []
    url = f"{base}/v1/sessions/{key}/events?from=0&vocabulary=agui"
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.stream("GET", url, headers=headers, timeout=30) as resp:
        assert resp.status_code == 200, resp.read()
        for line in resp.iter_lines():
            if line.startswith("data:"):
                events.append(json.loads(line.removeprefix("data:").strip()))
            finished = [e for e in events if e["type"] in ("RUN_FINISHED", "RUN_ERROR")]
            if len(finished) == 2:
                break
    validate(events)
    check_order(events)
    assert [e["outcome"]["type"] for e in events if e["type"] == "RUN_FINISHED"] == [
        "success",
        "cancelled",
    ]
    assert [e["toolCallName"] for e in events if e["type"] == "TOOL_CALL_START"] == ["read"]
    texts = visible_text(events, honour_resets=True)
    assert sum(t.count("done reading") for t in texts.values()) == 1, texts
