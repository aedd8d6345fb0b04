"""Payload encryption (off by default): AES-256-GCM over every workflow payload, offloaded ones
included (the SDK encodes before it offloads), so histories, the UI and `data/payloads/` show
ciphertext to anyone without the keys.

Turned on by one setting, `AGENTLANE_ENCRYPTION_KEYS_FILE`: a 0600 file of `key-id base64-key`
lines (`agentlane encryption new-key FILE` writes one), or `AGENTLANE_ENCRYPTION_KEYS`:
`id:base64,id:base64`. The first key encrypts; every key listed decrypts, and each payload names
its key id in its metadata, so after a rotation (prepend a new key, keep the old ones) histories
written before still decode. Operators read them through the codec server
(`agentlane codec-server`), which the Temporal UI and `temporal workflow show --codec-endpoint`
call.
"""

from __future__ import annotations

import base64
import os
import secrets
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path

from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

from agentlane.encryption_required import KEYLESS_TEXT, EncryptionRequired

ENCODING = b"binary/encrypted"
KEY_ID = "encryption-key-id"
NONCE_BYTES = 12
KEY_BYTES = 32


class EncryptionConfigError(ValueError):
    """The keys cannot be read or are not usable."""


class UnknownEncryptionKey(ValueError):
    """A payload names a key id that is not configured (a removed or never-known key)."""


class EncryptionCodec(PayloadCodec):
    def __init__(self, keys: Mapping[str, bytes], current: str) -> None:
        if current not in keys:
            raise EncryptionConfigError(f"the current key id {current!r} has no key")
        self._ciphers = {kid: AESGCM(key) for kid, key in keys.items()}
        self.current = current

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        cipher = self._ciphers[self.current]
        out = []
        for payload in payloads:
            nonce = os.urandom(NONCE_BYTES)
            # The key id is authenticated with the data: it cannot be swapped unnoticed.
            sealed = cipher.encrypt(nonce, payload.SerializeToString(), self.current.encode())
            out.append(
                Payload(
                    metadata={"encoding": ENCODING, KEY_ID: self.current.encode()},
                    data=nonce + sealed,
                )
            )
        return out

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        out = []
        for payload in payloads:
            if payload.metadata.get("encoding") != ENCODING:
                out.append(payload)  # written before encryption was turned on
                continue
            kid = payload.metadata.get(KEY_ID, b"").decode()
            cipher = self._ciphers.get(kid)
            if cipher is None:
                raise UnknownEncryptionKey(
                    f"payload encrypted with key id {kid!r}, which is not among the configured "
                    f"keys ({', '.join(sorted(self._ciphers))}); add it to the keys file"
                )
            data = payload.data
            plain = cipher.decrypt(data[:NONCE_BYTES], data[NONCE_BYTES:], kid.encode())
            decoded = Payload()
            decoded.ParseFromString(plain)
            out.append(decoded)
        return out


def _parse_key(kid: str, raw: str, source: str) -> bytes:
    try:
        key = base64.b64decode(raw.strip(), validate=True)
    except ValueError as err:
        raise EncryptionConfigError(f"{source}: key {kid!r} is not valid base64") from err
    if len(key) != KEY_BYTES:
        raise EncryptionConfigError(
            f"{source}: key {kid!r} is {len(key)} bytes; AES-256 needs {KEY_BYTES}"
        )
    return key


def parse_keys(pairs: list[tuple[str, str]], source: str) -> tuple[dict[str, bytes], str]:
    if not pairs:
        raise EncryptionConfigError(f"{source}: no keys")
    keys: dict[str, bytes] = {}
    for kid, raw in pairs:
        if not kid or kid in keys:
            raise EncryptionConfigError(f"{source}: empty or repeated key id {kid!r}")
        keys[kid] = _parse_key(kid, raw, source)
    return keys, pairs[0][0]


def check_private(file: Path) -> None:
    """A keys file readable by group or others is refused, with the command that fixes it."""
    try:
        mode = stat.S_IMODE(file.stat().st_mode)
    except OSError as err:
        raise EncryptionConfigError(f"cannot read the encryption keys file {file}: {err}") from err
    if mode & 0o077:
        raise EncryptionConfigError(
            f"encryption keys file {file} is accessible by group or others (mode {mode:04o}); "
            f"it holds the keys to every history, so it is not used. Fix it with: chmod 600 {file}"
        )


def read_keys_file(file: Path, *, check_mode: bool = True) -> list[tuple[str, str]]:
    """The (key id, base64 key) lines of a keys file, each checked; `EncryptionConfigError`
    names the file and line of anything else (the file is never quoted: it holds keys)."""
    if check_mode:
        check_private(file)
    try:
        lines = file.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise EncryptionConfigError(
            f"cannot read the encryption keys file {file}: {type(err).__name__}"
        ) from err
    pairs = []
    for n, line in enumerate(lines, start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = line.split()
        if len(parts) != 2:
            raise EncryptionConfigError(
                f"{file}:{n}: expected `key-id base64-key`; this is not an encryption keys file"
            )
        _parse_key(parts[0], parts[1], f"{file}:{n}")
        pairs.append((parts[0], parts[1]))
    return pairs


def codec_from_env(env: Mapping[str, str] | None = None) -> EncryptionCodec | None:
    """The codec the settings ask for, or None when encryption is off."""
    env = os.environ if env is None else env
    path = env.get("AGENTLANE_ENCRYPTION_KEYS_FILE")
    inline = env.get("AGENTLANE_ENCRYPTION_KEYS")
    if path:
        file = Path(path).expanduser()
        return EncryptionCodec(*parse_keys(read_keys_file(file), str(file)))
    if inline:
        pairs = []
        for item in inline.split(","):
            kid, sep, raw = item.strip().partition(":")
            if not sep:
                raise EncryptionConfigError("AGENTLANE_ENCRYPTION_KEYS: expected id:base64,…")
            pairs.append((kid, raw))
        return EncryptionCodec(*parse_keys(pairs, "AGENTLANE_ENCRYPTION_KEYS"))
    return None


def new_key_line(kid: str) -> str:
    return f"{kid} {base64.b64encode(secrets.token_bytes(KEY_BYTES)).decode()}"


# Set in the namespace's data, for its task queue, by a worker that encrypts (workers/main.py):
# a process of that deployment without the keys then refuses to write anything
# (`KeylessCodec`) instead of putting it in history in clear beside the encrypted payloads.
NAMESPACE_MARKER = "agentlane.encryption"
NAMESPACE_MARKER_ON = "on"


def marker_key(task_queue: str) -> str:
    """The namespace data key of a deployment (its task queue: several may share a namespace)."""
    return f"{NAMESPACE_MARKER}.{task_queue}"


class KeylessCodec(PayloadCodec):
    """The codec of a process without keys in a deployment that encrypts: it encodes nothing
    (refuses), and decodes as it is (a plain payload from before encryption stays readable; an
    encrypted one fails where it is read, saying so)."""

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        if payloads:
            raise EncryptionRequired(KEYLESS_TEXT)
        return []

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return list(payloads)
