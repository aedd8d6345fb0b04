"""A 404 names the URL called and the missing path segment; a 401 that names a header points at
`auth_header` (issue 24)."""

from __future__ import annotations

from activities.providers.endpoint_hints import (
    auth_header_hint,
    called_url,
    not_found_hint,
    not_found_text,
)
from agentlane.config import ApiKind


def test_the_url_called_per_api() -> None:
    assert called_url(ApiKind.OPENAI_CHAT, "http://h:1/v1/") == "http://h:1/v1/chat/completions"
    assert called_url(ApiKind.OPENAI_RESPONSES, None) == "https://api.openai.com/v1/responses"
    assert called_url(ApiKind.ANTHROPIC, "http://h:1") == "http://h:1/v1/messages"
    assert called_url(ApiKind.OFFLINE, None) is None


def test_a_404_without_the_path_segment_suggests_it() -> None:
    assert not_found_text(
        "LLM request failed (HTTP 404): 404 Not Found", ApiKind.OPENAI_CHAT, "http://h:8000"
    ) == (
        "LLM request failed (HTTP 404): 404 Not Found (called http://h:8000/chat/completions). "
        'OpenAI-compatible servers usually serve under `/v1`: try base_url = "http://h:8000/v1".'
    )
    model_missing = not_found_text(
        "LLM request rejected: model: claude-x",
        ApiKind.ANTHROPIC,
        "http://h:1",
        raw='{"type":"not_found_error","message":"model: claude-x"}',
    )
    assert model_missing == "LLM request rejected: model: claude-x (called http://h:1/v1/messages)."
    assert not_found_hint(ApiKind.ANTHROPIC, "https://api.minimax.io") == (
        " Anthropic-compatible endpoints of other providers usually end in `/anthropic`: "
        'try base_url = "https://api.minimax.io/anthropic".'
    )
    assert not_found_hint(ApiKind.OPENAI_CHAT, "http://h:8000/v1") == ""
    assert not_found_hint(ApiKind.OPENAI_CHAT, "https://x.ai/api/v4") == ""
    assert not_found_hint(ApiKind.ANTHROPIC, "https://api.minimax.io/anthropic/") == ""
    assert not_found_hint(ApiKind.ANTHROPIC, None) == ""


def test_a_401_naming_a_header_suggests_auth_header() -> None:
    assert auth_header_hint("401 missing x-api-key header") == (
        ' The server wants the key in the `x-api-key` header: set `auth_header = "x-api-key"` '
        "on the model (or its auth profile) in the config."
    )
    assert '`auth_header = "bearer"`' in auth_header_hint("Missing 'Authorization' header")
    assert '"api-key" = "env:' in auth_header_hint("no api-key header found")
    assert auth_header_hint("invalid x-api-key") == ""
