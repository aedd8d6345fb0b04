"""The error of a process without keys in a deployment that encrypts (agentlane/encryption.py
`KeylessCodec`): its own module, so the CLI can catch it without importing the codec."""

from __future__ import annotations


class EncryptionRequired(RuntimeError):
    """This deployment encrypts its payloads, and this process has no key to do so."""


KEYLESS_TEXT = (
    "this deployment's payloads are encrypted and this process has no key: nothing was sent "
    "(it would have gone into Temporal's history in clear). Set AGENTLANE_ENCRYPTION_KEYS_FILE "
    "to the keys file, as for the workers"
)
