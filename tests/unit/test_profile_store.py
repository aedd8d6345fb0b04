"""The shared profile store: compare-and-set loses no update when many runs mark the same
profile at once, and the files are private."""

from __future__ import annotations

import stat
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from activities.profile_listing import ProfileListing
from agentlane.errors import FailoverReason
from agentlane.profile_listing import UsageUpdate
from agentlane.profile_state import ProfileState
from agentlane.settings import Settings
from workflows.policy.auth_profiles import in_cooldown, mark_failure

NOW = 1_000_000.0


def one_session_fails(store: ProfileListing) -> int:
    """What a run does (`AgentRunWorkflow._mark_shared`): read, compute, compare-and-set."""
    tries = 0
    state = store._read()
    while True:
        tries += 1
        expected = state.usage.get("a")
        marked = mark_failure(state, "a", FailoverReason.RATE_LIMIT, provider="p", now=NOW)
        result = store._update(
            UsageUpdate(profile_id="a", expected=expected, new=marked.usage["a"])
        )
        if result.applied:
            return tries
        usage = dict(state.usage)
        if result.current is not None:
            usage["a"] = result.current
        state = ProfileState(usage=usage)


def test_two_hundred_failures_at_once_lose_no_update(tmp_path: Path) -> None:
    store = ProfileListing(Settings(data_dir=tmp_path))
    with ThreadPoolExecutor(max_workers=32) as pool:
        tries = list(pool.map(lambda _: one_session_fails(store), range(200)))
    state = store._read()
    assert state.usage["a"].error_count == 200
    assert sum(tries) > 200, "the test raced nothing; it proves nothing"
    assert in_cooldown(state, "a", NOW + 1)
    assert stat.S_IMODE((tmp_path / "auth-state.json").stat().st_mode) == 0o600


def test_a_stale_update_is_refused_and_shows_the_current_usage(tmp_path: Path) -> None:
    store = ProfileListing(Settings(data_dir=tmp_path))
    first = mark_failure(ProfileState(), "a", FailoverReason.RATE_LIMIT, provider="p", now=NOW)
    assert store._update(UsageUpdate(profile_id="a", expected=None, new=first.usage["a"])).applied
    stale = store._update(UsageUpdate(profile_id="a", expected=None, new=first.usage["a"]))
    assert not stale.applied and stale.current == first.usage["a"]
