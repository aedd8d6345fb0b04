"""Webhook targets inside the network are refused (issue 19), at accept time for literal
addresses and at connect time for names, on the address actually connected to. No traffic
leaves the machine: names are answered by a resolver stub, receivers listen on loopback."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from activities.webhook_connect import post_pinned
from agentlane.config import ConfigError, build_config
from agentlane.webhook_targets import (
    TargetRefused,
    WebhookPolicy,
    check_callback_target,
    resolve_target,
)
from agentlane.webhooks import InvalidWebhook

CLOSED = WebhookPolicy()


@pytest.mark.parametrize(
    "url",
    [
        "http://10.0.0.1/",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::ffff:10.0.0.1]/",
        "http://[::ffff:a00:1]/",
        "http://[2002:a00:1::1]/",  # 6to4 of 10.0.0.1
        "http://[64:ff9b::a9fe:a9fe]/",  # NAT64 of 169.254.169.254
        "http://127.0.0.1:8080/hook",
        "http://[::1]:9000/",
        "http://0.0.0.0/",
        "http://[::]/",
        "http://224.0.0.1/",
        "http://[ff02::1]/",
        "http://[fe80::1]/",
        "http://[fd00::1]/",
        "http://192.168.1.1/",
        "http://172.16.0.1/",
        "http://100.64.0.1/",
        "http://240.0.0.1/",
        "http://2130706433/",  # 127.0.0.1 as one number
        "http://127.1/",
    ],
)
def test_literal_addresses_inside_the_network_are_refused(url: str) -> None:
    with pytest.raises(InvalidWebhook, match="allow_private"):
        check_callback_target(url, CLOSED)
    check_callback_target(url, WebhookPolicy(allow_private=True))


def test_public_and_named_targets_pass_at_accept_time() -> None:
    for url in ["https://93.184.216.34/x", "https://hooks.example.com/x", "http://localhost/"]:
        check_callback_target(url, CLOSED)


def test_an_allowed_network_lets_its_addresses_through_only() -> None:
    policy = WebhookPolicy(allow=["10.1.0.0/16", "hooks.internal"])
    check_callback_target("http://10.1.2.3/", policy)
    check_callback_target("http://[::ffff:10.1.2.3]/", policy)
    with pytest.raises(InvalidWebhook):
        check_callback_target("http://10.2.0.1/", policy)


def stub(table: dict[str, list[str]]) -> Any:
    asked: list[str] = []

    async def resolve(host: str, port: int) -> list[str]:
        asked.append(host)
        return table[host]

    resolve.asked = asked  # type: ignore[attr-defined]
    return resolve


async def test_names_resolving_inside_the_network_are_refused() -> None:
    resolver = stub(
        {
            "evil.example": ["10.0.0.5"],
            "mixed.example": ["93.184.216.34", "127.0.0.1"],
            "mapped.example": ["::ffff:169.254.169.254"],
            "good.example": ["93.184.216.34"],
            "hooks.internal": ["10.9.9.9"],
        }
    )
    for host, shown in [
        ("evil.example", "10.0.0.5, a private address"),
        ("mixed.example", "127.0.0.1, a loopback address"),
        ("mapped.example", "link-local"),
    ]:
        with pytest.raises(TargetRefused, match=shown):
            await resolve_target(host, 443, CLOSED, resolver)
    assert str(await resolve_target("good.example", 443, CLOSED, resolver)) == "93.184.216.34"
    allowed = WebhookPolicy(allow=["hooks.internal"])
    assert str(await resolve_target("hooks.internal", 80, allowed, resolver)) == "10.9.9.9"
    with pytest.raises(TargetRefused):
        await resolve_target("evil.example", 80, allowed, resolver)


class Hits:
    def __init__(self) -> None:
        self.hosts: list[str] = []


@pytest.fixture
def loopback() -> Iterator[tuple[int, Hits]]:
    hits = Hits()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            hits.hosts.append(self.headers.get("Host", ""))
            if self.path == "/redirect":
                self.send_response(302)
                self.send_header("Location", "http://169.254.169.254/")
            else:
                self.send_response(500)
            body = b"internal secret reply"
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1], hits
    server.shutdown()
    server.server_close()


async def test_the_connection_goes_to_the_checked_address_with_the_original_host(
    loopback: tuple[int, Hits],
) -> None:
    port, hits = loopback
    # The name resolves once, to loopback (allowed here by network); the HTTP client never
    # looks it up itself (it could not: the name exists only in the stub).
    resolver = stub({"hooks.test": ["127.0.0.1"]})
    policy = WebhookPolicy(allow=["127.0.0.0/8"])
    async with httpx.AsyncClient() as http:
        response = await post_pinned(
            http,
            f"http://hooks.test:{port}/hook",
            b"{}",
            {},
            policy,
            post_timeout=5,
            resolver=resolver,
        )
        assert response.status_code == 500
        assert hits.hosts == [f"hooks.test:{port}"]
        assert resolver.asked == ["hooks.test"]
        # Redirects are not followed: the 302 is the answer.
        redirected = await post_pinned(
            http,
            f"http://hooks.test:{port}/redirect",
            b"{}",
            {},
            policy,
            post_timeout=5,
            resolver=resolver,
        )
        assert redirected.status_code == 302 and len(hits.hosts) == 2


async def test_a_rebound_name_is_refused_before_any_connection(loopback: tuple[int, Hits]) -> None:
    port, hits = loopback
    resolver = stub({"rebind.test": ["127.0.0.1"]})
    async with httpx.AsyncClient() as http:
        with pytest.raises(TargetRefused, match="loopback"):
            await post_pinned(
                http,
                f"http://rebind.test:{port}/",
                b"{}",
                {},
                CLOSED,
                post_timeout=5,
                resolver=resolver,
            )
    assert hits.hosts == []


def test_the_config_section_is_read_and_checked() -> None:
    config = build_config({"webhooks": {"allow": ["10.1.0.0/16", "Hooks.Internal"]}}, {})
    assert config.webhooks.hosts() == {"hooks.internal"}
    assert not config.webhooks.allow_private
    with pytest.raises(ConfigError, match=r"webhooks\.allow"):
        build_config({"webhooks": {"allow": ["http://x y"]}}, {}, source="c.toml")
    with pytest.raises(ConfigError, match="unknown key webhooks.allow_privat"):
        build_config({"webhooks": {"allow_privat": True}}, {}, source="c.toml")


def _self_signed(tmp: Any, name: str) -> tuple[str, str]:
    """A certificate for `name` (and no address), with its key, as PEM files."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp / "cert.pem", tmp / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return str(cert_path), str(key_path)


async def test_https_to_the_checked_address_verifies_the_name(tmp_path: Any) -> None:
    """Connecting to the address leaves TLS checking the URL's name (SNI and certificate)."""
    import ssl

    cert, key = _self_signed(tmp_path, "hooks.test")
    hits: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            hits.append(self.headers.get("Host", ""))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert, key)
    server.socket = tls.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    trust = ssl.create_default_context(cafile=cert)
    policy = WebhookPolicy(allow=["127.0.0.0/8"])
    try:
        async with httpx.AsyncClient(verify=trust) as http:
            ok = await post_pinned(
                http,
                f"https://hooks.test:{port}/h",
                b"{}",
                {},
                policy,
                post_timeout=5,
                resolver=stub({"hooks.test": ["127.0.0.1"]}),
            )
            assert ok.status_code == 204 and hits == [f"hooks.test:{port}"]
            # The same address under another name: the certificate does not match it.
            with pytest.raises(httpx.ConnectError):
                await post_pinned(
                    http,
                    f"https://other.test:{port}/h",
                    b"{}",
                    {},
                    policy,
                    post_timeout=5,
                    resolver=stub({"other.test": ["127.0.0.1"]}),
                )
    finally:
        server.shutdown()
        server.server_close()
