"""What to change when a provider's answer says the endpoint or the auth header is wrong.

A base URL without its path segment (`/v1` for OpenAI-compatible servers, `/anthropic` for
the Anthropic-compatible endpoints of other providers) gets a bare "404 Not Found"; a gateway
that wants the key in another header answers "missing x-api-key header". Both are
configuration mistakes a user fixes in one line, so the message names the URL called and the
setting to change (issue 24). Pure: no I/O.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from agentlane.config import ApiKind

_OPENAI_DEFAULT = "https://api.openai.com/v1"
_ANTHROPIC_DEFAULT = "https://api.anthropic.com"
_PATHS = {
    ApiKind.ANTHROPIC: "/v1/messages",
    ApiKind.OPENAI_CHAT: "/chat/completions",
    ApiKind.OPENAI_COMPATIBLE: "/chat/completions",
    ApiKind.OPENAI_RESPONSES: "/responses",
}
# "missing x-api-key header", "Missing 'Authorization' header", "no api-key header found".
_HEADER_NAMED = re.compile(
    r"\b(x-api-key|authorization|api-key)\b['\"`]?\s+header|header\s+['\"`]?(x-api-key|authorization|api-key)\b"
)
_STYLES = {"x-api-key": "x-api-key", "authorization": "bearer"}


def called_url(api: ApiKind, base_url: str | None) -> str | None:
    """The URL the SDK posts to for `api` with this base URL (None: no HTTP API)."""
    path = _PATHS.get(api)
    if path is None:
        return None
    default = _ANTHROPIC_DEFAULT if api is ApiKind.ANTHROPIC else _OPENAI_DEFAULT
    return (base_url or default).rstrip("/") + path


def not_found_hint(api: ApiKind, base_url: str | None) -> str:
    """The path segment a 404's base URL probably lacks, as the line to write ('' if none)."""
    if not base_url:
        return ""
    base = base_url.rstrip("/")
    path = urlsplit(base).path
    if api is ApiKind.ANTHROPIC:
        if path.endswith("/anthropic") or urlsplit(base).hostname == "api.anthropic.com":
            return ""
        return (
            " Anthropic-compatible endpoints of other providers usually end in `/anthropic`: "
            f'try base_url = "{base}/anthropic".'
        )
    if re.search(r"/v\d+[a-z0-9]*$", path):
        return ""
    return f' OpenAI-compatible servers usually serve under `/v1`: try base_url = "{base}/v1".'


def not_found_text(message: str, api: ApiKind, base_url: str | None, raw: str = "") -> str:
    """A 404's message with the URL called and, unless the provider's own words (`raw`) say
    the model is what was not found, the path segment the base URL probably lacks."""
    url = called_url(api, base_url)
    where = f" (called {url})" if url else ""
    hint = "" if "model" in raw.lower() else not_found_hint(api, base_url)
    return f"{message.rstrip()}{where}.{hint}".replace("..", ".")


def auth_header_hint(message: str) -> str:
    """For an auth error that names the header the server wanted: the `auth_header` setting
    that sends the key there ('' when the message names none)."""
    found = _HEADER_NAMED.search(message.lower())
    if found is None:
        return ""
    header = found.group(1) or found.group(2)
    style = _STYLES.get(header)
    if style is None:  # a header of its own name (Azure's `api-key`): sent as a plain header
        return (
            f' The server wants the key in the `{header}` header: set `auth_header = "none"` '
            f'and `headers = {{ "{header}" = "env:YOUR_KEY_VARIABLE" }}` on the model in the '
            "config."
        )
    return (
        f' The server wants the key in the `{header}` header: set `auth_header = "{style}"` '
        "on the model (or its auth profile) in the config."
    )
