"""The README's Python client snippet, run as written (taken from README.md, so the test follows
the README): on a new session, on the same session again, and for a redelivered message id, it
returns with the run that took the message."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
import uuid
from typing import Any

from tests.harness import REPO, Deployment

SNIPPET_KEY = "slack:T1:C42"
SNIPPET_MESSAGE_ID = "1700000000.000100"


def readme_snippet() -> str:
    readme = (REPO / "README.md").read_text()
    for block in re.findall(r"```python\n(.*?)```", readme, flags=re.S):
        if "client.events_offset(" in block and "client.watch(" in block:
            return str(block)
    raise AssertionError("README.md has no Python client snippet with events_offset and watch")


def run_snippet(dep: Deployment, key: str, message_id: str) -> dict[str, Any]:
    body = readme_snippet().replace(SNIPPET_KEY, key).replace(SNIPPET_MESSAGE_ID, message_id)
    script = (
        "import asyncio, json\n"
        "posted, previews = [], []\n"
        "def post_to_slack(text): posted.append(text)\n"
        "def update_typing_preview(text): previews.append(text)\n"
        "async def main():\n"
        + textwrap.indent(body, "    ")
        + "    print(json.dumps({'offset': offset, 'disposition': receipt.disposition.value,"
        " 'fate': fate.model_dump(mode='json'), 'posted': posted}))\n"
        "asyncio.run(main())\n"
        # As the CLI does: the SDK's runtime can crash at interpreter exit (sdk-python#300).
        "import os, sys; sys.stdout.flush(); os._exit(0)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        env=dep.env(),
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert proc.returncode == 0, proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


async def test_the_readme_snippet_works_new_existing_and_redelivered(shared: Deployment) -> None:
    import asyncio

    key = f"slack:T1:readme-{uuid.uuid4().hex[:8]}"
    first = await asyncio.to_thread(run_snippet, shared, key, "100.1")
    assert first["offset"] == 0  # a new session: its stream does not exist yet
    assert first["disposition"] == "started"
    assert first["fate"]["state"] == "started" and first["fate"]["run_id"]
    assert first["posted"], first

    again = await asyncio.to_thread(run_snippet, shared, key, "100.1")  # a redelivery
    assert again["offset"] > 0
    assert again["disposition"] == "duplicate"
    assert again["fate"]["state"] == "duplicate"
    assert again["fate"]["run_id"] == first["fate"]["run_id"]  # the run that handled it
    assert "message #1" in again["fate"]["note"]
    assert again["posted"] == []  # nothing posted twice

    later = await asyncio.to_thread(run_snippet, shared, key, "100.2")  # an existing session
    assert later["disposition"] == "started"
    assert later["fate"]["run_id"] not in (None, first["fate"]["run_id"])
    assert later["posted"], later
