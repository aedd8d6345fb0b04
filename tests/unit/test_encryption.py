"""Payload encryption: round trip, rotation, unknown keys, bad key files."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.api.common.v1 import Payload

from agentlane.encryption import (
    ENCODING,
    EncryptionConfigError,
    UnknownEncryptionKey,
    codec_from_env,
    new_key_line,
)

SECRET = b'{"text":"the secret plan"}'


def keys_file(tmp_path: Path, *lines: str) -> dict[str, str]:
    path = tmp_path / "keys"
    path.write_text("\n".join(lines) + "\n")
    return {"AGENTLANE_ENCRYPTION_KEYS_FILE": str(path)}


def plain() -> Payload:
    return Payload(metadata={"encoding": b"json/plain"}, data=SECRET)


async def test_off_by_default() -> None:
    assert codec_from_env({}) is None


async def test_round_trip_hides_the_data_and_names_the_key(tmp_path: Path) -> None:
    codec = codec_from_env(keys_file(tmp_path, new_key_line("k1")))
    assert codec is not None
    [sealed] = await codec.encode([plain()])
    assert sealed.metadata["encoding"] == ENCODING
    assert sealed.metadata["encryption-key-id"] == b"k1"
    assert b"secret" not in sealed.data
    [opened] = await codec.decode([sealed])
    assert opened == plain()


async def test_a_rotated_key_still_decrypts_old_payloads(tmp_path: Path) -> None:
    old_line = new_key_line("k1")
    old = codec_from_env(keys_file(tmp_path, old_line))
    assert old is not None
    [sealed] = await old.encode([plain()])
    rotated = codec_from_env(keys_file(tmp_path, new_key_line("k2"), old_line))
    assert rotated is not None and rotated.current == "k2"
    assert (await rotated.decode([sealed]))[0] == plain()
    [fresh] = await rotated.encode([plain()])
    assert fresh.metadata["encryption-key-id"] == b"k2"


async def test_a_missing_key_is_a_clear_error(tmp_path: Path) -> None:
    first = codec_from_env(keys_file(tmp_path, new_key_line("k1")))
    assert first is not None
    [sealed] = await first.encode([plain()])
    other = codec_from_env(keys_file(tmp_path, new_key_line("k9")))
    assert other is not None
    with pytest.raises(UnknownEncryptionKey, match="key id 'k1'"):
        await other.decode([sealed])


async def test_unencrypted_payloads_pass_through(tmp_path: Path) -> None:
    codec = codec_from_env(keys_file(tmp_path, new_key_line("k1")))
    assert codec is not None
    assert (await codec.decode([plain()]))[0] == plain()


async def test_tampering_is_detected(tmp_path: Path) -> None:
    codec = codec_from_env(keys_file(tmp_path, new_key_line("k1")))
    assert codec is not None
    [sealed] = await codec.encode([plain()])
    sealed.data = sealed.data[:-1] + bytes([sealed.data[-1] ^ 1])
    with pytest.raises(Exception):  # noqa: B017 (cryptography's InvalidTag)
        await codec.decode([sealed])


@pytest.mark.parametrize(
    ("lines", "words"),
    [
        (["k1 not-base64!"], "not valid base64"),
        (["k1 AAAA"], "3 bytes; AES-256 needs 32"),
        (["k1"], "expected `key-id base64-key`"),
        ([], "no keys"),
    ],
)
def test_bad_key_files_say_what_is_wrong(tmp_path: Path, lines: list[str], words: str) -> None:
    with pytest.raises(EncryptionConfigError, match=words):
        codec_from_env(keys_file(tmp_path, *lines))


def test_a_missing_key_file_is_named(tmp_path: Path) -> None:
    env = {"AGENTLANE_ENCRYPTION_KEYS_FILE": str(tmp_path / "nope")}
    with pytest.raises(EncryptionConfigError, match="nope"):
        codec_from_env(env)
