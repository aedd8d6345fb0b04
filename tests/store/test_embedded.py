"""What only the embedded backend has to show: a body runs on the store's thread in one go."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from store.embedded import EmbeddedStore
from store.sql_core import Tx


async def test_a_body_that_waits_on_anything_but_its_statements_is_refused(
    tmp_path: Path,
) -> None:
    store = EmbeddedStore.in_data_dir(tmp_path)
    try:

        async def waits(tx: Tx) -> int:
            await tx.execute(
                "INSERT INTO branch_sources (session_key, source) VALUES (?, ?)", ("s", "x")
            )
            await asyncio.sleep(0)  # would let another call's statement into this transaction
            return 1

        with pytest.raises(RuntimeError, match="awaited something other"):
            await store._session(waits, tx=True)
        # Rolled back: nothing of it stays, and the store goes on.
        assert await store.branch_source("s") is None
        assert await store.put_branch_source("s", "y")
    finally:
        await store.close()
