"""Which hosts a session may POST its webhooks to (issue 19): not inside the network.

Any gateway token holder names a callback URL; without a check, a URL such as
`http://169.254.169.254/latest/meta-data/` or `http://10.0.0.1/` would make the worker send
requests into the operator's network. So private, loopback, link-local, multicast, unspecified
and reserved addresses (IPv4, IPv6, and IPv4 written inside IPv6) are refused unless the
operator allows them in the config file:

    [webhooks]
    allow_private = true                          # any address (a local adapter, tests)
    allow = ["hooks.internal", "10.1.0.0/16"]     # or these hosts and networks only

The check runs twice: when a message names the URL (a literal address is refused at once, with
a 4xx) and when the worker connects (`activities/webhook_connect.py`): the name is resolved
once, every address it resolves to is checked, and the connection goes to that checked address
(no second lookup a DNS rebinding could answer differently).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agentlane.webhooks import InvalidWebhook

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
# (host, port) -> the addresses it resolves to, as text.
Resolver = Callable[[str, int], Awaitable[list[str]]]

ALLOW_HINT = (
    "an operator may allow it in the config file: [webhooks] allow_private = true, "
    'or allow = ["<host>", "<network>/<bits>"]'
)


class WebhookPolicy(BaseModel):
    """`[webhooks]` of the config file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    allow_private: bool = False
    # Host names (exact, any case) and networks ("10.1.0.0/16", "fd00::/8", "127.0.0.1").
    allow: list[str] = Field(default_factory=list)

    @field_validator("allow")
    @classmethod
    def _entries(cls, entries: list[str]) -> list[str]:
        for entry in entries:
            if _as_network(entry) is None and not _is_host_name(entry):
                raise ValueError(
                    f"{entry!r} is neither a host name nor a network such as 10.1.0.0/16"
                )
        return [e.strip().lower() for e in entries]

    def networks(self) -> list[IPNetwork]:
        return [n for n in (_as_network(e) for e in self.allow) if n is not None]

    def hosts(self) -> set[str]:
        return {e.rstrip(".") for e in self.allow if _as_network(e) is None}


def _as_network(entry: str) -> IPNetwork | None:
    try:
        return ipaddress.ip_network(entry.strip(), strict=False)
    except ValueError:
        return None


def _is_host_name(entry: str) -> bool:
    name = entry.strip().rstrip(".")
    labels = name.split(".")
    return (
        bool(name)
        and len(name) <= 253
        and all(
            0 < len(label) <= 63 and label.replace("-", "").replace("_", "").isalnum()
            for label in labels
        )
    )


_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


def _unwrap(ip: IPAddress) -> IPAddress:
    """An IPv6 address that carries an IPv4 one is judged as that IPv4 address: mapped
    (::ffff:10.0.0.1), 6to4 (2002:a00:1::) and NAT64 (64:ff9b::10.0.0.1) forms."""
    if not isinstance(ip, ipaddress.IPv6Address):
        return ip
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip


def forbidden_reason(ip: IPAddress) -> str | None:
    """Why a webhook must not go to `ip` by default, or None for a public address."""
    ip = _unwrap(ip)
    for test, what in (
        (ip.is_unspecified, "an unspecified address"),
        (ip.is_loopback, "a loopback address"),
        (ip.is_link_local, "a link-local address"),
        (ip.is_multicast, "a multicast address"),
        (ip.is_private, "a private address"),
        (ip.is_reserved, "a reserved address"),
        (isinstance(ip, ipaddress.IPv6Address) and ip.is_site_local, "a site-local address"),
    ):
        if test:
            return what
    if not ip.is_global:
        return "not a public address"
    return None


def address_allowed(ip: IPAddress, policy: WebhookPolicy) -> str | None:
    """None if a webhook may go to `ip` under `policy`, else why not."""
    reason = forbidden_reason(ip)
    if reason is None or policy.allow_private:
        return None
    plain = _unwrap(ip)
    if any(plain in net or ip in net for net in policy.networks()):
        return None
    return reason


def literal_address(host: str) -> IPAddress | None:
    """The address `host` spells (also the short IPv4 forms a resolver accepts, such as
    `2130706433` or `127.1`), without any lookup; None for a name."""
    host = host.strip("[]")
    try:
        return ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, flags=socket.AI_NUMERICHOST)
    except (socket.gaierror, UnicodeError, ValueError):
        return None
    return ipaddress.ip_address(str(infos[0][4][0]).split("%", 1)[0]) if infos else None


def check_callback_target(url: str, policy: WebhookPolicy) -> None:
    """At accept time: refuse a callback URL whose host is a literal address the policy does
    not allow (`InvalidWebhook`). Names are checked when the worker connects."""
    host = urlsplit(url).hostname or ""
    ip = literal_address(host)
    if ip is None:
        return
    reason = address_allowed(ip, policy)
    if reason is not None:
        raise InvalidWebhook(
            f"callback URL {url!r} points at {ip}, {reason}: webhooks are not sent inside the "
            f"network ({ALLOW_HINT})"
        )


async def system_resolver(host: str, port: int) -> list[str]:
    import asyncio

    infos = await asyncio.get_running_loop().getaddrinfo(
        host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
    )
    return [str(info[4][0]) for info in infos]


class TargetRefused(Exception):
    """The callback's host is, or resolves to, an address the policy does not allow."""


async def resolve_target(
    host: str, port: int, policy: WebhookPolicy, resolver: Resolver = system_resolver
) -> IPAddress:
    """The one address to connect to for `host`: resolved once, and refused (`TargetRefused`)
    if any address it resolves to is not allowed (a name that answers with one public and one
    private address is refused, whichever a client would pick). A host on the policy's allow
    list may resolve anywhere."""
    ip = literal_address(host)
    if ip is not None:
        reason = address_allowed(ip, policy)
        if reason is not None:
            raise TargetRefused(f"callback host {ip} is {reason}; {ALLOW_HINT}")
        return ip
    try:
        answers = await resolver(host, port)
    except (OSError, UnicodeError) as err:
        raise OSError(f"cannot resolve callback host {host!r}: {err}") from err
    addresses = [ipaddress.ip_address(a.split("%", 1)[0]) for a in answers]
    if not addresses:
        raise OSError(f"callback host {host!r} resolves to no address")
    if host.lower().rstrip(".") not in policy.hosts():
        for ip in addresses:
            reason = address_allowed(ip, policy)
            if reason is not None:
                raise TargetRefused(
                    f"callback host {host!r} resolves to {ip}, {reason}; {ALLOW_HINT}"
                )
    return addresses[0]
