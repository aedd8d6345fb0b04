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
    path.chmod(0o600)
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


def test_a_key_file_others_can_read_is_refused_with_the_fix(tmp_path: Path) -> None:
    env = keys_file(tmp_path, new_key_line("k1"))
    path = Path(env["AGENTLANE_ENCRYPTION_KEYS_FILE"])
    for mode in (0o644, 0o640, 0o604):
        path.chmod(mode)
        with pytest.raises(EncryptionConfigError, match=f"chmod 600 {path}"):
            codec_from_env(env)
    path.chmod(0o600)
    assert codec_from_env(env) is not None


def test_new_key_refuses_a_file_that_is_not_a_keys_file(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    from tests.harness import REPO

    def new_key(path: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "clients.cli", "encryption", "new-key", str(path)],
            env={**os.environ, "PYTHONPATH": str(REPO)},
            capture_output=True,
            text=True,
            timeout=60,
        )

    notes = tmp_path / "config.toml"
    notes.write_text("default_model = 'offline/planner'\n")
    before = notes.read_bytes(), notes.stat().st_mode
    got = new_key(notes)
    assert got.returncode != 0
    assert "not an encryption keys file" in got.stderr and "untouched" in got.stderr
    assert (notes.read_bytes(), notes.stat().st_mode) == before
    # A new file, and a second key in front of the first: both usable.
    keys = tmp_path / "keys"
    assert new_key(keys).returncode == 0
    assert new_key(keys).returncode == 0
    assert oct(keys.stat().st_mode & 0o777) == "0o600"
    codec = codec_from_env({"AGENTLANE_ENCRYPTION_KEYS_FILE": str(keys)})
    assert codec is not None and codec.current == "k2"
