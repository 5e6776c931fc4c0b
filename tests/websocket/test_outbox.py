"""records.live's frames and Outbox: messages framed once, batched per client, in order, bounded."""

from __future__ import annotations

import asyncio

import orjson
import pytest
from django.test import override_settings

from records.live import Outbox, TooSlow, frame_texts, text_frame


def frames_of(*seqs: int) -> list[bytes]:
    return [text_frame(orjson.dumps({"type": "bounty.updated", "payload": {"id": seq}, "seq": seq})) for seq in seqs]


def seqs_in(frames: bytes) -> list[int]:
    return [orjson.loads(text)["seq"] for text in frame_texts(frames)]


@pytest.mark.parametrize("size", [0, 125, 126, 65_535, 65_536, 200_000])
def test_a_frame_holds_any_size_of_text(size: int) -> None:
    text = "é" * (size // 2) + "x" * (size % 2)
    frame = text_frame(text.encode())
    assert frame[0] == 0x81  # FIN, text, and no mask bit below: a server's frame
    assert not frame[1] & 0x80
    assert list(frame_texts(frame + frame)) == [text, text]


def test_it_gives_out_every_pending_batch_at_once_in_order() -> None:
    outbox = Outbox(1, lambda: None)
    outbox.put(1, frames_of(1, 2))
    outbox.put(3, frames_of(3))
    outbox.put(4, frames_of(4, 5, 6))
    assert seqs_in(asyncio.run(outbox.get())) == [1, 2, 3, 4, 5, 6]
    assert outbox.next_seq == 7


def test_it_skips_the_seqs_the_client_already_has() -> None:
    outbox = Outbox(3, lambda: None)
    outbox.put(1, frames_of(1, 2))
    outbox.put(1, frames_of(1, 2, 3, 4))
    outbox.put(4, frames_of(4, 5))
    assert seqs_in(asyncio.run(outbox.get())) == [3, 4, 5]


def test_the_shared_batch_goes_out_unchanged() -> None:
    frames = frames_of(1, 2, 3)
    joined = b"".join(frames)
    outboxes = [Outbox(1, lambda: None) for _ in range(3)]
    for outbox in outboxes:
        outbox.put(1, frames, joined)
    assert all(asyncio.run(outbox.get()) is joined for outbox in outboxes)


def test_it_writes_straight_to_the_socket_only_with_nothing_queued() -> None:
    written: list[bytes] = []
    socket_takes = [True]

    def write_now(frames: bytes) -> bool:
        if socket_takes[0]:
            written.append(frames)
        return socket_takes[0]

    outbox = Outbox(1, lambda: None, write_now)
    outbox.put(1, frames_of(1, 2))
    socket_takes[0] = False  # held back: the next batch waits for the client's sender
    outbox.put(3, frames_of(3))
    socket_takes[0] = True  # writable again, but seq 3 is queued: 4 must queue behind it
    outbox.put(4, frames_of(4))
    assert [seqs_in(frames) for frames in written] == [[1, 2]]
    assert seqs_in(asyncio.run(outbox.get())) == [3, 4]
    outbox.put(5, frames_of(5))
    assert [seqs_in(frames) for frames in written] == [[1, 2], [5]]
    assert outbox.next_seq == 6


@override_settings(BOUNTY_WS_MAX_BACKLOG=4)
def test_it_reports_a_client_whose_queue_overflows() -> None:
    overflows: list[bool] = []
    outbox = Outbox(1, lambda: overflows.append(True), lambda frames: False)
    outbox.put(1, frames_of(1, 2, 3))
    outbox.put(4, frames_of(4))
    assert overflows == []
    outbox.put(5, frames_of(5))
    assert overflows == [True]
    outbox.put(6, frames_of(6))
    assert overflows == [True]
    with pytest.raises(TooSlow):
        asyncio.run(outbox.get())
