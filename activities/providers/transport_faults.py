"""What a transport fault was, for the run to decide on and the user to read (issue 24).

A provider error with no HTTP answer (`ProviderError.transport`) is one of three kinds: nothing
listens at the URL (`connection_refused`), the connection broke or timed out before the answer
began (`connection`), or the answer began and broke off before its end (`stream_cut`). The run
workflow makes the call again within its wait budget; the kind and the host name what failed in
its warnings and its final message. Pure: no I/O.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from activities.providers.base import ProviderError
from agentlane.config import ApiKind
from agentlane.errors import TransportKind

# Where the official SDKs send a request when the model has no base URL.
DEFAULT_HOSTS: dict[str, str] = {
    "anthropic": "api.anthropic.com",
    "openai-chat": "api.openai.com",
    "openai-responses": "api.openai.com",
}
REFUSED_CODES = frozenset({"ECONNREFUSED"})


def transport_kind(err: ProviderError) -> TransportKind | None:
    """The kind of a transport fault; None for an error the server answered."""
    if not err.transport:
        return None
    if err.stream_started:
        return TransportKind.STREAM_CUT
    if err.code in REFUSED_CODES:
        return TransportKind.CONNECTION_REFUSED
    return TransportKind.CONNECTION


def endpoint_host(base_url: str | None, api: ApiKind | str) -> str:
    """`127.0.0.1:8080` or `api.anthropic.com`: the host (and port) a call goes to."""
    if base_url:
        parts = urlsplit(base_url if "//" in base_url else f"//{base_url}")
        if parts.netloc:
            return parts.netloc.rsplit("@", 1)[-1]  # never a user:password in a message
    return DEFAULT_HOSTS.get(str(api), "the provider's default endpoint")
