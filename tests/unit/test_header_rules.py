"""Header rules shared by the config file and the auth store, how a call's credentials are put
together from a model entry and a profile, and redaction of several secrets at once."""

from __future__ import annotations

import pytest

from activities.providers.base import Credentials
from activities.providers.call_credentials import HeaderVariableError, for_call
from activities.providers.request_headers import (
    NO_KEY_PLACEHOLDER,
    CallHeaders,
    call_headers,
    client_key,
)
from activities.providers.sdk_errors import REDACTED, redact
from agentlane.config import ModelEntry
from agentlane.headers import (
    AuthHeader,
    HeaderError,
    check_auth_header,
    check_headers,
    overlay,
)


@pytest.mark.parametrize(
    "name", ["X Org", "X-Org:", "", "Ünicode", "a(b)", "x{y}", "Content-Length", "host"]
)
def test_bad_names_are_refused(name: str) -> None:
    with pytest.raises(HeaderError):
        check_headers({name: "v"}, allow_env=False)


@pytest.mark.parametrize("value", ["a\r\nX-Injected: 1", "a\nb", "nul\x00", "é", "", "   "])
def test_bad_values_are_refused_without_being_quoted(value: str) -> None:
    with pytest.raises(HeaderError) as caught:
        check_headers({"X-Org": value}, allow_env=False)
    assert "X-Org" in str(caught.value)
    if value.strip():
        assert value not in str(caught.value)


def test_good_headers_pass() -> None:
    check_headers(
        {"X-Org": "team-a", "cf-aig-authorization": "Bearer abc\t123", "x_under": "!"},
        allow_env=False,
    )
    check_headers({"X-Token": "env:GW_TOKEN"}, allow_env=True)


def test_env_values_only_where_allowed_and_well_formed() -> None:
    with pytest.raises(HeaderError, match="only read from the config file"):
        check_headers({"X-Token": "env:GW_TOKEN"}, allow_env=False)
    with pytest.raises(HeaderError, match="does not name an environment variable"):
        check_headers({"X-Token": "env:1-BAD"}, allow_env=True)


def test_same_name_twice_in_other_case_is_refused() -> None:
    with pytest.raises(HeaderError, match="same header"):
        check_headers({"X-Org": "a", "x-org": "b"}, allow_env=False)


def test_auth_header_styles() -> None:
    assert check_auth_header(None) is None
    assert check_auth_header("bearer") == "bearer"
    with pytest.raises(HeaderError, match="x-api-key, bearer, none"):
        check_auth_header("Bearer")


def test_overlay_ignores_case_and_keeps_the_top_spelling() -> None:
    merged = overlay({"X-Route": "model", "X-Org": "a"}, {"x-route": "profile"})
    assert merged == {"X-Org": "a", "x-route": "profile"}


def test_redact_takes_several_secrets_longest_first() -> None:
    text = "key sk-long-secret-1234 and its prefix sk-long and header gw-token-987"
    out = redact(text, ["sk-long", "sk-long-secret-1234", None, "gw-token-987", "ab"])
    assert out == f"key {REDACTED} and its prefix {REDACTED} and header {REDACTED}"
    assert redact("ab cd", ["ab"]) == "ab cd"  # too short to scrub without wrecking the text


def test_credentials_secrets_and_repr() -> None:
    creds = Credentials(
        profile_id="gw:cf",
        api_key="sk-key-0001",
        auth_header="bearer",
        headers={"X-Org": "team-a", "cf-aig-authorization": "Bearer gw-token-0002"},
        public_headers=frozenset({"x-org"}),
    )
    # A "<scheme> <token>" value gives its token too: a server may echo the token alone.
    assert set(creds.secrets()) == {"sk-key-0001", "Bearer gw-token-0002", "gw-token-0002"}
    shown = repr(creds)
    for value in ("sk-key-0001", "gw-token-0002", "team-a"):
        assert value not in shown
    assert "cf-aig-authorization" in shown and "'bearer'" in shown


