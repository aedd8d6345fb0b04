"""The end-to-end demo: dev server + worker + one agent session streamed to the terminal."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

from agentlane.ids import session_workflow_id
from agentlane.private_files import make_private_dir, private_open, write_private
from agentlane.settings import Settings

NOTES = """Meeting notes, 21 November
- Ship the durable agent runner this week.
- Every run must survive a worker crash.
- Watch runs live in the Temporal UI.
"""

INSTRUCTION = (
    "summarize notes.txt into summary.txt then apply this patch:\n"
    "*** Begin Patch\n*** Update File: summary.txt\n@@\n+Checked by the demo's patch.\n"
    "*** End Patch\n"
    "then run `wc -w notes.txt summary.txt` then "
    "start `sleep 1; echo background job done` in the background then poll it for 5 seconds "
    "then spawn a sub-agent to `read summary.txt` "
    "then say The demo is complete, the summary is in summary.txt"
)


def _start_worker(settings: Settings, log: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    # Stream slowly enough to watch; the offline model is otherwise instant.
    env.setdefault("AGENTLANE_OFFLINE_TOKEN_MS", "25")
    env["AGENTLANE_DATA_DIR"] = str(settings.data_dir)
    with private_open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "workers.main"],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )


def _wait_ready(worker: subprocess.Popen[bytes], log: Path, seen: int, limit: float = 30) -> None:
    """Until the worker says it is ready (its log, after what earlier runs wrote)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and worker.poll() is None:
        with open(log, "rb") as fh:
            fh.seek(seen)
            if b" ready" in fh.read():
                return
        time.sleep(0.05)


def _gateway_answers(settings: Settings) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(f"{settings.gateway_address}/healthz", timeout=0.5) as r:
            return bool(r.status == 200)
    except OSError:
        return False


def _start_gateway(settings: Settings, log: Path) -> subprocess.Popen[bytes] | None:
    """The HTTP gateway for chat adapters, unless one already answers on its port."""
    if _gateway_answers(settings):
        return None
    env = dict(os.environ)
    env["AGENTLANE_DATA_DIR"] = str(settings.data_dir)
    with private_open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "clients.cli", "gateway"],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )


def _stop(proc: subprocess.Popen[bytes] | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()


async def _run_session(settings: Settings, session: str, workspace: Path) -> int:
    from clients.api import AgentlaneClient
    from clients.render import TerminalRenderer

    client = await AgentlaneClient.connect_cli(settings)
    offset = 0
    if await client.session_exists(session):
        offset = await client.events_offset(session)
    receipt = await client.send_and_start(session, INSTRUCTION, workspace=str(workspace))
    print(f"you › {INSTRUCTION}\n")
    renderer = TerminalRenderer()
    async for item in client.watch(session, offset, until_run=receipt.run_id):
        renderer.render(item.event)
    result = await client.wait_for_run(receipt.run_id or "")
    print(
        f"\nrun finished: {result.status.value} ({result.termination_reason.value}), "
        f"{result.turns} turns, {result.tool_calls} tool calls, {result.duration_ms} ms"
    )
    print(f"summary.txt now says: {(workspace / 'summary.txt').read_text().strip()}")
    return 0 if result.status.value == "success" else 1


def run_demo(session: str = "demo", serve: bool = False) -> int:
    from clients.cli import load_devserver, ui_link

    settings = Settings.from_env()
    devserver = load_devserver()
    server = devserver.from_env(str(settings.data_dir))
    started_here = not server.running()
    print(
        f"• Temporal dev server: {'starting' if started_here else 'already running'} "
        f"({server.address}, SQLite at {server.data_dir / server.db_name})"
    )
    server.start()
    workspace = settings.workspaces_dir / "demo"
    # Owner-only, as every default workspace (and one an earlier demo made open is closed):
    # the folder names of `workspaces/` are session keys.
    make_private_dir(workspace)
    for folder in (settings.workspaces_dir, workspace):
        folder.chmod(0o700)
    write_private(workspace / "notes.txt", NOTES.encode())
    log = settings.data_dir / "worker.log"
    seen = log.stat().st_size if log.exists() else 0
    worker = _start_worker(settings, log)
    print(f"• worker started (pid {worker.pid}, log {log})")
    # The gateway starts once the worker polls, so the two do not compete for the CPU at start.
    _wait_ready(worker, log, seen)
    gateway_log = settings.data_dir / "gateway.log"
    gateway = _start_gateway(settings, gateway_log)
    print(
        f"• gateway: {settings.gateway_address} "
        + (f"(pid {gateway.pid}, log {gateway_log})" if gateway else "(already running)")
    )
    print("• model: built-in offline model (a deterministic stand-in, not a language model)\n")
    try:
        code = asyncio.run(_run_session(settings, session, workspace))
        print("\nWatch it in the Temporal UI:")
        print(f"  session: {ui_link(settings, session_workflow_id(session))}")
        print(
            f"  runs:    http://localhost:{server.ui_port}/namespaces/{settings.namespace}/workflows"
        )
        if gateway is not None and gateway.poll() is not None:
            print(f"The gateway did not start (port taken?); see {gateway_log}")
        else:
            print(f"Talk to it over HTTP: the gateway at {settings.gateway_address}")
            print(f"  web chat:      {settings.gateway_address}/")
            print(f"  API reference: {settings.gateway_address}/openapi.json")
            print("  a token:       .venv/bin/agentlane gateway token create --name me")
        if serve:
            print("Worker and gateway keep running; Ctrl-C stops them.")
            try:
                while worker.poll() is None:
                    time.sleep(1.0)
            except KeyboardInterrupt:
                pass
        elif gateway is not None:
            print("  (they stop with the demo; `agentlane demo --serve` keeps them running)")
    finally:
        _stop(worker)
        _stop(gateway)
    print("The dev server keeps running for the UI; stop it with: .venv/bin/agentlane server stop")
    return code
