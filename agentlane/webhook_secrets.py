"""Webhook signing secrets: 0600 files in the data folder, named by reference.

`<data>/webhooks/secrets/<ref>` holds one secret (64 hex characters, 32 random bytes). Workflows
and their histories see only `<ref>`; the delivery activity reads the file, and so does whoever
configures a receiver (`agentlane webhook secret`). A session whose routing names no reference
signs with its own (`default_secret_ref(key)`), created by the first delivery if need be.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from agentlane.private_files import make_private_dir, write_private
from agentlane.webhooks import check_secret_ref


class SecretMissing(LookupError):
    pass


class WebhookSecretStore:
    def __init__(self, data_dir: Path) -> None:
        self.root = data_dir / "webhooks" / "secrets"

    def path(self, ref: str) -> Path:
        return self.root / check_secret_ref(ref)

    def get(self, ref: str) -> bytes:
        try:
            text = self.path(ref).read_text().strip()
        except FileNotFoundError:
            raise SecretMissing(
                f"webhook secret {ref!r} is not stored in {self.root} "
                f"(create it with `agentlane webhook secret {ref} --ref`)"
            ) from None
        return text.encode()

    def ensure(self, ref: str) -> bytes:
        """The secret, created (atomically, 0600) if it does not exist yet."""
        path = self.path(ref)
        if not path.exists():
            make_private_dir(self.root.parent)
            make_private_dir(self.root)
            tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
            write_private(tmp, secrets.token_hex(32).encode() + b"\n")
            try:
                # link() fails if another process created it meanwhile: theirs wins.
                os.link(tmp, path)
            except FileExistsError:
                pass
            finally:
                tmp.unlink(missing_ok=True)
        return self.get(ref)

    def rotate(self, ref: str) -> bytes:
        make_private_dir(self.root.parent)
        write_private(self.path(ref), secrets.token_hex(32).encode() + b"\n")
        return self.get(ref)