def _entry(**fields: object) -> ModelEntry:
    return ModelEntry.model_validate(
        {"provider": "gw", "id": "m", "api": "openai-compatible", **fields}
    )


def test_for_call_profile_wins_and_literals_are_public() -> None:
    entry = _entry(
        auth_header="x-api-key",
        headers={"X-Org": "team-a", "X-Route": "model", "X-Token": "env:GW_TOKEN"},
    )
    profile = Credentials(
        profile_id="gw:p",
        api_key="sk-0003",
        auth_header="bearer",
        headers={"x-route": "profile-secret"},
    )
    creds = for_call(entry, profile, {"GW_TOKEN": "env-secret-0004"})
    assert creds is not None
    assert creds.auth_header == "bearer"
    assert dict(creds.headers) == {
        "X-Org": "team-a",
        "X-Token": "env-secret-0004",
        "x-route": "profile-secret",
    }
    assert set(creds.secrets()) == {"sk-0003", "env-secret-0004", "profile-secret"}
    assert (creds.profile_id, creds.api_key) == ("gw:p", "sk-0003")


def test_for_call_entry_style_applies_without_a_profile_and_nothing_means_none() -> None:
    creds = for_call(_entry(auth_header="none"), None, {})
    assert creds is not None and creds.auth_header == "none" and creds.profile_id is None
    assert for_call(_entry(), None, {}) is None
    profile = Credentials(profile_id="p", api_key="k")
    assert for_call(_entry(), profile, {}) == profile


@pytest.mark.parametrize(("env", "state"), [({}, "is not set"), ({"GW_TOKEN": " "}, "is empty")])
def test_for_call_names_an_unset_variable(env: dict[str, str], state: str) -> None:
    with pytest.raises(HeaderVariableError) as caught:
        for_call(_entry(headers={"X-Token": "env:GW_TOKEN"}), None, env)
    message = str(caught.value)
    assert "GW_TOKEN" in message and state in message and "gw/m" in message


def test_for_call_refuses_an_unsendable_variable_without_quoting_it() -> None:
    with pytest.raises(HeaderVariableError) as caught:
        for_call(_entry(headers={"X-Token": "env:GW_TOKEN"}), None, {"GW_TOKEN": "sec\r\nret-0005"})
    assert "GW_TOKEN" in str(caught.value) and "ret-0005" not in str(caught.value)


OMIT = object()


@pytest.mark.parametrize(
    ("style", "client", "omitted"),
    [
        (None, {"X-Org": "a"}, ()),
        ("bearer", {"Authorization": "Bearer sk-0006", "X-Org": "a"}, ("x-api-key",)),
        ("x-api-key", {"x-api-key": "sk-0006", "X-Org": "a"}, ("authorization",)),
        ("none", {"X-Org": "a"}, ("authorization", "x-api-key")),
    ],
)
def test_call_headers_put_values_on_the_client_and_only_omits_on_requests(
    style: AuthHeader | None, client: dict[str, str], omitted: tuple[str, ...]
) -> None:
    creds = Credentials(
        profile_id="p", api_key="sk-0006", auth_header=style, headers={"X-Org": "a"}
    )
    headers = call_headers(creds)
    assert headers.client == client and headers.omitted == omitted
    # Requests carry no value at all: the anthropic SDK logs each request's headers at DEBUG.
    assert all(value is OMIT for value in headers.per_request(OMIT).values())
    # The SDK client holds the real key only when it sends its own auth header.
    assert client_key(creds) == ("sk-0006" if style is None else NO_KEY_PLACEHOLDER)


def test_an_own_authorization_header_is_not_omitted() -> None:
    creds = Credentials(
        profile_id="p", api_key="k", auth_header="none", headers={"authorization": "Basic x"}
    )
    headers = call_headers(creds)
    assert headers.client == {"authorization": "Basic x"} and headers.omitted == ("x-api-key",)
    assert call_headers(None) == CallHeaders() and client_key(None) == NO_KEY_PLACEHOLDER
