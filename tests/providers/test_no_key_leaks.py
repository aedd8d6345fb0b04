"""No key string ever appears in a ProviderError's message or repr, nor in Credentials' repr."""

from __future__ import annotations

import pytest

from activities.providers.base import Credentials, ProviderError
from tests.fakes.provider_server import FakeProviderServer
from tests.fakes.scripts import Fault, Reply
from tests.providers.conftest import collect, provider_for, request_for

# The server accepts exactly these keys, so a scripted fault is answered to a *valid* key too.
KEYS = {
    "anthropic/claude-haiku-4-5": "test-key-LEAKCHECK-anthropic-0123456789",
    "openai/gpt-4.1": "sk-proj-LEAKCHECK-openai-chat-0123456789",
    "openai/gpt-5": "sk-proj-LEAKCHECK-openai-resp-0123456789",
}
FAULTS = [
    Fault.http(401),
    Fault.http(402),
    Fault.http(403),
    Fault.http(429, retry_after=1),
    Fault.http(500),
    Fault.http(503),
    Fault.http(529),
    Fault.named("context_overflow"),
    Fault.named("thinking_unsupported"),
    Fault.drop(1),
    Fault.truncate(1),
    Fault.stream_error("overloaded", 1),
]


def _assert_clean(err: ProviderError, key: str) -> None:
    for text in (err.message, str(err), repr(err), repr(err.__dict__)):
        assert key not in text
        assert key[-10:] not in text  # not even the tail a masked key would show


def test_credentials_repr_hides_the_key() -> None:
    creds = Credentials(profile_id="anthropic:work", api_key="sk-ant-visible?")
    assert "sk-ant-visible?" not in repr(creds) and "anthropic:work" in repr(creds)
    assert "sk-ant-visible?" not in str(creds)


@pytest.mark.parametrize("ref", sorted(KEYS))
async def test_no_key_in_any_provider_error(server: FakeProviderServer, ref: str) -> None:
    key = KEYS[ref]
    server.set_keys(anthropic=[KEYS["anthropic/claude-haiku-4-5"]], openai=list(KEYS.values()))
    model = ref.split("/", 1)[1]
    provider = provider_for(server, ref)
    errors = 0
    for fault in FAULTS:
        server.script(Reply(text="some text", fault=fault))
        with pytest.raises(ProviderError) as caught:
            await collect(provider, request_for(model), key)
        _assert_clean(caught.value, key)
        errors += 1
    # A wrong key, which OpenAI echoes back masked.
    wrong = key.replace("LEAKCHECK", "WRONGKEY0")
    with pytest.raises(ProviderError) as caught:
        await collect(provider, request_for(model), wrong)
    assert caught.value.status == 401
    _assert_clean(caught.value, wrong)
    assert errors == len(FAULTS)
