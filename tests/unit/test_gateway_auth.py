"""Gateway tokens (hashed, in the store, scoped, revocable, seen at once) and the rate limiter."""

from __future__ import annotations

from pathlib import Path

import pytest

from clients.gateway.auth import RateLimiter, TokenError, TokenStore


def test_a_token_is_shown_once_and_stored_only_as_its_hash(tmp_path: Path) -> None:
    store = TokenStore(tmp_path)
    record, token = store.create("slack", ["slack:T1:"], read_only=True)
    assert token.startswith(f"agl_{record.id}_") and len(token) > 40
    db = tmp_path / "agentlane.db"
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())
    assert token.encode() not in raw and token.split("_", 2)[2].encode() not in raw
    assert db.stat().st_mode & 0o777 == 0o600
    assert store.verify(token) == record
    listed = store.list()
    assert [(t.id, t.name, t.prefixes, t.read_only) for t in listed] == [
        (record.id, "slack", ["slack:T1:"], True)
    ]
    assert "sha256" not in listed[0].model_dump()


def test_unknown_malformed_and_revoked_tokens_are_refused(tmp_path: Path) -> None:
    store = TokenStore(tmp_path)
    record, token = store.create()
    assert store.verify(token[:-1] + ("A" if token[-1] != "A" else "B")) is None
    assert store.verify("agl_00000000_" + "x" * 43) is None
    assert store.verify("") is None and store.verify("Bearer " + token) is None
    # A second store (the CLI) revokes: the gateway's store sees it without a restart.
    assert TokenStore(tmp_path).revoke(record.id)
    assert store.verify(token) is None
    assert not TokenStore(tmp_path).revoke(record.id)


def test_tokens_made_while_the_gateway_runs_count_at_once(tmp_path: Path) -> None:
    gateway = TokenStore(tmp_path)
    assert gateway.verify("agl_00000000_" + "x" * 43) is None
    _, token = TokenStore(tmp_path).create("late")
    assert gateway.verify(token) is not None


def test_prefix_scopes(tmp_path: Path) -> None:
    store = TokenStore(tmp_path)
    record, _ = store.create(prefixes=["slack:T1:", "web-"])
    assert record.allows_key("slack:T1:C42") and record.allows_key("web-abc")
    assert not record.allows_key("slack:T2:C42") and not record.allows_key("telegram:1")
    assert store.create()[0].allows_key("anything")
    for bad in ("", "../x", ":x", "a b", "a..b"):
        with pytest.raises(TokenError):
            store.create(prefixes=[bad])


def test_last_used_is_written_by_the_gateway_alone(tmp_path: Path) -> None:
    store = TokenStore(tmp_path)
    record, token = store.create()
    assert store.list()[0].last_used is None
    store.verify(token)
    store.flush_used()
    assert TokenStore(tmp_path).list()[0].last_used is not None


async def test_the_gateway_side_verifies_and_batches_last_used(tmp_path: Path) -> None:
    from agentlane.settings import Settings

    _, token = TokenStore(tmp_path).create("other host")
    gateway = TokenStore(Settings(data_dir=tmp_path))
    record = await gateway.averify(token)
    assert record is not None and record.name == "other host"
    assert await gateway.averify(token[:-1] + ("A" if token[-1] != "A" else "B")) is None
    await gateway.aflush_used()
    assert TokenStore(tmp_path).list()[0].last_used is not None


def test_token_bucket() -> None:
    limiter = RateLimiter(rate=2.0, burst=3)
    assert [limiter.take("a", now=0.0) for _ in range(3)] == [0.0, 0.0, 0.0]
    wait = limiter.take("a", now=0.0)
    assert wait == pytest.approx(0.5)
    assert RateLimiter.retry_after(wait) == "1"
    assert limiter.take("b", now=0.0) == 0.0  # per token
    assert limiter.take("a", now=0.5) == 0.0  # refilled one
    assert limiter.take("a", now=0.5) > 0
    assert RateLimiter(rate=0, burst=0).take("a") == 0.0  # 0: no limit


def test_a_token_name_is_bounded_and_printable(tmp_path: Path) -> None:
    store = TokenStore(tmp_path)
    for bad in ("x" * 201, "a\x01b", "line\nbreak"):
        with pytest.raises(TokenError, match="at most 200 characters, without control"):
            store.create(name=bad)
    assert not store.list()
    assert store.create(name="ops team")[0].name == "ops team"


async def test_a_store_outage_fails_no_known_client_and_cuts_no_stream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PostgreSQL restarting: a request used to wait 20 s for the pool, then get a bare 500, and
    open event streams were cut. A token verified lately is taken on that verification, an
    unknown one is told the store is unavailable, and a stream's re-check keeps it open."""
    import clients.gateway.auth as auth
    from clients.gateway.auth import StoreUnavailable

    store = TokenStore(tmp_path)
    record, token = store.create("adapter")
    _, other = store.create("other")
    assert (await store.averify(token)) == record

    async def down(settings: object) -> object:
        raise OSError("connection refused")

    monkeypatch.setattr(auth, "shared_store", down)
    assert (await store.averify(token)) == record
    with pytest.raises(StoreUnavailable):
        await store.averify(other)
    assert await store.alive(record)
