"""Gateways and proxies: the auth header style and extra headers of a model entry and an auth
profile, sent by the real anthropic and openai SDKs to the fake server, which records headers
and, like a gateway, can require a header of its own and echo a wrong one back in its 401."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from activities.auth_store import set_key
from activities.providers.base import Credentials, ProviderError, StreamEvent
from activities.providers.call_credentials import for_call
from activities.providers.catalog import build_provider
from activities.providers.resolve import ModelUnavailable, ProviderResolver
from agentlane.config import ModelEntry, load_config
from agentlane.headers import AuthHeader
from agentlane.run import ModelRef
from agentlane.settings import Settings
from tests.fakes.provider_server import FakeProviderServer, KeyHeader
from tests.providers.conftest import finish_of, request_for

KEY = "sk-gateway-key-0123456789abcdef"
KINDS = ["anthropic", "openai-chat", "openai-responses", "openai-compatible"]
AUTH_NAMES = ("authorization", "x-api-key", "api-key")
EXPECTED: dict[AuthHeader | None, dict[str, str]] = {
    # What both SDKs send today with no style chosen.
    None: {"authorization": f"Bearer {KEY}"},
    "bearer": {"authorization": f"Bearer {KEY}"},
    "x-api-key": {"x-api-key": KEY},
    "none": {},
}


def entry_for(server: FakeProviderServer, api: str, **fields: Any) -> ModelEntry:
    base_url = server.anthropic_base_url if api == "anthropic" else server.openai_base_url
    return ModelEntry.model_validate(
        {"provider": "gw", "id": "gw-model", "api": api, "base_url": base_url, **fields}
    )


def family(api: str) -> str:
    return "anthropic" if api == "anthropic" else "openai"


def gateway_wants(server: FakeProviderServer, api: str, style: AuthHeader | None) -> None:
    """The server takes the key only where `style` puts it (no key check at all for `none`)."""
    places: dict[AuthHeader | None, tuple[KeyHeader, ...]] = {
        None: ("authorization",),
        "bearer": ("authorization",),
        "x-api-key": ("x-api-key",),
        "none": (),
    }
    keys = [KEY] if style != "none" else []
    server.set_keys(**{family(api): keys})
    server.set_key_headers(**{family(api): places[style]})


async def call(entry: ModelEntry, credentials: Credentials | None) -> list[StreamEvent]:
    provider = build_provider(entry, timeout_seconds=10.0)
    return [event async for event in provider.stream(request_for("gw-model"), credentials)]


def sent(server: FakeProviderServer) -> dict[str, str]:
    requests = server.requests()
    assert len(requests) == 1, requests
    return requests[0].headers


def auth_sent(server: FakeProviderServer) -> dict[str, str]:
    return {name: value for name, value in sent(server).items() if name in AUTH_NAMES}


@pytest.mark.parametrize("style", list(EXPECTED))
@pytest.mark.parametrize("api", KINDS)
async def test_each_style_sends_exactly_its_auth_header(
    server: FakeProviderServer, api: str, style: AuthHeader | None
) -> None:
    gateway_wants(server, api, style)
    entry = entry_for(server, api, auth_header=style)
    credentials = for_call(entry, Credentials(profile_id="gw:p", api_key=KEY), {})
    events = await call(entry, credentials)
    assert finish_of(events).stop_reason == "end_turn"
    assert auth_sent(server) == EXPECTED[style]
    if style == "none":
        assert not [name for name, value in sent(server).items() if KEY in value]


@pytest.mark.parametrize(
    ("model_style", "profile_style"), [("x-api-key", "bearer"), ("bearer", "x-api-key")]
)
@pytest.mark.parametrize("api", KINDS)
async def test_the_profile_style_wins_over_the_model_entry(
    server: FakeProviderServer, api: str, model_style: AuthHeader, profile_style: AuthHeader
) -> None:
    gateway_wants(server, api, profile_style)
    entry = entry_for(server, api, auth_header=model_style)
    profile = Credentials(profile_id="gw:p", api_key=KEY, auth_header=profile_style)
    await call(entry, for_call(entry, profile, {}))
    assert auth_sent(server) == EXPECTED[profile_style]


@pytest.mark.parametrize("api", KINDS)
async def test_none_needs_no_key_at_all(server: FakeProviderServer, api: str) -> None:
    """A local server that takes no key: nothing to configure but `auth_header = "none"`."""
    gateway_wants(server, api, "none")
    entry = entry_for(server, api, auth_header="none")
    assert not entry.needs_key
    events = await call(entry, for_call(entry, None, {}))
    assert finish_of(events).stop_reason == "end_turn"
    assert auth_sent(server) == {}


@pytest.mark.parametrize("api", KINDS)
async def test_extra_headers_from_model_and_profile_with_the_profile_winning(
    server: FakeProviderServer, api: str
) -> None:
    gateway_wants(server, api, None)
    server.require_headers({"cf-aig-authorization": "Bearer gw-token-1"})
    entry = entry_for(server, api, headers={"X-Org": "team-a", "X-Route": "model"})
    profile = Credentials(
        profile_id="gw:p",
        api_key=KEY,
        headers={"x-route": "profile", "cf-aig-authorization": "Bearer gw-token-1"},
    )
    events = await call(entry, for_call(entry, profile, {}))
    assert finish_of(events).stop_reason == "end_turn"
    headers = sent(server)
    assert headers["x-org"] == "team-a"
    assert headers["x-route"] == "profile"
    assert headers["cf-aig-authorization"] == "Bearer gw-token-1"
    assert auth_sent(server) == EXPECTED[None]


@pytest.mark.parametrize("api", KINDS)
async def test_an_env_header_is_read_where_the_call_runs(
    server: FakeProviderServer, api: str
) -> None:
    gateway_wants(server, api, None)
    server.require_headers({"X-Gw-Token": "from-the-environment-1"})
    entry = entry_for(server, api, headers={"X-Gw-Token": "env:GW_TOKEN"})
    profile = Credentials(profile_id="gw:p", api_key=KEY)
    credentials = for_call(entry, profile, {"GW_TOKEN": "from-the-environment-1"})
    events = await call(entry, credentials)
    assert finish_of(events).stop_reason == "end_turn"
    assert sent(server)["x-gw-token"] == "from-the-environment-1"


@pytest.mark.parametrize("api", KINDS)
async def test_an_authorization_header_of_ones_own_goes_out_as_written(
    server: FakeProviderServer, api: str
) -> None:
    """Style `none` plus a header named Authorization: a gateway wanting Basic auth."""
    gateway_wants(server, api, "none")
    basic = "Basic dXNlcjpwYXNzd29yZA=="
    entry = entry_for(
        server, api, auth_header="none", headers={"Authorization": "env:GATEWAY_BASIC"}
    )
    profile = Credentials(profile_id="gw:p", api_key=KEY)
    await call(entry, for_call(entry, profile, {"GATEWAY_BASIC": basic}))
    assert auth_sent(server) == {"authorization": basic}


@pytest.mark.parametrize("source", ["profile", "env"])
@pytest.mark.parametrize("api", KINDS)
async def test_a_401_echoing_a_header_value_is_redacted(
    server: FakeProviderServer, api: str, source: str
) -> None:
    gateway_wants(server, api, None)
    server.require_headers({"cf-aig-authorization": "Bearer the-right-token"})
    wrong = "Bearer wrong-gateway-token-SECRET42"
    if source == "profile":
        entry = entry_for(server, api)
        profile = Credentials(
            profile_id="gw:p", api_key=KEY, headers={"cf-aig-authorization": wrong}
        )
        credentials = for_call(entry, profile, {})
    else:
        entry = entry_for(server, api, headers={"cf-aig-authorization": "env:CF_AIG"})
        profile = Credentials(profile_id="gw:p", api_key=KEY)
        credentials = for_call(entry, profile, {"CF_AIG": wrong})
    with pytest.raises(ProviderError) as caught:
        await call(entry, credentials)
    err = caught.value
    assert err.status == 401
    # The gateway's 401 really did quote the value: the redaction is what hides it.
    assert "invalid cf-aig-authorization: <redacted>" in err.message
    for text in (err.message, str(err), repr(err), repr(err.__dict__)):
        assert "SECRET42" not in text and KEY not in text


def write_gateway_setup(server: FakeProviderServer, data_dir: Path) -> None:
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / "config.toml").write_text(
        f"""
