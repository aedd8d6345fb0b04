"""The shared profile store: compare-and-set on the row version loses no update when many runs
mark the same profile at once (two store objects: two processes or hosts)."""

from __future__ import annotations

import asyncio
import random
import stat
from pathlib import Path

from activities.profile_listing import ProfileListing, SharedCooldowns
from agentlane.errors import FailoverReason
from agentlane.profile_listing import UsageUpdate
from agentlane.profile_state import ProfileState, ProfileUsage
from agentlane.settings import Settings
from store.open import open_store
from workflows.policy.auth_profiles import in_cooldown, mark_failure

NOW = 1_000_000.0


async def one_session_fails(store: ProfileListing) -> int:
    """What a run does (`AgentRunWorkflow._mark_shared`): read, compute, compare-and-set."""
    tries = 0
    state = await store._read()
    while True:
        tries += 1
        expected = state.usage.get("a")
        marked = mark_failure(state, "a", FailoverReason.RATE_LIMIT, provider="p", now=NOW)
        await asyncio.sleep(random.random() / 1000)  # the run's workflow task, in between
        result = await store._update(
            UsageUpdate(profile_id="a", expected=expected, new=marked.usage["a"])
        )
        if result.applied:
            return tries
        usage = dict(state.usage)
        if result.current is not None:
            usage["a"] = result.current
        state = ProfileState(usage=usage)


async def listing(tmp_path: Path) -> ProfileListing:
    settings = Settings(data_dir=tmp_path)
    return ProfileListing(settings, await open_store(settings))


async def test_two_hundred_failures_at_once_lose_no_update(tmp_path: Path) -> None:
    hosts = [await listing(tmp_path), await listing(tmp_path)]
    tries = await asyncio.gather(*(one_session_fails(hosts[n % 2]) for n in range(200)))
    state = await hosts[0]._read()
    assert state.usage["a"].error_count == 200
    assert sum(tries) > 200, "the test raced nothing; it proves nothing"
    assert in_cooldown(state, "a", NOW + 1)
    # The other host sees the cooldown at once.
    cooling = await SharedCooldowns(hosts[1].store).cooling("a", "m", NOW)
    assert cooling is not None and cooling.error_count == 200
    assert stat.S_IMODE((tmp_path / "agentlane.db").stat().st_mode) == 0o600


async def test_a_stale_update_is_refused_and_shows_the_current_usage(tmp_path: Path) -> None:
    store = await listing(tmp_path)
    first = mark_failure(ProfileState(), "a", FailoverReason.RATE_LIMIT, provider="p", now=NOW)
    update = UsageUpdate(profile_id="a", expected=None, new=first.usage["a"])
    assert (await store._update(update)).applied
    stale = await store._update(UsageUpdate(profile_id="a", expected=None, new=first.usage["a"]))
    assert not stale.applied and stale.current == first.usage["a"]


async def test_used_marks_merge_and_record_the_last_good_profile(tmp_path: Path) -> None:
    store = await listing(tmp_path)
    marks = [
        UsageUpdate(
            profile_id="a",
            expected=None,
            new=ProfileUsage(last_used=NOW + n),
            touch=True,
            good_for="p",
        )
        for n in range(20)
    ]
    results = await asyncio.gather(*(store._update(m) for m in marks))
    assert all(r.applied for r in results)
    state = await store._read()
    assert state.usage["a"].last_used == NOW + 19 and state.last_good == {"p": "a"}
