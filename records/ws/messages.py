"""The websocket's messages (docs/api.md, Messages), and a batch of them framed once for everyone.

Every message is encoded once. A server's websocket frames are not masked, so the same frame
bytes suit every client: a `MessageBatch` of consecutive messages carries their texts and their frames
(RFC 6455), made once, and shared by every client. A server with the frame extension
(bountysite/daphne_ws.py) writes the frames as they are; one without it is sent the texts, one ASGI
message each. Either way nothing is encoded or framed per client.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Literal, TypedDict, cast

import orjson

from records.changes import MessageType
from records.kinds import RecordKind
from records.representation import JsonRecord

# A snapshot message's type: its kind's `created` (records.kinds), spelled out for the type checker
# (tests/websocket/test_messages.py holds it, and SnapshotCounts, to records.kinds.KINDS).
SnapshotType = Literal["bounty.created", "submission.created", "dispute.created"]


class LiveMessage(TypedDict):
    type: MessageType
    payload: JsonRecord
    seq: int
    position: str  # where a client resumes after it (`?since=`, records.history)


class SnapshotMessage(TypedDict):
    type: SnapshotType
    payload: orjson.Fragment  # the record's stored JSON (records.representation.record_body)
    snapshot: Literal[True]
    seq: int  # the change-log seq the snapshot is current at


class SnapshotCounts(TypedDict):
    """Each kind's records in the snapshot, by its `resource` (records.kinds)."""

    bounties: int
    submissions: int
    disputes: int


class SnapshotComplete(TypedDict):
    """After the snapshot's last record: from here on `position` is a resume point (`?since=`)."""

    type: Literal["snapshot.complete"]
    payload: SnapshotCounts
    seq: int
    position: str


def snapshot_type(kind: RecordKind) -> SnapshotType:
    """The type of the kind's snapshot messages: the change type of a new record of the kind."""
    return cast(SnapshotType, kind.created.value)


def encode(message: LiveMessage | SnapshotMessage | SnapshotComplete) -> bytes:
    """The message's UTF-8 JSON text."""
    return orjson.dumps(message)


def text_frame(data: bytes) -> bytes:
    """UTF-8 text as one unmasked, unfragmented websocket text frame (RFC 6455 section 5.2)."""
    size = len(data)
    if size < 126:
        header = bytes((0x81, size))
    elif size < 1 << 16:
        header = bytes((0x81, 126)) + size.to_bytes(2, "big")
    else:
        header = bytes((0x81, 127)) + size.to_bytes(8, "big")
    return header + data


class MessageBatch:
    """Consecutive messages: their texts, and their frames joined, each made once when first asked for."""

    __slots__ = ("_count", "_frames", "_texts")

    def __init__(self, texts: list[bytes], frames: bytes | None = None) -> None:
        self._texts: list[bytes] | None = texts
        self._frames = frames
        self._count = len(texts)

    @classmethod
    def of_frames(cls, frames: bytes, count: int) -> MessageBatch:
        """The `count` messages whose text frames `frames` holds (a piece of a snapshot's spool)."""
        batch = cls([], frames)
        batch._texts, batch._count = None, count
        return batch

    def __len__(self) -> int:
        return self._count

    @property
    def texts(self) -> list[bytes]:
        """Every message's text, in order."""
        if self._texts is None:
            self._texts = list(frame_payloads(self.frames))
        return self._texts

    @property
    def frames(self) -> bytes:
        """Every message as a text frame, concatenated: what the frame extension writes as is."""
        if self._frames is None:
            self._frames = b"".join(text_frame(text) for text in self.texts)
        return self._frames

    def after(self, count: int) -> MessageBatch:
        """The batch without its first `count` messages."""
        return MessageBatch(self.texts[count:])

    @classmethod
    def joined(cls, batches: Iterable[MessageBatch]) -> MessageBatch:
        """One batch of the messages of `batches`, in order (their frames reused where made)."""
        parts = list(batches)
        texts = [text for batch in parts for text in batch.texts]
        framed = all(batch._frames is not None for batch in parts)
        return cls(texts, b"".join(batch.frames for batch in parts) if framed else None)


def frame_payloads(frames: bytes) -> Iterator[bytes]:
    """The payload of each unmasked, unfragmented frame `text_frame` made, in order."""
    view = memoryview(frames)
    offset = 0
    while offset < len(view):
        size = view[offset + 1] & 0x7F
        start = offset + 2
        if size == 126:
            size, start = int.from_bytes(view[start:start + 2], "big"), start + 2
        elif size == 127:
            size, start = int.from_bytes(view[start:start + 8], "big"), start + 8
        yield bytes(view[start:start + size])
        offset = start + size
