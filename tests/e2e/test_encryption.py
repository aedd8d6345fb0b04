"""Encryption end to end: with it on, `temporal workflow show` shows ciphertext; through the
codec server it shows the conversation; a rotated key still decrypts the old history; a bad key
file stops the worker with a clear message."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentlane.encryption import new_key_line
from agentlane.encryption_required import EncryptionRequired
from clients.api import AgentlaneClient
from tests.conftest import make_deployment, settings_for
from tests.harness import REPO, Deployment, devserver

SECRET = "zebra-umbrella-42"


@pytest.fixture
def encrypted(server: object, tmp_path: Path) -> Iterator[Deployment]:
    keys = tmp_path / "keys"
    keys.write_text(new_key_line("k1") + "\n")
    keys.chmod(0o600)
    dep = make_deployment(server, tmp_path / "data", AGENTLANE_ENCRYPTION_KEYS_FILE=str(keys))
    dep.data_dir.mkdir()
    dep.start_worker()
    yield dep
    dep.stop_workers()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def show(dep: Deployment, workflow_id: str, codec: str | None = None) -> str:
    cmd = [
        devserver.temporal_binary(),
        "workflow",
        "show",
        "--address",
        dep.address,
        "--workflow-id",
        workflow_id,
        "--output",
        "json",
    ]
    if codec:
        cmd += ["--codec-endpoint", codec]
    return subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=60).stdout


def texts(history_json: str) -> str:
    """Everything readable in a history: its JSON and every payload's data, base64-decoded
    (`temporal workflow show` prints payload data as base64)."""
    found: list[str] = [history_json]

    def walk(node: object) -> None:
        if isinstance(node, dict):
            for name, value in node.items():
                if name == "data" and isinstance(value, str):
                    try:
                        found.append(base64.b64decode(value).decode("utf-8", "replace"))
                    except ValueError:
                        pass
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(json.loads(history_json))
    return "\n".join(found)


def start_codec_server(dep: Deployment, port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "clients.cli", "codec-server", "--port", str(port)],
        cwd=REPO,
        env=dep.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return proc
        time.sleep(0.1)
    proc.kill()
    raise AssertionError("codec server did not start")


async def test_histories_are_ciphertext_without_the_codec_server(encrypted: Deployment) -> None:
    client = await AgentlaneClient.connect(settings_for(encrypted))
    key = "enc-a"
    ws = encrypted.data_dir / "ws"
    ws.mkdir()
    receipt = await client.send_and_start(key, f"say {SECRET}", workspace=str(ws))
    assert receipt.run_id
    assert (await client.wait_for_run(receipt.run_id)).reply == SECRET
    for wid in (f"session:{key}", receipt.run_id):
        assert SECRET not in texts(await asyncio.to_thread(show, encrypted, wid))
    port = free_port()
    codec = await asyncio.to_thread(start_codec_server, encrypted, port)
    try:
        clear = await asyncio.to_thread(
            show, encrypted, f"session:{key}", f"http://127.0.0.1:{port}"
        )
        assert SECRET in texts(clear)
    finally:
        codec.kill()
        codec.wait()
    # Rotation: a new current key in front, the old one kept; the old history still decodes.
    keys = Path(encrypted.extra_env["AGENTLANE_ENCRYPTION_KEYS_FILE"])
    keys.write_text(new_key_line("k2") + "\n" + keys.read_text())
    port = free_port()
    codec = await asyncio.to_thread(start_codec_server, encrypted, port)
    try:
        clear = await asyncio.to_thread(show, encrypted, receipt.run_id, f"http://127.0.0.1:{port}")
        assert SECRET in texts(clear)
    finally:
        codec.kill()
        codec.wait()


async def test_a_client_without_the_keys_sends_nothing_in_clear(encrypted: Deployment) -> None:
    """Review T F-j: a CLI or gateway started without the keys sent the message anyway: it ran,
    and its text sat in Temporal's history in clear beside the encrypted payloads, while the
    sender was told it had failed. The worker marks the deployment encrypted; a keyless client
    sends nothing."""
    keyless = settings_for(encrypted).model_copy(update={"encryption_keys_file": None})
    env = {k: v for k, v in encrypted.env().items() if k != "AGENTLANE_ENCRYPTION_KEYS_FILE"}
    client = await AgentlaneClient.connect(keyless)
    with pytest.raises(EncryptionRequired, match="nothing was sent"):
        await client.send("enc-keyless", f"say {SECRET}", workspace=str(encrypted.data_dir))
    assert not await client.session_ever_existed("enc-keyless")
    cli = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "clients.cli", "send", "enc-keyless", f"say {SECRET}"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert cli.returncode == 1 and "nothing was sent" in cli.stderr, cli.stderr
    assert "Traceback" not in cli.stderr
    assert not await client.session_ever_existed("enc-keyless")


def test_a_bad_key_file_stops_the_worker_clearly(server: object, tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.write_text("k1 AAAA\n")
    keys.chmod(0o600)
    dep = make_deployment(server, tmp_path, AGENTLANE_ENCRYPTION_KEYS_FILE=str(keys))
    with pytest.raises(RuntimeError, match="AES-256 needs 32"):
        dep.start_worker(wait_ready=20)
    assert os.path.exists(keys)


async def test_a_failing_webhook_says_why_with_encryption_on(
    server: object, tmp_path: Path
) -> None:
    """`status` reads the delivery's last failure from Temporal, where encryption keeps its words
    in the encoded attributes: the client decodes it ("HTTP 500", not "Encoded failure")."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from threading import Thread

    from agentlane.messages import Routing

    class Failing(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            self.send_response(500)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    receiver = ThreadingHTTPServer(("127.0.0.1", 0), Failing)
    Thread(target=receiver.serve_forever, daemon=True).start()
    keys = tmp_path / "keys"
    keys.write_text(new_key_line("k1") + "\n")
    keys.chmod(0o600)
    dep = make_deployment(server, tmp_path / "data", AGENTLANE_ENCRYPTION_KEYS_FILE=str(keys))
    dep.data_dir.mkdir()
    (dep.data_dir / "config.toml").write_text("[webhooks]\nallow_private = true\n")
    dep.start_worker()
    try:
        client = await AgentlaneClient.connect(settings_for(dep))
        url = f"http://127.0.0.1:{receiver.server_address[1]}/hook"
        receipt = await client.send_and_start(
            "wh-enc", "say hello", routing=Routing(callback_url=url)
        )
        assert receipt.run_id
        await client.wait_for_run(receipt.run_id)
        last = ""
        for _ in range(100):
            hook = (await client.status("wh-enc")).webhook
            if hook is not None and hook.last_error:
                last = hook.last_error
                break
            await asyncio.sleep(0.2)
        assert "HTTP 500" in last, last
        assert "Encoded failure" not in last
    finally:
        dep.stop_workers()
        receiver.shutdown()
        receiver.server_close()
