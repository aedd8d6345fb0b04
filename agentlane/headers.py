"""What a gateway or proxy in front of a provider may need: how the key is sent (the auth header
style) and extra headers sent with every call. Model entries (config file) and auth profiles
(auth store) both carry them; this module holds the rules both apply. No I/O: an `env:NAME`
value is only recognised here and is read inside the model-call activity.

Messages never quote a header value: a value can be a secret (a gateway token), and even a
literal from the config file has no business in a log line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Literal, get_args

# `x-api-key`: `x-api-key: <key>`; `bearer`: `Authorization: Bearer <key>`; `none`: no auth
# header at all, even when a key is known. Unset means whatever the provider's SDK sends.
AuthHeader = Literal["x-api-key", "bearer", "none"]
AUTH_HEADER_STYLES: tuple[AuthHeader, ...] = get_args(AuthHeader)
AUTH_HEADER_NAMES = ("authorization", "x-api-key")

ENV_PREFIX = "env:"

# RFC 7230 §3.2.6 token characters.
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
# Printable ASCII, space and tab: what every HTTP stack sends unchanged (no CR/LF, so no
# header injection; no non-ASCII, which some stacks reject or re-encode).
_VALUE = re.compile(r"[\t\x20-\x7e]*")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Set by the HTTP client from the request itself; a second copy would corrupt the request.
_RESERVED = frozenset({"content-length", "transfer-encoding", "host", "connection"})


class HeaderError(ValueError):
    """A header name or value that cannot be sent; the message never contains the value."""


def check_name(name: str) -> None:
    if not _TOKEN.fullmatch(name):
        raise HeaderError(
            f"header name {name!r} is not valid: use letters, digits and !#$%&'*+-.^_`|~ only"
        )
    if name.lower() in _RESERVED:
        raise HeaderError(f"header {name!r} is set by the HTTP client and cannot be configured")


def check_value(name: str, value: str, *, allow_env: bool) -> None:
    if not value.strip():
        raise HeaderError(f"header {name!r} has an empty value")
    if not _VALUE.fullmatch(value):
        raise HeaderError(
            f"header {name!r} has a value with a line break, a control or a non-ASCII character"
        )
    variable = env_variable(value)
    if variable is None:
        return
    if not allow_env:
        raise HeaderError(f"header {name!r}: 'env:' values are only read from the config file")
    if not _ENV_NAME.fullmatch(variable):
        raise HeaderError(
            f"header {name!r}: env:{variable} does not name an environment variable "
            "(env:NAME, NAME made of letters, digits and _)"
        )


def check_headers(headers: Mapping[str, str], *, allow_env: bool) -> None:
    seen: dict[str, str] = {}
    for name, value in headers.items():
        check_name(name)
        check_value(name, value, allow_env=allow_env)
        earlier = seen.setdefault(name.lower(), name)
        if earlier != name:
            raise HeaderError(f"headers {earlier!r} and {name!r} are the same header")


def check_auth_header(style: object) -> AuthHeader | None:
    if style is None:
        return None
    for known in AUTH_HEADER_STYLES:
        if style == known:
            return known
    raise HeaderError(f"auth_header must be one of {', '.join(AUTH_HEADER_STYLES)}, not {style!r}")


def env_variable(value: str) -> str | None:
    """`NAME` for a value `env:NAME`, else None."""
    return value[len(ENV_PREFIX) :].strip() if value.startswith(ENV_PREFIX) else None


def overlay(base: Mapping[str, str], top: Mapping[str, str]) -> dict[str, str]:
    """`base` with `top` over it, header names compared without case (top's spelling kept)."""
    replaced = {name.lower() for name in top}
    merged = {name: value for name, value in base.items() if name.lower() not in replaced}
    merged.update(top)
    return merged
