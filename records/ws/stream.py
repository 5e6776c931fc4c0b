"""One client's stream: its snapshot (or what it missed since `?since=`), then the live feed."""

from __future__ import annotations

from collections.abc import Callable

from records.ws.feed import Resync, process_feed
from records.ws.outbox import Outbox, Send, TooSlow, WriteNow
from records.ws.snapshot import stream_snapshot


async def run_stream(since: str | None, send: Send, on_too_slow: Callable[[], None],
                     write_now: WriteNow | None = None, *, client: str) -> None:
    """Sends one client (counted as `client`: records.limits.scope_client) the snapshot (or what it
    missed since the position `since`), then live messages until cancelled (through `write_now`
    when the server offers it). A client too slow to read its live messages is reported through
    `on_too_slow`; a snapshot refused or taken too slowly raises records.ws.closes.Refusal."""
    feed = process_feed()
    start = await feed.resume_point(since) if since is not None else None
    while True:
        if start is None:
            start = await stream_snapshot(send, framed=write_now is not None, client=client)
        outbox = Outbox(start, on_too_slow, write_now)
        try:
            await feed.subscribe(outbox, send)
            while True:
                await send(await outbox.get())
        except TooSlow:
            return
        except Resync:  # it was sent the resync message: the new snapshot follows it
            start = None
        finally:
            feed.unsubscribe(outbox)
