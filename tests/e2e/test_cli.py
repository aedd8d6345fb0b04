"""The CLI tells the truth: exit codes, unknown sessions, idle aborts, text from standard input,
and a missing worker, each as a user meets them (real CLI processes, real server)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from agentlane.run import ExecutionStatus
from clients.api import AgentlaneClient
from tests.conftest import make_deployment, settings_for
from tests.e2e.support import terminate_in_temporal, update_identities
from tests.harness import REPO, Deployment, devserver


def cli(
    dep: Deployment, *args: str, stdin: bytes | None = None
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "clients.cli", *args],
        cwd=REPO,
        env=dep.env(),
        input=stdin,
        capture_output=True,
        timeout=120,
    )
    return subprocess.CompletedProcess(
        proc.args, proc.returncode, proc.stdout.decode(), proc.stderr.decode()
    )


async def acli(
    dep: Deployment, *args: str, stdin: bytes | None = None
) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(cli, dep, *args, stdin=stdin)


async def test_send_from_stdin_runs_and_exits_0(shared: Deployment, workspace: Path) -> None:
    key = f"cli-{uuid.uuid4().hex[:8]}"
    text = "say from stdin " + "x" * 10  # a long message works the same way
    out = await acli(shared, "send", key, "-", "--workspace", str(workspace), stdin=text.encode())
    assert out.returncode == 0, out.stderr
    assert "success" in out.stderr


async def test_a_message_over_the_argument_limit_reaches_the_validator(
    shared: Deployment, tmp_path: Path
) -> None:
    big = tmp_path / "big.txt"
    big.write_text("y" * 150_000)
    out = await acli(shared, "send", f"cli-{uuid.uuid4().hex[:8]}", "--file", str(big))
    assert out.returncode == 2
    assert "150000 characters; the limit is 100000" in out.stderr


async def test_invalid_utf8_is_rejected_clearly(shared: Deployment) -> None:
    out = await acli(shared, "send", f"cli-{uuid.uuid4().hex[:8]}", "-", stdin=b"caf\xe9 \xff")
    assert out.returncode == 2
    assert "not valid UTF-8" in out.stderr


async def test_unknown_session_says_so(shared: Deployment) -> None:
    key = f"never-{uuid.uuid4().hex[:8]}"
    for command in ("status", "abort", "close", "watch", "queue", "transcript"):
        out = await acli(shared, command, key)
        assert out.returncode == 6, (command, out.stderr)
        assert f"session {key} does not exist" in out.stderr


async def test_abort_of_an_idle_session_and_queue_directive(
    shared: Deployment, workspace: Path
) -> None:
    key = f"cli-{uuid.uuid4().hex[:8]}"
    assert (
        await acli(shared, "send", key, "say hi", "--workspace", str(workspace))
    ).returncode == 0
    out = await acli(shared, "abort", key)
    assert out.returncode == 0 and "nothing to abort" in out.stdout
    out = await acli(shared, "queue", key, "followup", "debounce:2s", "cap:5", "drop:old")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "mode:followup debounce:2000ms cap:5 drop:old dedupe:message-id"
    out = await acli(shared, "queue", key, "sideways")
    assert out.returncode == 2 and "sideways" in out.stderr
    out = await acli(shared, "queue", key, "reset")
    assert out.stdout.startswith("mode:collect debounce:1000ms cap:20 drop:summarize")


async def test_failed_and_aborted_runs_have_their_exit_codes(
    shared: Deployment, workspace: Path
) -> None:
    key = f"cli-{uuid.uuid4().hex[:8]}"
    gone = workspace / "gone"
    gone.mkdir()
    assert (await acli(shared, "send", key, "say one", "--workspace", str(gone))).returncode == 0
    gone.rmdir()
    out = await acli(shared, "send", key, "say two")
    assert out.returncode == 3, out.stderr
    assert "error:" in out.stderr
    # The CLI is `agentlane-cli <user>@<host>` in the session's history (issue 25).
    from clients.api import cli_identity

    client = await AgentlaneClient.connect(settings_for(shared))
    identities = await update_identities(client, f"session:{key}")
    assert identities == {cli_identity()} and cli_identity().startswith("agentlane-cli "), (
        identities
    )


@pytest.fixture
def no_worker(server: object, tmp_path: Path) -> Deployment:
    return make_deployment(server, tmp_path)


async def test_no_worker_answers_within_5s_and_the_messages_run_later(
    no_worker: Deployment, tmp_path: Path
) -> None:
    key = f"cli-{uuid.uuid4().hex[:8]}"
    ws = tmp_path / "ws"
    ws.mkdir()
    # What the CLI's own start-up (interpreter and imports) takes here beyond a second is the
    # machine's load, not the wait: it is allowed for on top of the 5 s.
    began = time.monotonic()
    await asyncio.to_thread(
        subprocess.run, [sys.executable, "-c", "import clients.cli, clients.api"], cwd=REPO
    )
    slack = max(0.0, time.monotonic() - began - 1)
    # The second on the session the first made: its stream's offset is asked for first.
    for args in (["--no-watch"], []):
        started = time.monotonic()
        text = "say later" if args else "say again"
        out = await acli(no_worker, "send", key, text, "--workspace", str(ws), *args)
        took = time.monotonic() - started
        assert out.returncode == 5, out.stderr
        assert "durably queued" in out.stderr, out.stderr
        assert f"no worker polls task queue {no_worker.task_queue}" in out.stderr
        assert "agentlane worker" in out.stderr
        assert took < 5 + slack, f"{args}: answered after {took:.1f} s ({slack:.1f} s slack)"
    for command in (["status", key], ["queue", key, "followup"], ["abort", key]):
        started = time.monotonic()
        out = await acli(no_worker, *command)
        assert out.returncode == 5 and "no worker polls" in out.stderr, (command, out.stderr)
        assert time.monotonic() - started < 5 + slack, command
    no_worker.start_worker()
    try:
        client = await AgentlaneClient.connect(settings_for(no_worker))
        fate = await asyncio.wait_for(client.wait_started(key, 1), 60)
        assert fate.run_id
        result = await client.wait_for_run(fate.run_id)
        replies = [result.reply]
        second = await asyncio.wait_for(client.wait_started(key, 2), 60)
        if second.run_id != fate.run_id:  # not collected into the first run
            assert second.run_id
            replies.append((await client.wait_for_run(second.run_id)).reply)
        # The abort sent while no worker ran reaches the first run when the worker meets it after
        # the messages (it is held for that run, which ends aborted); met before them (the order
        # in which a worker is handed messages and an abort that all waited for it is the
        # server's), there was nothing to abort. Either way every message is answered or aborted,
        # and the one after the first runs.
        if result.status == ExecutionStatus.ABORTED:
            assert second.run_id != fate.run_id, "the abort reached the message after the first"
        else:
            assert "later" in replies[0], replies
        assert "again" in replies[-1], replies
        # Delivered once each, even if an abandoned update also reached the session.
        users = [e.text for e in client.transcript(key) if e.role.value == "user"]
        assert sum("say later" in u for u in users) == 1, users
        assert sum("say again" in u for u in users) == 1, users
    finally:
        no_worker.stop_workers()


async def test_transcript_and_argv_edges(shared: Deployment) -> None:
    key = f"never-{uuid.uuid4().hex[:8]}"
    out = await acli(shared, "transcript", key)
    assert out.returncode == 6 and "does not exist" in out.stderr
    # Invalid UTF-8 in an argument: Python hands it over as surrogates.
    proc = await asyncio.to_thread(
        subprocess.run,
        [sys.executable.encode(), b"-m", b"clients.cli", b"send", key.encode(), b"caf\xe9"],
        cwd=REPO,
        env=shared.env(),
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert b"not valid UTF-8" in proc.stderr


async def test_watch_with_no_worker_says_so(no_worker: Deployment, tmp_path: Path) -> None:
    # A session that exists (accepted with no worker), so watch has something to wait for.
    await acli(no_worker, "send", "nw-watch", "say hi", "--no-watch", "--workspace", str(tmp_path))
    try:
        await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "clients.cli", "watch", "nw-watch"],
            cwd=REPO,
            env=no_worker.env(),
            capture_output=True,
            # It says so after 5 s; the CLI's start takes seconds of its own on a busy machine.
            timeout=20,
        )
    except subprocess.TimeoutExpired as waited:
        assert b"no worker is running" in (waited.stderr or b"")
    else:
        raise AssertionError("watch returned instead of waiting")


async def test_a_paused_worker_is_busy_not_absent(no_worker: Deployment, tmp_path: Path) -> None:
    """A worker that polled moments ago but does not answer (here: stopped with SIGSTOP, as a
    worker saturated by load looks from outside) is waited for, with a message, and its answer
    is given once it goes on; nothing says "no worker"."""
    key = f"cli-{uuid.uuid4().hex[:8]}"
    ws = tmp_path / "ws"
    ws.mkdir()
    worker = no_worker.start_worker()
    try:
        out = await acli(no_worker, "send", key, "say first", "--workspace", str(ws))
        assert out.returncode == 0, out.stderr
        os.killpg(worker.pid, signal.SIGSTOP)
        try:
            commands = {
                "send": ["send", key, "say busy", "--no-watch"],
                "status": ["status", key],
            }
            procs = {
                name: await asyncio.create_subprocess_exec(
                    sys.executable,
                    "-m",
                    "clients.cli",
                    *args,
                    cwd=REPO,
                    env=no_worker.env(),
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                )
                for name, args in commands.items()
            }
            # Each says why it waits (once past its first seconds), and keeps waiting.
            for name, proc in procs.items():
                assert proc.stderr is not None
                line = (await asyncio.wait_for(proc.stderr.readline(), 40)).decode()
                assert "but is busy; waiting up to 60 s" in line, (name, line)
                assert f"task queue {no_worker.task_queue}" in line
            await asyncio.sleep(2)
            assert all(proc.returncode is None for proc in procs.values())
        finally:
            os.killpg(worker.pid, signal.SIGCONT)
        results = {}
        for name, proc in procs.items():
            stdout, stderr = await asyncio.wait_for(proc.communicate(), 60)
            results[name] = (proc.returncode, stdout.decode(), stderr.decode())
        code, _, stderr = results["send"]
        assert code == 0, stderr
        assert stderr.startswith(("started", "queued")) and "no worker" not in stderr, stderr
        code, stdout, stderr = results["status"]
        assert code == 0, stderr
        assert json.loads(stdout)["key"] == key
    finally:
        no_worker.stop_workers()


async def test_status_into_a_closed_pipe_is_not_an_unreachable_server(
    shared: Deployment, workspace: Path
) -> None:
    key = f"cli-{uuid.uuid4().hex[:8]}"
    sent = await acli(shared, "send", key, "say hi", "--workspace", str(workspace))
    assert sent.returncode == 0, sent.stderr

    def status_into_closed_pipe() -> subprocess.CompletedProcess[bytes]:
        # `agentlane status KEY | head -5` once head has gone: the reading end is closed.
        read_end, write_end = os.pipe()
        os.close(read_end)
        try:
            return subprocess.run(
                [sys.executable, "-m", "clients.cli", "status", key],
                cwd=REPO,
                env=shared.env(),
                stdout=write_end,
                stderr=subprocess.PIPE,
                timeout=120,
            )
        finally:
            os.close(write_end)

    got = await asyncio.to_thread(status_into_closed_pipe)
    assert got.returncode == 141, got.stderr  # 128 + SIGPIPE, as a shell reports it
    assert got.stderr == b""


def test_the_embedded_server_keeps_histories_as_long_as_set(tmp_path: Path) -> None:
    """`AGENTLANE_HISTORY_RETENTION` bounds the embedded server's database under sustained load:
    `server start` sets the namespace's retention (again at each start), `server status` shows
    it, and a malformed value is told at start."""
    port = devserver.free_port()
    env = {
        **os.environ,
        "AGENTLANE_DATA_DIR": str(tmp_path / "data"),
        "AGENTLANE_TEMPORAL_ADDRESS": f"127.0.0.1:{port}",
        "AGENTLANE_UI_PORT": str(devserver.free_port()),
    }

    def server(action: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "clients.cli", "server", action],
            cwd=REPO,
            env={**env, **extra},
            capture_output=True,
            text=True,
            timeout=120,
        )

    bad = server("start", AGENTLANE_HISTORY_RETENTION="6 hours")
    assert bad.returncode != 0 and "6h or 3d" in bad.stderr, bad
    try:
        started = server("start", AGENTLANE_HISTORY_RETENTION="6h")
        assert started.returncode == 0, started.stderr
        assert "histories kept 6h" in started.stdout
        status = json.loads(server("status").stdout)
        assert status["history_retention"] == "21600s", status
        again = server("start", AGENTLANE_HISTORY_RETENTION="2d")
        assert again.returncode == 0, again.stderr
        assert json.loads(server("status").stdout)["history_retention"] == "172800s"
    finally:
        server("stop")


async def test_a_broken_config_file_is_one_line_of_rejected_input(
    shared: Deployment, tmp_path: Path
) -> None:
    # A half-saved edit: the CLI says which file and where, exit 2, no exception class name.
    broken = tmp_path / "config.toml"
    broken.write_text("this is = not toml [\n")
    proc = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "clients.cli", "send", f"cfg-{uuid.uuid4().hex[:6]}", "say hi"],
        cwd=REPO,
        env={**shared.env(), "AGENTLANE_CONFIG": str(broken)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert str(broken) in proc.stderr and "agentlane config check" in proc.stderr
    assert "ConfigError" not in proc.stderr


async def test_send_follows_its_message_into_the_next_run_when_an_operator_terminates_its_run(
    shared: Deployment, workspace: Path
) -> None:
    """Terminated in Temporal, a run has no result; its session runs the message again. `send`
    says so and follows it to that run's answer (it ended with the SDK's bare
    WorkflowFailureError, exit 1, though the message was answered)."""
    from agentlane.ids import run_workflow_id
    from tests.e2e.test_control import wait_turn

    key = f"cli-{uuid.uuid4().hex[:8]}"
    sending = asyncio.create_task(
        acli(shared, "send", key, "run `sleep 30` then say finally", "--workspace", str(workspace))
    )
    client = await AgentlaneClient.connect(settings_for(shared))
    first = run_workflow_id(key, 1)
    for _ in range(100):
        if await client.session_exists(key):
            break
        await asyncio.sleep(0.1)
    await wait_turn(client, key, first, 0)
    await asyncio.sleep(0.5)
    await terminate_in_temporal(shared.address, first)
    out = await asyncio.wait_for(sending, 120)
    assert out.returncode == 0, out.stderr
    assert f"run {first} was terminated in Temporal: operator" in out.stderr, out.stderr
    assert f"; the message runs again in {run_workflow_id(key, 2)}" in out.stderr, out.stderr
    assert "finally" in out.stdout + out.stderr
    assert "WorkflowFailureError" not in out.stderr
    ended = await client.wait_for_run(first)
    assert ended.status == ExecutionStatus.ERROR and ended.error is not None
    assert ended.error.message.startswith(f"run {first} was terminated in Temporal: operator")


async def test_message_input_edges_are_refused_clearly(
    shared: Deployment, workspace: Path, tmp_path: Path
) -> None:
    key = f"cli-{uuid.uuid4().hex[:8]}"
    bom = tmp_path / "bom.txt"
    bom.write_bytes(b"\xef\xbb\xbfsay with a bom")
    both = await acli(shared, "send", key, "some text", "--file", str(bom))
    assert both.returncode == 2 and "as text or with --file, not both" in both.stderr
    endless = await acli(shared, "send", key, "--file", "/dev/zero")
    assert endless.returncode == 2, endless.stderr
    assert "longer than 100000 characters" in endless.stderr
    negative = await acli(shared, "watch", key, "--from", "-5")
    assert negative.returncode == 2 and "before the stream's first event" in negative.stderr
    # A byte-order mark is not part of the message: the model reads "say with a bom".
    sent = await acli(shared, "send", key, "--file", str(bom), "--workspace", str(workspace))
    assert sent.returncode == 0, sent.stderr
    assert "with a bom" in sent.stdout and "\ufeff" not in sent.stdout
    # Past the stream's end: refused with the offset to use (it waited in silence for ever).
    past = await acli(shared, "watch", key, "--from", "99999")
    assert past.returncode == 2 and "past the end of the session's event stream" in past.stderr
    # A sub-agent's key takes no messages: not from a schedule, not as a branch.
    sub = "agent:main:subagent:0123456789abcdef"
    schedule = await acli(
        shared,
        "schedule",
        "create",
        f"s-{key}",
        "--session",
        sub,
        "--message",
        "x",
        "--every",
        "1h",
    )
    assert schedule.returncode == 2 and "is a sub-agent's session" in schedule.stderr
    client = await AgentlaneClient.connect(settings_for(shared))
    entry = client.transcript(key)[0].id
    branch = await acli(shared, "branch", key, "--from", entry, "--to", sub)
    assert branch.returncode == 2 and "form of a sub-agent's key" in branch.stderr, branch.stderr


async def test_a_send_meeting_no_worker_leaves_no_unretrieved_future(no_worker: Deployment) -> None:
    """`NoWorker` is a documented outcome an adapter handles: each such send used to leave a
    "Future exception was never retrieved" traceback at garbage collection."""
    import gc

    from clients.api import NoWorker

    complaints: list[str] = []
    loop = asyncio.get_running_loop()
    before = loop.get_exception_handler()
    loop.set_exception_handler(lambda _, context: complaints.append(str(context.get("message"))))
    try:
        client = await AgentlaneClient.connect(settings_for(no_worker))
        for n in range(2):
            with pytest.raises(NoWorker):
                await client.send(f"nw-{uuid.uuid4().hex[:6]}", f"say {n}", worker_wait=1)
        gc.collect()
        await asyncio.sleep(0.1)
        gc.collect()
    finally:
        loop.set_exception_handler(before)
    assert not [c for c in complaints if "never retrieved" in c], complaints


async def test_send_of_a_message_the_queue_drops_exits_8_and_says_so_once(
    shared: Deployment, client: AgentlaneClient, workspace: Path
) -> None:
    """Review O F5: a dropped message exited 0 ("success"), saying "dropped: dropped: ..."."""
    key = f"cli-drop-{uuid.uuid4().hex[:8]}"
    # Busy until the test ends it: a CLI that starts slowly on a loaded machine still finds it.
    busy = await client.send_and_start(key, "run `sleep 60`", workspace=str(workspace))
    assert busy.run_id
    await client.configure_queue(key, "followup cap:1 drop:summarize debounce:0")
    first = asyncio.create_task(acli(shared, "send", key, "say one"))
    for _ in range(100):  # "say one" is queued before "say two" pushes it out
        if (await client.status(key)).queue_length:
            break
        await asyncio.sleep(0.1)
    await client.send(key, "say two")
    out = await first
    assert out.returncode == 8, (out.returncode, out.stderr)
    assert "dropped: the queue was full" in out.stderr and "dropped: dropped:" not in out.stderr
    await client.abort(key, "done")
