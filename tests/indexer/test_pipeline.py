"""The catch-up's pipeline stages on their own: the read-ahead (a thread, or a forked process for a
bulk backfill) and the batch writer of a bulk backfill."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from indexer.errors import RpcError
from indexer.fetch import Batch
from indexer.pipeline import BatchWriter, ReadAhead


def batches_of_one_block(fail_at: int | None = None) -> Any:
    def read(start: int) -> Iterator[Batch]:
        if start == fail_at:
            raise RpcError("the node refused: invalid argument", code=-32602)
        yield Batch(start, start, 10, 10, [], {start: {"hash": f"0x{start:064x}"}}, None)

    return read


@pytest.mark.parametrize("in_process", [False, True], ids=["thread", "process"])
def test_the_read_ahead_yields_every_batch_in_order(in_process: bool) -> None:
    with ReadAhead(batches_of_one_block(), 1, 10, 2, _never(), in_process=in_process) as batches:
        assert [batch.to for batch in batches] == list(range(1, 11))


@pytest.mark.parametrize("in_process", [False, True], ids=["thread", "process"])
def test_an_error_of_the_reader_comes_out_after_the_batches_before_it(in_process: bool) -> None:
    received: list[int] = []
    with pytest.raises(RpcError, match="invalid argument"), \
            ReadAhead(batches_of_one_block(fail_at=4), 1, 10, 2, _never(), in_process=in_process) as batches:
        received.extend(batch.to for batch in batches)
    assert received == [1, 2, 3]


def test_the_reader_process_ends_when_the_indexer_stops_reading_early() -> None:
    read_ahead = ReadAhead(batches_of_one_block(), 1, 1_000_000, 2, _never(), in_process=True)
    with read_ahead as batches:
        assert next(batches).to == 1
    assert not read_ahead._worker.is_alive()


def test_a_failed_write_drops_the_batches_behind_it_and_is_raised() -> None:
    written = []

    def commit(prepared: Any) -> None:
        if prepared == 2:
            raise RuntimeError("disk full")
        written.append(prepared)

    writer = BatchWriter(commit)
    submitted = submit_all(writer, [1, 2, 3, 4, 5])
    with pytest.raises(RuntimeError, match="disk full"):
        writer.close()
    assert written == [1]
    assert submitted < [1, 2, 3, 4, 5], "the caller was told before it had submitted them all"


def submit_all(writer: BatchWriter[Any], batches: list[Any]) -> list[Any]:
    """Submits until the writer reports its failure; what it took."""
    taken = []
    for prepared in batches:
        try:
            writer.submit(prepared)
        except RuntimeError:
            break
        taken.append(prepared)
    return taken


def _never() -> threading.Event:
    return threading.Event()
