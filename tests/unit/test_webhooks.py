"""Webhook contracts: callback URL checks, secret references, signatures (issue 11)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentlane.messages import InboundMessage, Routing, check_inbound
from agentlane.webhook_secrets import SecretMissing, WebhookSecretStore
from agentlane.webhooks import (
    InvalidWebhook,
    check_callback_url,
    check_secret_ref,
    default_secret_ref,
    signature_header,
)
from clients.gateway.webhooks import WebhookVerificationError, verify, verify_request


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080/hook",
        "http://localhost/hook",
        "https://example.com/a/b?x=1",
        "http://[::1]:9000/",
    ],
)
def test_good_callback_urls(url: str) -> None:
    assert check_callback_url(url) == url
    assert Routing(callback_url=url).callback_url == url


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("ftp://example.com/x", "http:// or https://"),
        ("example.com/x", "no scheme"),
        ("https://u:p@example.com/", "user or password"),
        ("https:///x", "no host"),
        ("https://example.com/#frag", "fragment"),
        ("https://exa mple.com/", "whitespace"),
        ("http://example.com:99999/", "not a valid URL"),
        ("https://example.com/" + "a" * 3000, "limit"),
    ],
)
def test_bad_callback_urls_say_why(url: str, why: str) -> None:
    with pytest.raises(InvalidWebhook, match=why):
        check_callback_url(url)
    with pytest.raises(ValueError, match=why):
        Routing(callback_url=url)


def test_secret_refs() -> None:
    assert check_secret_ref("tok-1.a_b") == "tok-1.a_b"
    for bad in ["", "../x", ".hidden", "a/b", "x" * 65]:
        with pytest.raises(InvalidWebhook):
            check_secret_ref(bad)
    ref = default_secret_ref("chat:alice")
    assert check_secret_ref(ref) == ref != default_secret_ref("chat:bob")


def test_secret_without_url_is_refused() -> None:
    msg = InboundMessage(text="hi", routing=Routing(callback_secret_ref="tok"))
    with pytest.raises(ValueError, match="no callback_url"):
        check_inbound(msg)


def test_secret_store_is_private_and_stable(tmp_path: Path) -> None:
    store = WebhookSecretStore(tmp_path)
    with pytest.raises(SecretMissing):
        store.get("tok")
    first = store.ensure("tok")
    assert store.ensure("tok") == first and len(first) == 64
    assert (tmp_path / "agentlane.db").stat().st_mode & 0o777 == 0o600
    assert store.rotate("tok") != first


def _body(**extra: object) -> bytes:
    return json.dumps(
        {"id": "r/1", "kind": "final_reply", "session_key": "k", "run_id": "r", "ts": 1.0} | extra
    ).encode()


def test_verify_accepts_a_good_signature_and_refuses_tampering() -> None:
    secret, body = b"s3cret", _body(text="hello")
    header = signature_header(secret, 1000, body)
    parsed = verify(secret, body, header, now=1010)
    assert parsed.id == "r/1" and parsed.text == "hello"
    assert verify_request(
        "s3cret\n", body, {"x-agentlane-signature": header}, tolerance_seconds=None
    )
    with pytest.raises(WebhookVerificationError, match="does not match"):
        verify(secret, _body(text="hellO"), header, now=1010)
    with pytest.raises(WebhookVerificationError, match="does not match"):
        verify(b"other", body, header, now=1010)
    with pytest.raises(WebhookVerificationError, match="old"):
        verify(secret, body, header, now=5000)
    with pytest.raises(WebhookVerificationError, match="lacks"):
        verify(secret, body, "t=1000", now=1010)
    with pytest.raises(WebhookVerificationError, match="no X-Agentlane-Signature"):
        verify(secret, body, None)
    with pytest.raises(WebhookVerificationError, match="does not match the body's id"):
        verify_request(
            secret,
            body,
            {"X-Agentlane-Signature": header, "X-Agentlane-Id": "r/2"},
            tolerance_seconds=None,
        )
