"""The auth store: keys in the store (sealed when encryption is on), env profiles, clear errors
that never show a key."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from activities.auth_store import (
    AuthStore,
    InvalidProfileError,
    MissingCredentialsError,
    env_variable_for,
    resolve_credentials,
    set_key,
)
from agentlane.settings import Settings

SECRET = "test-anthropic-key-verysecretvalue"


def test_set_key_stores_the_profile_in_a_private_store(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    where = set_key("anthropic:work", "anthropic", SECRET, data_dir=data_dir)
    assert str(data_dir / "agentlane.db") in where
    assert stat.S_IMODE((data_dir / "agentlane.db").stat().st_mode) == 0o600
    stored = AuthStore.for_data_dir(data_dir, {}).profiles()["anthropic:work"]
    assert (stored.provider, stored.type, stored.key) == ("anthropic", "api_key", SECRET)
    set_key("openai:main", "openai", "sk-openai-2", data_dir=data_dir, base_url="http://proxy/v1")
    assert set(AuthStore.for_data_dir(data_dir, {}).profiles()) == {
        "anthropic:work",
        "openai:main",
    }
    assert not (data_dir / "auth.json").exists()


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


def test_keys_are_sealed_at_rest_when_encryption_is_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import base64

    key = base64.b64encode(b"k" * 32).decode()
    monkeypatch.setenv("AGENTLANE_ENCRYPTION_KEYS", f"k1:{key}")
    store = AuthStore(Settings.from_env().model_copy(update={"data_dir": tmp_path}), {})
    store.set_key("anthropic:work", "anthropic", SECRET)
    assert store.resolve("anthropic:work", "anthropic").api_key == SECRET
    for file in tmp_path.iterdir():
        assert SECRET.encode() not in file.read_bytes(), file


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
    assert (
        "AGENTLANE_KEY_ANTHROPIC_PERSONAL" in message and str(tmp_path / "agentlane.db") in message
    )
    assert SECRET not in message and "sk-should-not-show" not in message
    with pytest.raises(MissingCredentialsError, match="ANTHROPIC_API_KEY"):
        AuthStore.for_data_dir(tmp_path / "none", {}).resolve("anthropic:env", "anthropic")
    with pytest.raises(MissingCredentialsError, match="No API key found for provider openai"):
        AuthStore.for_data_dir(tmp_path / "none", {}).resolve(None, "openai")
    # Whose environment was looked in: a key exported in a shell never reaches a worker.
    worker = AuthStore(Settings(data_dir=tmp_path / "none"), {}, env_where="worker pid 7 on h1")
    with pytest.raises(MissingCredentialsError, match=r"OPENAI_API_KEY \(unset in worker pid 7"):
        worker.resolve(None, "openai")
    with pytest.raises(MissingCredentialsError, match="belongs to provider"):
        store.resolve("anthropic:work", "openai")


def test_explicit_order_wins(tmp_path: Path) -> None:
    for pid in ("anthropic:a", "anthropic:b"):
        set_key(pid, "anthropic", f"key-{pid}", data_dir=tmp_path)
    store = AuthStore.for_data_dir(tmp_path, {})
    assert store.profile_ids("anthropic") == ["anthropic:a", "anthropic:b"]
    assert store.resolve(None, "anthropic", order=["anthropic:b"]).profile_id == "anthropic:b"
    assert store.remove("anthropic:b") and store.profile_ids("anthropic") == ["anthropic:a"]


def test_old_auth_file_is_imported(tmp_path: Path) -> None:
    from store.file_import import import_files
    from store.sync import run_sync

    (tmp_path / "auth.json").write_text(
        json.dumps({"profiles": {"x": {"provider": "anthropic", "key": SECRET}}})
    )
    run_sync(Settings(data_dir=tmp_path), lambda store: import_files(tmp_path, store))
    assert AuthStore.for_data_dir(tmp_path, {}).resolve("x", "anthropic").api_key == SECRET


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
    assert "agentlane.db" in path
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
    from store.models import ProfileRow
    from store.sync import run_sync

    # Written past set_key's checks (an imported file, a hand-edited row): read, it is refused.
    row = ProfileRow.model_validate({"id": "gw:x", "provider": "openai", "key": SECRET})
    if "auth_header" in spec:
        row.auth_header = str(spec["auth_header"])
    headers = spec.get("headers")
    row = row.model_construct(**{**row.__dict__, "headers": headers or {}})
    run_sync(Settings(data_dir=tmp_path), lambda store: store.put_profile(row))
    with pytest.raises(InvalidProfileError) as caught:
        AuthStore.for_data_dir(tmp_path, {}).resolve("gw:x", "openai")
    message = str(caught.value)
    assert str(tmp_path / "agentlane.db") in message
    for word in words:
        assert word in message, message
    assert SECRET not in message and GATEWAY_TOKEN not in message


def test_set_key_refuses_bad_gateway_settings_before_writing(tmp_path: Path) -> None:
    with pytest.raises(InvalidProfileError, match="'X Org'"):
        set_key("gw:x", "openai", SECRET, data_dir=tmp_path, headers={"X Org": "a"})
    with pytest.raises(InvalidProfileError, match="auth_header"):
        set_key("gw:x", "openai", SECRET, data_dir=tmp_path, auth_header="basic")  # type: ignore[arg-type]
    assert AuthStore.for_data_dir(tmp_path, {}).profiles() == {}
