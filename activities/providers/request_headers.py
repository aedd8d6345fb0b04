"""The headers a call sends on top of what the SDK sends: the auth header in the chosen style and
the extra headers of the model entry and the profile.

They go with each request (`extra_headers=`), the layer both SDKs apply last, where an `Omit`
removes a header the SDK would otherwise add; the OpenAI SDK honours an omitted `Authorization`
only there. With no style chosen the SDK's own auth header is left alone (today: `Authorization:
Bearer <key>` from both SDKs). Extra headers come last, so a header named like an auth header
(a gateway wanting `Authorization: Basic ...` with style `none`) is sent as written.
"""

from __future__ import annotations

from typing import Any

from activities.providers.base import Credentials
from agentlane.headers import overlay

# What an SDK client is built with when there is no key to give it, or none to send: servers
# that take no key ignore it.
NO_KEY_PLACEHOLDER = "no-key"
_AUTHORIZATION = "Authorization"
_X_API_KEY = "x-api-key"


def client_key(credentials: Credentials | None) -> str:
    """The key an SDK client is built with. Always something, or the SDK would look for one in
    the environment (and send OpenAI's key to a foreign server); with style `none` the
    placeholder, so the real key cannot go out at all."""
    if credentials is None or credentials.auth_header == "none" or not credentials.api_key:
        return NO_KEY_PLACEHOLDER
    return credentials.api_key


def request_headers(credentials: Credentials | None, omit: Any) -> dict[str, Any]:
    """`extra_headers` for one request; `omit` is the SDK's own `Omit` sentinel."""
    if credentials is None:
        return {}
    key = credentials.api_key
    style = credentials.auth_header
    auth: dict[str, Any] = {}
    if style == "bearer" and key:
        auth = {_AUTHORIZATION: f"Bearer {key}", _X_API_KEY: omit}
    elif style == "x-api-key" and key:
        auth = {_X_API_KEY: key, _AUTHORIZATION: omit}
    elif style is not None:
        # `none`, or a style with no key to send: no auth header rather than a made-up one.
        auth = {_AUTHORIZATION: omit, _X_API_KEY: omit}
    return overlay(auth, credentials.headers)
