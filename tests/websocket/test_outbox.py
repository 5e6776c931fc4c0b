"""records.ws: messages framed once, batched per client, in order, bounded (messages.MessageBatch, outbox.Outbox)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import orjson
import pytest
from django.test import override_settings

from records.ws.messages import MessageBatch, text_frame
from records.ws.outbox import Outbox, TooSlow


def batch_of(*seqs: int) -> MessageBatch:
    return MessageBatch([orjson.dumps({"type": "bounty.updated", "payload": {"id": seq}, "seq": seq}) for seq in seqs])


def frame_texts(frames: bytes) -> Iterator[str]:
    """The texts of concatenated unmasked text frames, as a client reads them (RFC 6455 5.2)."""
    position = 0
    while position < len(frames):
        assert frames[position] == 0x81 and not frames[position + 1] & 0x80  # FIN, text, not masked
        size, position = frames[position + 1], position + 2
        if size == 126:
            size, position = int.from_bytes(frames[position:position + 2], "big"), position + 2
        elif size == 127:
            size, position = int.from_bytes(frames[position:position + 8], "big"), position + 8
        yield frames[position:position + size].decode()
        position += size


def seqs_in(batch: MessageBatch | bytes) -> list[int]:
    """The seqs of a batch, read from its frames (which must hold the same messages as its texts)."""
    frames = batch if isinstance(batch, bytes) else batch.frames
    seqs = [orjson.loads(text)["seq"] for text in frame_texts(frames)]
    if isinstance(batch, MessageBatch):
        assert seqs == [orjson.loads(text)["seq"] for text in batch.texts]
    return seqs


@pytest.mark.parametrize("size", [0, 125, 126, 65_535, 65_536, 200_000])
def test_a_frame_holds_any_size_of_text(size: int) -> None:
    text = "é" * (size // 2) + "x" * (size % 2)
    frame = text_frame(text.encode())
    assert list(frame_texts(frame + frame)) == [text, text]


def test_a_batch_is_framed_once_and_joined_batches_keep_their_order() -> None:
    first, second = batch_of(1, 2), batch_of(3)
    assert first.frames is first.frames
    joined = MessageBatch.joined([first, second, batch_of(4, 5)])
    assert seqs_in(joined) == [1, 2, 3, 4, 5]
    assert seqs_in(joined.after(3)) == [4, 5]


def test_it_gives_out_every_pending_batch_at_once_in_order() -> None:
    outbox = Outbox(1, lambda: None)
    outbox.put(1, batch_of(1, 2))
    outbox.put(3, batch_of(3))
    outbox.put(4, batch_of(4, 5, 6))
    assert seqs_in(asyncio.run(outbox.get())) == [1, 2, 3, 4, 5, 6]
    assert outbox.next_seq == 7


def test_it_skips_the_seqs_the_client_already_has() -> None:
    outbox = Outbox(3, lambda: None)
    outbox.put(1, batch_of(1, 2))
    outbox.put(1, batch_of(1, 2, 3, 4))
    outbox.put(4, batch_of(4, 5))
    assert seqs_in(asyncio.run(outbox.get())) == [3, 4, 5]


def test_the_shared_batch_goes_out_unchanged() -> None:
    batch = batch_of(1, 2, 3)
    outboxes = [Outbox(1, lambda: None) for _ in range(3)]
    for outbox in outboxes:
        outbox.put(1, batch)
    assert all(asyncio.run(outbox.get()) is batch for outbox in outboxes)


def test_it_writes_straight_to_the_socket_only_with_nothing_queued() -> None:
    written: list[bytes] = []
    socket_takes = [True]

    def write_now(frames: bytes) -> bool:
        if socket_takes[0]:
            written.append(frames)
        return socket_takes[0]

    outbox = Outbox(1, lambda: None, write_now)
    outbox.put(1, batch_of(1, 2))
    socket_takes[0] = False  # held back: the next batch waits for the client's sender
    outbox.put(3, batch_of(3))
    socket_takes[0] = True  # writable again, but seq 3 is queued: 4 must queue behind it
    outbox.put(4, batch_of(4))
    assert [seqs_in(frames) for frames in written] == [[1, 2]]
    assert seqs_in(asyncio.run(outbox.get())) == [3, 4]
    outbox.put(5, batch_of(5))
    assert [seqs_in(frames) for frames in written] == [[1, 2], [5]]
    assert outbox.next_seq == 6


@override_settings(BOUNTY_WS_MAX_BACKLOG=4)
def test_it_reports_a_client_whose_queue_overflows() -> None:
    overflows: list[bool] = []
    outbox = Outbox(1, lambda: overflows.append(True), lambda frames: False)
    outbox.put(1, batch_of(1, 2, 3))
    outbox.put(4, batch_of(4))
    assert overflows == []
    outbox.put(5, batch_of(5))
    assert overflows == [True]
    outbox.put(6, batch_of(6))
    assert overflows == [True]
    with pytest.raises(TooSlow):
        asyncio.run(outbox.get())
