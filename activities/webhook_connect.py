"""One webhook POST to the address that was checked (issue 19, `agentlane/webhook_targets.py`).

The callback's host is resolved once and every address checked; the request then goes to that
address itself, with the URL's host in the `Host` header and as the TLS server name (SNI and
certificate check), so a second lookup by the HTTP client (which a DNS rebinding could answer
with an internal address) never happens. Redirects are not followed: a 3xx is a failed attempt.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit, urlunsplit

import httpx

from agentlane.webhook_targets import Resolver, WebhookPolicy, resolve_target, system_resolver


async def post_pinned(
    http: httpx.AsyncClient,
    url: str,
    content: bytes,
    headers: dict[str, str],
    policy: WebhookPolicy,
    *,
    post_timeout: float,
    resolver: Resolver = system_resolver,
) -> httpx.Response:
    """POST to `url` through the checked address; raises `TargetRefused` for a host the
    policy refuses, `OSError` when it cannot be resolved, `httpx.HTTPError` on transport
    faults."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    ip = await resolve_target(host, port, policy, resolver)
    literal = f"[{ip}]" if isinstance(ip, ipaddress.IPv6Address) else str(ip)
    netloc = f"{literal}:{parts.port}" if parts.port else literal
    pinned = urlunsplit((parts.scheme, netloc, parts.path or "/", parts.query, ""))
    host_header = parts.netloc.rpartition("@")[2]
    extensions = {"sni_hostname": host} if parts.scheme == "https" else {}
    request = http.build_request(
        "POST",
        pinned,
        content=content,
        headers={**headers, "Host": host_header},
        timeout=post_timeout,
        extensions=extensions,
    )
    return await http.send(request, follow_redirects=False)
