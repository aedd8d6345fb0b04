"""The tools a long run needs, end to end with the offline model (real server, real worker):
apply_patch, binary and image reads (images stay out of workflow history), exec gone within a
second of an abort, and background processes started, polled and killed."""

from __future__ import annotations

import asyncio
import base64
import json
import stat
import time
import uuid
from pathlib import Path
from typing import Any

from agentlane.events import EventKind
from agentlane.run import ExecutionStatus
from agentlane.transcript import Role, TranscriptEntry
from clients.api import AgentlaneClient
from tests.e2e.support import assert_transcript_valid
from tests.fakes.images import tiny_png
from tests.harness import Deployment
from tests.process_groups import group_runs


async def run(client: AgentlaneClient, key: str, text: str, ws: Path) -> list[TranscriptEntry]:
    """One message, its run to the end; the tool results it wrote."""
    receipt = await client.send_and_start(key, text, workspace=str(ws))
    assert receipt.run_id
    result = await asyncio.wait_for(client.wait_for_run(receipt.run_id), 60)
    assert result.status == ExecutionStatus.SUCCESS, result.error
    entries = client.transcript(key)
    assert_transcript_valid(entries)
    return [e for e in entries if e.role == Role.TOOL and e.run_id == receipt.run_id]


PATCH = """*** Begin Patch
*** Update File: notes.txt
@@
 alpha line
-beta line
+BETA LINE
*** Add File: docs/new.md
+# New
+made by a patch
*** End Patch"""

FAILING = """*** Begin Patch
*** Update File: notes.txt
-alpha line
+ALPHA
*** Update File: other.txt
@@
-no such line
+x
*** End Patch"""


async def test_apply_patch_then_a_failing_hunk_that_changes_nothing(
    client: AgentlaneClient, session_key: str, workspace: Path
) -> None:
    (workspace / "other.txt").write_text("other\n")
    (applied,) = await run(client, session_key, f"apply this patch:\n{PATCH}", workspace)
    assert applied.tool_name == "apply_patch" and not applied.is_error, applied.text
    assert applied.text == "Applied the patch:\nM notes.txt\nA docs/new.md"
    assert (workspace / "notes.txt").read_text() == "alpha line\nBETA LINE\ngamma\n"
    assert (workspace / "docs/new.md").read_text() == "# New\nmade by a patch\n"

    (failed,) = await run(client, session_key, f"apply this patch:\n{FAILING}", workspace)
    assert failed.is_error
    assert failed.text.startswith(
        "Patch not applied, no file was changed: hunk 1 of 1 in other.txt did not apply"
    )
    # The first file's hunk matched, yet it was not changed either.
    assert (workspace / "notes.txt").read_text() == "alpha line\nBETA LINE\ngamma\n"
    assert (workspace / "other.txt").read_text() == "other\n"


async def test_binary_and_image_reads_and_images_stay_out_of_history(
    client: AgentlaneClient, session_key: str, workspace: Path
) -> None:
    (workspace / "blob.bin").write_bytes(b"\x00\x01\x02garbage\xff" * 100)
    png = tiny_png(4, 4)
    (workspace / "red.png").write_bytes(png)
    receipt = await client.send_and_start(
        session_key, "read blob.bin then read red.png then say seen", workspace=str(workspace)
    )
    assert receipt.run_id
    result = await client.wait_for_run(receipt.run_id)
    assert result.status == ExecutionStatus.SUCCESS
    binary, image = [e for e in client.transcript(session_key) if e.role == Role.TOOL]
    assert binary.text.startswith("blob.bin is a binary file (")
    assert "1100 bytes" in binary.text and "\x00" not in binary.text
    assert image.text.startswith("Image file red.png (PNG, 4x4, ")
    (stored,) = image.meta["images"]
    assert base64.b64decode(stored["data"]) == png
    # The offline model sees no images: it was told so (its final summary quotes the text).
    assert "- read: ok: Image file red.png" in result.reply
    history = await client.client.get_workflow_handle(receipt.run_id).fetch_history()
    assert stored["data"] not in history.to_json()


async def test_exec_is_gone_within_a_second_of_an_abort(
    client: AgentlaneClient, session_key: str, workspace: Path
) -> None:
    receipt = await client.send_and_start(
        session_key, "run `echo $$ > group.txt; sleep 60 & sleep 60`", workspace=str(workspace)
    )
    assert receipt.run_id
    deadline = time.monotonic() + 30
    while not (workspace / "group.txt").exists() or not (workspace / "group.txt").read_text():
        assert time.monotonic() < deadline, "the command never started"
        await asyncio.sleep(0.05)
    group = int((workspace / "group.txt").read_text())
    assert group_runs(group)
    asked = time.monotonic()
    await client.abort(session_key)
    # No member of the group runs any more (the shell and both sleeps), within a second.
    while group_runs(group):
        assert time.monotonic() - asked < 1.0, "the exec's process group outlived the abort"
        await asyncio.sleep(0.01)
    result = await client.wait_for_run(receipt.run_id)
    assert result.status == ExecutionStatus.ABORTED