[[models]]
provider = "gw"
id = "claude-behind-gateway"
api = "anthropic"
base_url = "{server.anthropic_base_url}"
auth_header = "x-api-key"
headers = {{ "X-Org" = "team-a", "X-Gw-Token" = "env:GW_TOKEN" }}
"""
    )
    set_key(
        "gw:cf",
        "gw",
        KEY,
        data_dir=data_dir,
        auth_header="bearer",
        headers={"cf-aig-authorization": "Bearer cf-token-77"},
    )


async def test_config_file_and_auth_store_through_the_resolver(
    server: FakeProviderServer, tmp_path: Path
) -> None:
    gateway_wants(server, "anthropic", "bearer")
    server.require_headers({"cf-aig-authorization": "Bearer cf-token-77"})
    write_gateway_setup(server, tmp_path)
    env = {"GW_TOKEN": "env-token-88"}
    resolver = ProviderResolver(Settings(data_dir=tmp_path), env=env)
    resolved = resolver.resolve(ModelRef(provider="gw", model="claude-behind-gateway"), "gw:cf")
    for secret in (KEY, "cf-token-77", "env-token-88", "team-a"):
        assert secret not in repr(resolved)
    events = [e async for e in resolved.provider.stream(request_for("m"), resolved.credentials)]
    assert finish_of(events).stop_reason == "end_turn"
    headers = sent(server)
    # The profile's style (bearer) wins over the model entry's (x-api-key).
    assert auth_sent(server) == {"authorization": f"Bearer {KEY}"}
    assert headers["x-org"] == "team-a"
    assert headers["x-gw-token"] == "env-token-88"
    assert headers["cf-aig-authorization"] == "Bearer cf-token-77"


async def test_an_unset_env_variable_makes_the_model_unavailable_naming_it(
    server: FakeProviderServer, tmp_path: Path
) -> None:
    write_gateway_setup(server, tmp_path)
    resolver = ProviderResolver(Settings(data_dir=tmp_path), env={})
    with pytest.raises(ModelUnavailable) as caught:
        resolver.resolve(ModelRef(provider="gw", model="claude-behind-gateway"), "gw:cf")
    message = str(caught.value)
    assert "GW_TOKEN" in message and "is not set" in message
    assert "gw/claude-behind-gateway" in message
    assert server.requests() == []


def test_a_catalogue_model_takes_gateway_settings_from_the_file(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(
        '[[models]]\nprovider = "anthropic"\nid = "claude-sonnet-4-5"\n'
        'auth_header = "x-api-key"\nheaders = { "X-Org" = "team-a" }\n'
    )
    entry = load_config(path=path, env={}).model("anthropic/claude-sonnet-4-5")
    assert entry.auth_header == "x-api-key" and entry.headers == {"X-Org": "team-a"}
    assert entry.context_window > 0 and entry.needs_key
