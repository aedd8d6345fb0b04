"""`agentlane db import`: the older file layout into the store, idempotent, damaged lines
skipped and reported (never fatal), nothing silently ignored."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from activities.transcript_store import TranscriptStore
from agentlane.settings import Settings
from agentlane.transcript import Role, TranscriptEntry
from store.file_import import import_files, legacy_files, warn_unimported
from store.open import open_store

KEY = "slack:C1"


def line(entry: TranscriptEntry) -> bytes:
    return entry.model_dump_json(exclude_defaults=True).encode() + b"\n"


def old_layout(root: Path) -> None:
    folder = root / "sessions" / "slack%3AC1"
    folder.mkdir(parents=True)
    (folder / ".key").write_text(KEY)
    u1 = TranscriptEntry(id="u1", role=Role.USER, ts=1.0, text="hi")
    a1 = TranscriptEntry(id="session:slack:C1:run:1.abc:t0", role=Role.ASSISTANT, ts=2.0)
    torn = line(TranscriptEntry(id="u9", role=Role.USER, ts=3.0))[:20]
    (folder / "transcript.jsonl").write_bytes(
        line(u1)
        + b"this is not json\n"
        + b"\n"
        + line(a1)
        + b'{"id": "x", "role": "robot"}\n'
        + torn
    )
    (folder / "session.json").write_text(json.dumps({"settings": {}, "run_count": 3}))
    (folder / "runs.jsonl").write_text('{"run_id":"session:slack:C1:run:1","status":"success"}\n')
    (folder / "run-workspaces").mkdir()
    (folder / "run-workspaces" / "session_slack_C1_run_1.abc").write_text("/w")
    (folder / "exec-started").mkdir()
    (folder / "exec-started" / "call_1").write_text("ls")
    # An earlier version's folder name (`:` -> `_`) with no owner file: the name is the key.
    legacy = root / "sessions" / "plain"
    legacy.mkdir()
    (legacy / "transcript.jsonl").write_bytes(line(u1))
    (root / "auth.json").write_text(
        json.dumps({"profiles": {"anthropic:w": {"provider": "anthropic", "key": "sk-1"}}})
    )
    (root / "auth-state.json").write_text(
        json.dumps(
            {
                "usage": {"anthropic:w": {"error_count": 2, "cooldown_until": 5.0}},
                "last_good": {"anthropic": "anthropic:w"},
                "order": {"anthropic": ["anthropic:w"]},
            }
        )
    )
    token = {"id": "abcd1234", "name": "n", "created": 1.0, "sha256": "f" * 64}
    (root / "gateway-tokens.json").write_text(json.dumps({"tokens": [token]}))
    (root / "gateway-tokens-used.json").write_text(json.dumps({"last_used": {"abcd1234": 9.0}}))
    (root / "webhooks" / "secrets").mkdir(parents=True)
    (root / "webhooks" / "secrets" / "ref1").write_text("ab" * 32 + "\n")
    data = b"payload bytes"
    digest = hashlib.sha256(data).hexdigest()
    (root / "payloads" / digest[:2]).mkdir(parents=True)
    (root / "payloads" / digest[:2] / digest).write_bytes(data)


async def test_import_brings_every_kind_in_once(tmp_path: Path) -> None:
    old_layout(tmp_path)
    settings = Settings(data_dir=tmp_path)
    store = await open_store(settings)
    assert legacy_files(tmp_path)
    warning = await warn_unimported(settings, store)
    assert warning is not None and "agentlane db import" in warning

    report = await import_files(tmp_path, store)
    assert report.written["transcript entries"] == 3
    assert len([p for p in report.problems if "not a transcript entry" in p]) == 3
    assert await warn_unimported(settings, store) is None

    entries = await TranscriptStore(store).read_context(KEY)
    assert [e.id for e in entries] == ["u1", "session:slack:C1:run:1.abc:t0"]
    assert entries[1].parent_id == "u1"
    assert [e.id for e in await TranscriptStore(store).read_context("plain")] == ["u1"]
    assert json.loads(await store.session_record(KEY) or "")["run_count"] == 3
    assert [r for r, _ in await store.runs(KEY)] == ["session:slack:C1:run:1"]
    assert await store.run_workspace(KEY, "session:slack:C1:run:1.abc") == "/w"
    assert await store.tool_mark(KEY, "call_1", "exec-started") == "ls"
    [profile] = await store.profiles()
    assert profile.key == "sk-1"
    row = await store.usage_row("anthropic:w")
    assert row is not None and json.loads(row.usage)["error_count"] == 2
    assert await store.last_good() == {"anthropic": "anthropic:w"}
    assert await store.profile_orders() == {"anthropic": ["anthropic:w"]}
    token = await store.token("abcd1234")
    assert token is not None and token.last_used == 9.0
    assert await store.webhook_secret("ref1") == b"ab" * 32

    again = await import_files(tmp_path, store)
    assert sum(again.written.get(k, 0) for k in ("transcript entries", "runs")) == 0
    assert len(await TranscriptStore(store).read_context(KEY)) == 2
    await store.close()


async def test_an_empty_data_dir_has_nothing_to_say(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path)
    store = await open_store(settings)
    assert legacy_files(tmp_path) == []
    assert await warn_unimported(settings, store) is None
    assert (await import_files(tmp_path, store)).found == {}
