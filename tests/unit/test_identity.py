"""The identity scheme: from a session key to every workflow id and folder name, no two keys
share one, and no key can spell another session's ids (issue: sessions isolated)."""

from __future__ import annotations

import random
import string

import pytest

from agentlane.ids import (
    RESERVED_SEGMENTS,
    InvalidSessionKey,
    check_session_key,
    events_workflow_id,
    run_workflow_id,
    session_key_from_workflow_id,
    session_workflow_id,
    storage_name,
)

ALPHABET = string.ascii_letters + string.digits + "._@:-"
# Characters that make collisions likely: separators, the reserved words' letters, case pairs.
TRICKY = ["col", "x", "X", ":", "_", "-", ".", "@", "run", "events", "1", "kc", "sub"]


def generated_keys(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    keys: set[str] = set()
    while len(keys) < n:
        if rng.random() < 0.5:
            raw = "".join(rng.choice(TRICKY) for _ in range(rng.randint(1, 6)))
        else:
            raw = rng.choice(string.ascii_letters) + "".join(
                rng.choice(ALPHABET) for _ in range(rng.randint(0, 20))
            )
        try:
            keys.add(check_session_key(raw))
        except InvalidSessionKey:
            continue
    return sorted(keys)


@pytest.mark.parametrize("seed", range(5))
def test_no_two_keys_share_a_workflow_id_or_a_folder(seed: int) -> None:
    keys = generated_keys(3000, seed)
    owner: dict[str, str] = {}
    for key in keys:
        ids = [
            session_workflow_id(key),
            events_workflow_id(key),
            *(run_workflow_id(key, n) for n in (1, 2, 10)),
        ]
        for wid in ids:
            assert owner.setdefault(wid, key) == key, f"{key!r} and {owner[wid]!r} share {wid}"
            assert session_key_from_workflow_id(wid) == key
        folder = "dir:" + storage_name(key)
        assert owner.setdefault(folder, key) == key, f"{key!r} and {owner[folder]!r} share a folder"


@pytest.mark.parametrize("key", ["kc:events", "kc:run:1", "a:sub", "x:child:y", "slack:agent"])
def test_keys_that_would_spell_derived_ids_are_refused(key: str) -> None:
    with pytest.raises(InvalidSessionKey, match="reserved"):
        check_session_key(key)


def test_reported_collisions_are_gone() -> None:
    assert storage_name("col:x") != storage_name("col_x")
    assert storage_name("col:x") == "col%3Ax"
    assert storage_name("alice") == "alice"  # plain keys keep their old folder
    assert events_workflow_id("kc") == "session:kc:events"
    assert "events" in RESERVED_SEGMENTS


@pytest.mark.parametrize("key", ["", "../etc", "a/b", "é", "a b", "a..b", ":x", "x" * 129])
def test_malformed_keys_are_refused(key: str) -> None:
    with pytest.raises(InvalidSessionKey):
        check_session_key(key)


def test_storage_names_are_safe_file_names() -> None:
    for key in generated_keys(500, 99):
        name = storage_name(key)
        assert "/" not in name and name not in (".", "..") and len(name) <= 3 * 128
