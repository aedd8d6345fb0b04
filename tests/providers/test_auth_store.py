"""The auth store: 0600 file, env profiles, clear errors that never show a key."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from activities.auth_store import (
    AuthStore,
    InsecureAuthFileError,
    InvalidProfileError,
    MissingCredentialsError,
    env_variable_for,
    resolve_credentials,
    set_key,
)

SECRET = "test-anthropic-key-verysecretvalue"


def test_set_key_creates_a_0600_file_atomically(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    path = set_key("anthropic:work", "anthropic", SECRET, data_dir=data_dir)
    assert path == data_dir / "auth.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    stored = json.loads(path.read_text())
    assert stored["profiles"]["anthropic:work"] == {
        "provider": "anthropic",
        "type": "api_key",
        "key": SECRET,
    }
    set_key("openai:main", "openai", "sk-openai-2", data_dir=data_dir, base_url="http://proxy/v1")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert set(json.loads(path.read_text())["profiles"]) == {"anthropic:work", "openai:main"}
    assert not [p for p in data_dir.iterdir() if p.name.endswith(".tmp")]


def test_resolve_from_file(tmp_path: Path) -> None:
    set_key("openai:main", "openai", "sk-openai-2", data_dir=tmp_path, base_url="http://proxy/v1")
    creds = resolve_credentials("openai:main", "openai", data_dir=tmp_path, env={})
    assert (creds.profile_id, creds.api_key, creds.base_url) == (
        "openai:main",
        "sk-openai-2",
        "http://proxy/v1",
    )
    assert "sk-openai-2" not in repr(creds)
    # No profile named: the first usable profile of the provider.
    assert (
        resolve_credentials(None, "openai", data_dir=tmp_path, env={}).profile_id == "openai:main"
    )


def test_refuses_a_group_or_world_readable_file(tmp_path: Path) -> None:
    path = set_key("anthropic:work", "anthropic", SECRET, data_dir=tmp_path)
    os.chmod(path, 0o644)
    with pytest.raises(InsecureAuthFileError) as caught:
        resolve_credentials("anthropic:work", "anthropic", data_dir=tmp_path, env={})
    message = str(caught.value)
    assert "0644" in message and "chmod 600" in message and SECRET not in message


def test_env_profiles(tmp_path: Path) -> None:
    env = {"ANTHROPIC_API_KEY": "env-anthropic-key", "OPENAI_API_KEY": "env-openai-key"}
    store = AuthStore.for_data_dir(tmp_path, env)
    assert store.resolve("anthropic:env", "anthropic").api_key == "env-anthropic-key"
    assert store.resolve(None, "openai").api_key == "env-openai-key"
    assert store.profile_ids("anthropic") == ["anthropic:env"]
    assert "env-anthropic-key" not in repr(store.profiles())


def test_agentlane_key_variable_overrides_and_stands_alone(tmp_path: Path) -> None:
    set_key("anthropic:work", "anthropic", SECRET, data_dir=tmp_path)
    variable = env_variable_for("anthropic:work")
    assert variable == "AGENTLANE_KEY_ANTHROPIC_WORK"
    store = AuthStore.for_data_dir(tmp_path, {variable: "from-env"})
    assert store.resolve("anthropic:work", "anthropic").api_key == "from-env"
    alone = AuthStore.for_data_dir(tmp_path / "empty", {"AGENTLANE_KEY_VLLM_LOCAL": "k"})
    assert alone.resolve("vllm:local", "vllm").api_key == "k"


def test_missing_key_names_profile_and_places_without_keys(tmp_path: Path) -> None:
    set_key("anthropic:work", "anthropic", SECRET, data_dir=tmp_path)
    store = AuthStore.for_data_dir(tmp_path, {"OPENAI_API_KEY": "sk-should-not-show"})
    with pytest.raises(MissingCredentialsError) as caught:
        store.resolve("anthropic:personal", "anthropic")
    message = str(caught.value)
    assert "anthropic:personal" in message
    assert "AGENTLANE_KEY_ANTHROPIC_PERSONAL" in message and str(tmp_path / "auth.json") in message
    assert SECRET not in message and "sk-should-not-show" not in message
    with pytest.raises(MissingCredentialsError, match="ANTHROPIC_API_KEY"):
        AuthStore.for_data_dir(tmp_path / "none", {}).resolve("anthropic:env", "anthropic")
    with pytest.raises(MissingCredentialsError, match="No API key found for provider openai"):
        AuthStore.for_data_dir(tmp_path / "none", {}).resolve(None, "openai")
    with pytest.raises(MissingCredentialsError, match="belongs to provider"):
        store.resolve("anthropic:work", "openai")


def test_explicit_order_wins(tmp_path: Path) -> None:
    for pid in ("anthropic:a", "anthropic:b"):
        set_key(pid, "anthropic", f"key-{pid}", data_dir=tmp_path)
    store = AuthStore.for_data_dir(tmp_path, {})
    assert store.profile_ids("anthropic") == ["anthropic:a", "anthropic:b"]
    assert store.resolve(None, "anthropic", order=["anthropic:b"]).profile_id == "anthropic:b"
    assert store.remove("anthropic:b") and store.profile_ids("anthropic") == ["anthropic:a"]


def test_corrupt_file_error_does_not_quote_content(tmp_path: Path) -> None:
    path = tmp_path / "auth.json"
    path.write_text('{"profiles": {"x": {"key": "' + SECRET + '"')
    os.chmod(path, 0o600)
    with pytest.raises(Exception) as caught:
        AuthStore(path, {}).resolve("x", "anthropic")
    assert "not valid JSON" in str(caught.value) and SECRET not in str(caught.value)


GATEWAY_TOKEN = "cf-gateway-token-verysecret"


def test_gateway_settings_round_trip_and_never_show_in_reprs(tmp_path: Path) -> None:
    headers = {"cf-aig-authorization": f"Bearer {GATEWAY_TOKEN}", "X-Org": "team-a"}
    path = set_key(
        "gw:cf",
        "anthropic",
        SECRET,
        data_dir=tmp_path,
        auth_header="bearer",
        headers=headers,
    )
    stored = json.loads(path.read_text())["profiles"]["gw:cf"]
    assert stored["auth_header"] == "bearer" and stored["headers"] == headers
    store = AuthStore.for_data_dir(tmp_path, {})
    profile = store.profiles()["gw:cf"]
    assert (profile.auth_header, dict(profile.headers)) == ("bearer", headers)
    creds = store.resolve("gw:cf", "anthropic")
    assert (creds.auth_header, dict(creds.headers)) == ("bearer", headers)
    for shown in (repr(profile), repr(store.profiles()), repr(creds), str(creds)):
        assert GATEWAY_TOKEN not in shown and SECRET not in shown and "team-a" not in shown
        assert "cf-aig-authorization" in shown
    # An AGENTLANE_KEY_<P> override replaces the key and keeps the rest.
    overridden = AuthStore.for_data_dir(tmp_path, {env_variable_for("gw:cf"): "from-env"})
    creds = overridden.resolve("gw:cf", "anthropic")
    assert creds.api_key == "from-env" and dict(creds.headers) == headers
    # Setting a profile again replaces its settings rather than merging them.
    set_key("gw:cf", "anthropic", SECRET, data_dir=tmp_path)
    again = AuthStore.for_data_dir(tmp_path, {}).profiles()["gw:cf"]
    assert (again.auth_header, dict(again.headers)) == (None, {})


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ({"auth_header": "Bearer"}, ['profiles."gw:x".auth_header', "x-api-key, bearer, none"]),
        ({"headers": {"X Org": "a"}}, ['profiles."gw:x".headers', "'X Org'"]),
        ({"headers": {"X-Org": "bad\r\n" + GATEWAY_TOKEN}}, ["'X-Org'", "line break"]),
        ({"headers": {"X-Org": 5}}, ['profiles."gw:x".headers must be an object']),
        ({"headers": ["X-Org"]}, ['profiles."gw:x".headers must be an object']),
        ({"headers": {"X-Org": "env:GW_TOKEN"}}, ["only read from the config file"]),
    ],
)
def test_a_bad_profile_header_is_an_error_naming_the_path(
    tmp_path: Path, spec: dict[str, object], words: list[str]
) -> None:
    path = tmp_path / "auth.json"
    entry = {"provider": "openai", "key": SECRET, **spec}
    path.write_text(json.dumps({"profiles": {"gw:x": entry}}))
    os.chmod(path, 0o600)
    with pytest.raises(InvalidProfileError) as caught:
        AuthStore(path, {}).resolve("gw:x", "openai")
    message = str(caught.value)
    assert str(path) in message
    for word in words:
        assert word in message, message
    assert SECRET not in message and GATEWAY_TOKEN not in message


def test_set_key_refuses_bad_gateway_settings_before_writing(tmp_path: Path) -> None:
    with pytest.raises(InvalidProfileError, match="'X Org'"):
        set_key("gw:x", "openai", SECRET, data_dir=tmp_path, headers={"X Org": "a"})
    with pytest.raises(InvalidProfileError, match="auth_header"):
        set_key("gw:x", "openai", SECRET, data_dir=tmp_path, auth_header="basic")  # type: ignore[arg-type]
    assert not (tmp_path / "auth.json").exists()
