"""The headers a call sends on top of what the SDK sends: the auth header in the chosen style and
the extra headers of the model entry and the profile.

Their values go on the SDK client (`default_headers`), never on a request: the anthropic SDK logs
each request's options, headers included, at DEBUG. What goes with each request (`extra_headers`)
is only the SDK's `Omit` for an auth header the call must not send; the OpenAI SDK accepts a
missing `Authorization` only when it is omitted there. With no style chosen the SDK's own auth
header is left alone (today `Authorization: Bearer <key>` from both SDKs). Extra headers come
after the auth header, so one named like it (a gateway wanting `Authorization: Basic ...` with
style `none`) is sent as written.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from activities.providers.base import Credentials
from agentlane.headers import AUTH_HEADER_NAMES, overlay

# What an SDK client is built with when it must not have the key (it would send it) or there is
# none (the SDK would look in the environment, and send OpenAI's key to a foreign server).
NO_KEY_PLACEHOLDER = "no-key"


@dataclass(frozen=True)
class CallHeaders:
    # Given to the SDK client; the values may be secrets.
    client: dict[str, str] = field(default_factory=dict)
    # Lower-cased auth header names the SDK must not send.
    omitted: tuple[str, ...] = ()

    def cache_key(self) -> Hashable:
        return (tuple(sorted(self.client.items())), self.omitted)

    def per_request(self, omit: Any) -> dict[str, Any]:
        """`extra_headers` for each request; `omit` is the SDK's own `Omit` sentinel."""
        return dict.fromkeys(self.omitted, omit)


def client_key(credentials: Credentials | None) -> str:
    """The key an SDK client is built with: the real one only when the SDK's own auth header is
    the one sent, so with any chosen style the SDK never holds it."""
    if credentials is None or credentials.auth_header is not None or not credentials.api_key:
        return NO_KEY_PLACEHOLDER
    return credentials.api_key


def call_headers(credentials: Credentials | None) -> CallHeaders:
    if credentials is None:
        return CallHeaders()
    key = credentials.api_key
    style = credentials.auth_header
    auth: dict[str, str] = {}
    if style == "bearer" and key:
        auth = {"Authorization": f"Bearer {key}"}
    elif style == "x-api-key" and key:
        auth = {"x-api-key": key}
    # `none`, or a style with no key to send: no auth header rather than a made-up one.
    client = overlay(auth, credentials.headers)
    if style is None:
        return CallHeaders(client=client)
    sent = {name.lower() for name in client}
    return CallHeaders(client=client, omitted=tuple(n for n in AUTH_HEADER_NAMES if n not in sent))