async def test_a_background_process_started_polled_written_and_killed(
    client: AgentlaneClient, session_key: str, workspace: Path
) -> None:
    receipt = await client.send_and_start(
        session_key,
        "start `echo ready; read name; echo hello $name; sleep 60` in the background "
        'then poll it for 5 seconds then send "ada\n" to it then poll it for 5 seconds '
        "then kill it then list processes",
        workspace=str(workspace),
    )
    assert receipt.run_id
    watched: list[str] = []

    async def watch() -> None:
        async for item in client.watch(session_key, 0, until_run=receipt.run_id):
            if item.event.kind == EventKind.TOOL_EXECUTION_END:
                watched.append(item.event.summary or "")

    await asyncio.wait_for(watch(), 60)
    result = await client.wait_for_run(receipt.run_id)
    assert result.status == ExecutionStatus.SUCCESS
    started, polled, wrote, polled_again, killed, listed = [
        e.text for e in client.transcript(session_key) if e.role == Role.TOOL
    ]
    assert started.startswith("Started proc-1 in the background")
    assert polled == "proc-1 is running\nnew output:\nready\n"
    assert wrote.startswith("Wrote 4 characters to proc-1")
    assert polled_again == "proc-1 is running\nnew output:\nhello ada\n"
    assert killed.startswith("Killed proc-1")
    assert listed.startswith("proc-1  exited -9  echo ready")
    assert watched[0] == "started proc-1" and watched[-1] == "1 processes"


async def test_exec_output_reaches_watchers_while_it_runs(
    client: AgentlaneClient, session_key: str, workspace: Path
) -> None:
    receipt = await client.send_and_start(
        session_key, "run `echo first; sleep 2; echo second`", workspace=str(workspace)
    )
    assert receipt.run_id
    first_seen: float | None = None
    ended: float | None = None

    async def watch() -> None:
        nonlocal first_seen, ended
        async for item in client.watch(session_key, 0, until_run=receipt.run_id):
            event = item.event
            if event.kind == EventKind.TOOL_EXECUTION_UPDATE and first_seen is None:
                assert "first" in (event.text or "") and "second" not in (event.text or "")
                first_seen = time.monotonic()
            if event.kind == EventKind.TOOL_EXECUTION_END:
                ended = time.monotonic()

    await asyncio.wait_for(watch(), 60)
    assert first_seen is not None and ended is not None
    assert ended - first_seen > 1.0, "the output arrived only when the command ended"


async def test_the_demo_instruction_runs_every_step(
    client: AgentlaneClient, session_key: str, workspace: Path
) -> None:
    from clients.demo import INSTRUCTION, NOTES

    (workspace / "notes.txt").write_text(NOTES)
    results = await run(client, session_key, INSTRUCTION, workspace)
    assert [e.tool_name for e in results] == [
        "read",
        "write",
        "apply_patch",
        "exec",
        "process",
        "process",
        "sessions_spawn",
    ]
    assert not any(e.is_error for e in results), [e.text for e in results]
    assert (workspace / "summary.txt").read_text().endswith("Checked by the demo's patch.\n")
    assert "background job done" in results[-2].text
    assert "read: ok" in results[-1].text, results[-1].text


def process_record(dep: Deployment, command: str) -> tuple[dict[str, Any], Path]:
    """The record of the process running `command`, and the folder it is in."""
    for path in dep.data_dir.glob("**/processes/proc-*.json"):
        record: dict[str, Any] = json.loads(path.read_text())
        if record.get("command") == command:
            return record, path.parent
    raise AssertionError(f"no record of {command!r}")


async def test_background_processes_stop_when_the_session_is_reset_or_closed(
    client: AgentlaneClient, shared: Deployment, workspace: Path
) -> None:
    for seconds, end in ((301, "reset"), (302, "close")):
        key = f"t-{uuid.uuid4().hex[:10]}"
        command = f"echo up; sleep {seconds}"
        started = await run(
            client, key, f"start `{command}` in the background then say started", workspace
        )
        assert started[0].text.startswith("Started proc-1")
        record, folder = process_record(shared, command)
        assert group_runs(record["process_pid"])
        # Its record and output are the user's alone, like the rest of the data dir.
        modes = {f.name: stat.S_IMODE(f.stat().st_mode) for f in folder.iterdir()}
        assert set(modes.values()) == {0o600}, modes
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
        if end == "reset":
            await client.reset(key)  # returns once the reset is written
        else:
            await client.close(key)
            handle = client.client.get_workflow_handle(f"session:{key}")
            await asyncio.wait_for(handle.result(), 30)
        # Stopped with its whole group, and nothing of it is left on disk (a session reset
        # or closed has no use for its processes' records and output).
        deadline = time.monotonic() + 5
        while group_runs(record["process_pid"]) or list(folder.iterdir()):
            assert time.monotonic() < deadline, f"the process outlived the session's {end}"
            await asyncio.sleep(0.05)


async def test_a_failed_call_says_why_on_its_tool_line(
    client: AgentlaneClient, session_key: str, workspace: Path
) -> None:
    # Watchers see one line per call: a failure's reason is on it, not only in the transcript.
    receipt = await client.send_and_start(
        session_key, "poll proc-99 then say done", workspace=str(workspace)
    )
    assert receipt.run_id
    ends = []
    async for item in client.watch(session_key, 0, until_run=receipt.run_id):
        if item.event.kind == EventKind.TOOL_EXECUTION_END:
            ends.append(item.event)
    [end] = ends
    assert end.success is False and end.summary and "proc-99" in end.summary
