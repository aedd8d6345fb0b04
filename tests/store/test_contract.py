"""The store's contract, for every backend (tests/store/conftest.py `BACKENDS`)."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path

import pytest

from agentlane.transcript import Role, ToolCall, TranscriptEntry
from store.interface import Store
from store.models import ProfileRow, TokenRow
from store.sealing import Sealer
from tests.store.conftest import Factory


def user(eid: str, text: str = "hi") -> TranscriptEntry:
    return TranscriptEntry(id=eid, role=Role.USER, ts=1.0, text=text)


def result(call_id: str, text: str) -> TranscriptEntry:
    return TranscriptEntry(
        id=f"{call_id}:result", role=Role.TOOL, ts=2.0, tool_call_id=call_id, text=text
    )


async def test_migrate_is_idempotent(store: Store) -> None:
    first = await store.migrate()
    assert first >= 1
    assert await store.migrate() == first
    status = await store.status()
    assert status.schema_version == status.latest_version == first


async def test_append_is_idempotent_by_entry_id(store: Store) -> None:
    written = await store.append_entries("s", [user("a"), user("b")])
    assert [e.id for e in written] == ["a", "b"]
    assert written[1].parent_id == "a"
    again = await store.append_entries("s", [user("a", "other"), user("b"), user("c")])
    assert [e.id for e in again] == ["c"]
    assert again[0].parent_id == "b"
    entries = await store.entries_after("s")
    assert [(seq, e.id, e.text) for seq, e in entries] == [
        (1, "a", "hi"),
        (2, "b", "hi"),
        (3, "c", "hi"),
    ]
    assert [e.id for _, e in await store.entries_after("s", 2)] == ["c"]
    # Sessions are apart: the same ids in another session are other entries.
    assert [e.id for e in await store.append_entries("t", [user("a")])] == ["a"]
    assert sorted(await store.session_keys()) == ["s", "t"]


async def test_duplicates_within_one_batch_are_written_once(store: Store) -> None:
    written = await store.append_entries(
        "s", [user("a"), user("a"), result("c1", "one"), result("c1", "two")]
    )
    assert [e.id for e in written] == ["a", "c1:result"]
    found = await store.tool_result("s", "c1")
    assert found is not None and found.text == "one"


async def test_racing_tool_results_leave_exactly_one(store: Store) -> None:
    call = TranscriptEntry(
        id="asst",
        role=Role.ASSISTANT,
        ts=1.0,
        tool_calls=[ToolCall(id=f"c{i}", name="read") for i in range(20)],
    )
    await store.append_entries("s", [call])
    # Two attempts per call, racing, each with its own text and its own entry id.
    attempts = [
        store.append_entries(
            "s",
            [
                TranscriptEntry(
                    id=f"c{i}:result:{attempt}",
                    role=Role.TOOL,
                    ts=2.0,
                    tool_call_id=f"c{i}",
                    text=f"attempt {attempt}",
                )
            ],
        )
        for i in range(20)
        for attempt in (1, 2)
    ]
    outcomes = await asyncio.gather(*attempts)
    assert sum(len(w) for w in outcomes) == 20
    entries = [e for _, e in await store.entries_after("s")]
    results = [e.tool_call_id for e in entries if e.role == Role.TOOL]
    assert sorted(results) == sorted(f"c{i}" for i in range(20))
    seqs = [seq for seq, _ in await store.entries_after("s")]
    assert seqs == list(range(1, 22))


async def test_entry_lookup_and_parent_chain(store: Store) -> None:
    await store.append_entries("s", [user("a"), user("b", "second")])
    found = await store.entry("s", "b")
    assert found is not None and found.text == "second" and found.parent_id == "a"
    assert await store.entry("s", "nope") is None
    assert await store.entry("other", "a") is None
    assert await store.tool_result("s", "c1") is None


async def test_concurrent_appends_to_one_session_keep_a_dense_order(
    backend_factory: Factory, tmp_path: Path
) -> None:
    """Two store objects (two processes or hosts) appending to one session at once."""
    one = await backend_factory(tmp_path, Sealer(None))
    two = await backend_factory(tmp_path, Sealer(None))
    try:
        await asyncio.gather(
            *(
                (one if i % 2 else two).append_entries("s", [user(f"e{i}"), user(f"e{i}")])
                for i in range(40)
            )
        )
        entries = await one.entries_after("s")
        assert [seq for seq, _ in entries] == list(range(1, 41))
        assert len({e.id for _, e in entries}) == 40
        # Each entry's parent is the entry before it: no two appends interleaved.
        for (_, before), (_, after) in zip(entries, entries[1:], strict=False):
            assert after.parent_id == before.id
    finally:
        await one.close()
        await two.close()


async def test_session_and_run_records(store: Store) -> None:
    assert await store.session_record("s") is None
    await store.put_session_record("s", json.dumps({"run_count": 1}))
    await store.put_session_record("s", json.dumps({"run_count": 2}))
    assert json.loads(await store.session_record("s") or "") == {"run_count": 2}
    assert await store.put_branch_source("s", '{"parent": "p"}')
    assert not await store.put_branch_source("s", '{"parent": "other"}')
    assert await store.branch_source("s") == '{"parent": "p"}'
    assert await store.record_run("s", "s:run:1", '{"ok": 1}')
    assert not await store.record_run("s", "s:run:1", '{"ok": 2}')
    assert await store.record_run("s", "s:run:2", '{"ok": 3}')
    assert await store.runs("s") == [("s:run:1", '{"ok": 1}'), ("s:run:2", '{"ok": 3}')]
    await store.set_run_workspace("s", "run1", "/w/a")
    await store.set_run_workspace("s", "run1", "/w/b")
    assert await store.run_workspace("s", "run1") == "/w/b"
    assert await store.run_workspace("s", "run2") is None


async def test_usage_is_compare_and_set(store: Store) -> None:
    assert await store.set_usage("p1", None, '{"error_count": 1}')
    # A second creator lost the race: nothing written.
    assert not await store.set_usage("p1", None, '{"error_count": 9}')
    row = await store.usage_row("p1")
    assert row is not None and row.version == 1
    # Two writers from the same version: exactly one wins.
    outcomes = await asyncio.gather(
        store.set_usage("p1", 1, '{"error_count": 2}', last_good_for="openai"),
        store.set_usage("p1", 1, '{"error_count": 3}'),
    )
    assert sorted(outcomes) == [False, True]
    row = await store.usage_row("p1")
    assert row is not None and row.version == 2
    assert row.usage in ('{"error_count": 2}', '{"error_count": 3}')
    assert [r.profile_id for r in await store.usage_rows()] == ["p1"]
    assert not await store.set_usage("p1", 1, "{}")


async def test_last_good_is_written_with_its_usage(store: Store) -> None:
    assert await store.set_usage("p1", None, "{}", last_good_for="openai")
    assert await store.last_good() == {"openai": "p1"}
    # A refused write changes nothing, its last-good mark included.
    assert not await store.set_usage("p2", 5, "{}", last_good_for="openai")
    assert await store.last_good() == {"openai": "p1"}
    await store.set_profile_order("openai", ["p2", "p1"])
    assert await store.profile_orders() == {"openai": ["p2", "p1"]}
    await store.set_profile_order("openai", None)
    assert await store.profile_orders() == {}
    await store.set_profile_order("openai", ["p1"])
    await store.reset_profile_state()
    assert (await store.usage_rows(), await store.last_good(), await store.profile_orders()) == (
        [],
        {},
        {},
    )


async def test_profiles_keep_their_keys(store: Store) -> None:
    await store.put_profile(
        ProfileRow(id="openai:a", provider="openai", key="sk-1", headers={"X-A": "v"})
    )
    await store.put_profile(ProfileRow(id="openai:a", provider="openai", key="sk-2"))
    [found] = await store.profiles()
    assert found.key == "sk-2" and found.headers == {}
    assert "sk-2" not in repr(found)
    assert await store.delete_profile("openai:a")
    assert not await store.delete_profile("openai:a")
    assert await store.profiles() == []


async def test_secrets_are_sealed_at_rest(sealed_store: Store, tmp_path: Path) -> None:
    await sealed_store.put_profile(
        ProfileRow(id="anthropic:w", provider="anthropic", key="sk-ant-SECRETKEY")
    )
    await sealed_store.set_webhook_secret("ref1", b"WEBHOOKSECRETVALUE")
    [found] = await sealed_store.profiles()
    assert found.key == "sk-ant-SECRETKEY"
    assert await sealed_store.webhook_secret("ref1") == b"WEBHOOKSECRETVALUE"
    [row] = await sealed_store._read_profiles()
    assert b"SECRETKEY" not in row[1]
    assert b"WEBHOOKSECRETVALUE" not in (await sealed_store._read_secret("ref1") or b"")
    for file in tmp_path.rglob("*"):
        if file.is_file():
            data = file.read_bytes()
            assert b"SECRETKEY" not in data and b"WEBHOOKSECRETVALUE" not in data, file


async def test_sealed_secret_without_the_key_is_a_clear_error(
    backend_factory: Factory, tmp_path: Path
) -> None:
    from tests.store.conftest import a_codec

    sealed = await backend_factory(tmp_path, Sealer(a_codec()))
    await sealed.set_webhook_secret("r", b"x" * 64)
    await sealed.close()
    plain = await backend_factory(tmp_path, Sealer(None))
    try:
        with pytest.raises(ValueError, match="AGENTLANE_ENCRYPTION_KEYS_FILE"):
            await plain.webhook_secret("r")
    finally:
        await plain.close()


async def test_tokens(store: Store) -> None:
    row = TokenRow(id="abcd1234", name="n", prefixes=["slack:"], created=1.0, sha256="f" * 64)
    assert await store.add_token(row)
    assert not await store.add_token(row.model_copy(update={"name": "dup"}))
    found = await store.token("abcd1234")
    assert found is not None and found.prefixes == ["slack:"] and found.last_used is None
    await store.note_token_use({"abcd1234": 5.0, "gone0000": 6.0})
    await store.note_token_use({"abcd1234": 4.0})  # an older time never moves it back
    found = await store.token("abcd1234")
    assert found is not None and found.last_used == 5.0
    assert [t.id for t in await store.tokens()] == ["abcd1234"]
    assert await store.revoke_token("abcd1234")
    assert not await store.revoke_token("abcd1234")
    assert await store.token("abcd1234") is None


async def test_webhook_secrets_and_delivery_progress(store: Store) -> None:
    assert await store.webhook_secret("r") is None
    first, second = await asyncio.gather(
        store.ensure_webhook_secret("r", b"a" * 64), store.ensure_webhook_secret("r", b"b" * 64)
    )
    assert first == second
    await store.set_webhook_secret("r", b"c" * 64)
    assert await store.webhook_secret("r") == b"c" * 64
    assert await store.webhook_secret_refs() == ["r"]
    assert await store.delivery_progress("d1") is None
    await store.save_delivery_progress("d1", '{"offset": 3}')
    await store.save_delivery_progress("d1", '{"offset": 5}')
    assert await store.delivery_progress("d1") == '{"offset": 5}'


async def test_payloads(store: Store) -> None:
    data = b"\x00payload" * 1000
    digest = hashlib.sha256(data).hexdigest()
    await store.put_payload(digest, data)
    await store.put_payload(digest, data)
    assert await store.payload(digest) == data
    assert (await store.status()).counts["payloads"] == 1
    assert await store.delete_payload(digest)
    assert await store.payload(digest) is None
    assert not await store.delete_payload(digest)


async def test_a_failed_transaction_leaves_nothing(store: Store) -> None:
    # An entry that cannot be written (its meta is not JSON), after one that can.
    bad = TranscriptEntry(id="x", role=Role.USER, ts=1.0, meta={"x": object()})
    await store.append_entries("s", [user("a")])
    with pytest.raises(Exception):  # noqa: B017 - any error will do, as long as nothing stays
        await store.append_entries("s", [user("b"), bad])
    assert [e.id for _, e in await store.entries_after("s")] == ["a"]


async def test_tool_marks_are_written_once(store: Store) -> None:
    assert await store.tool_mark("s", "c1", "exec-started") is None
    outcomes = await asyncio.gather(
        store.mark_tool_call("s", "c1", "exec-started", "ls"),
        store.mark_tool_call("s", "c1", "exec-started", "ls -l"),
    )
    assert sorted(outcomes) == [False, True]
    assert await store.tool_mark("s", "c1", "exec-started") in ("ls", "ls -l")
    assert await store.tool_mark("s", "c1", "edit-applied") is None


async def test_a_tool_mark_no_attempt_needs_is_forgotten(store: Store) -> None:
    await store.mark_tool_call("s", "c2", "patch-plan", "x" * 1000)
    await store.mark_tool_call("s", "c2", "image-refused", "corrupt")
    await store.forget_tool_mark("s", "c2", "patch-plan")
    assert await store.tool_mark("s", "c2", "patch-plan") is None
    assert await store.tool_mark("s", "c2", "image-refused") == "corrupt"
    await store.forget_tool_mark("s", "c2", "patch-plan")  # twice: nothing to do
