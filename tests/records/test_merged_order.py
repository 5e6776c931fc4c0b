"""records.merged_order finds the page at any rank of a merge of sorted sequences, with few reads:
checked against the plain merge, over sequences that interleave, follow one another, share
keys' leading parts and are empty."""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest

from records import merged_order
from records.merged_order import Element, Key, page_elements


def _sequences(lengths: Sequence[int], shape: str, rng: random.Random) -> list[list[Key]]:
    """Sorted sequences of unique (time, position, sequence) keys, as records are sorted."""
    sequences = []
    for s, length in enumerate(lengths):
        if shape == "interleaved":
            times = sorted(rng.randrange(10**8) for _ in range(length))
        elif shape == "one after another":
            times = sorted(rng.randrange(s * 10**8, (s + 1) * 10**8) for _ in range(length))
        elif shape == "crowded moments":  # many keys share their time within and across sequences
            times = sorted(rng.randrange(50) for _ in range(length))
        else:  # "burst": half the keys in one short span shared by every sequence
            times = sorted(rng.randrange(10**8) if rng.random() < 0.5 else 5 * 10**7 + rng.randrange(100)
                           for _ in range(length))
        sequences.append([(t, position, s) for position, t in enumerate(times)])
    return sequences


class Reader:
    """keys_at over in-memory sequences, counting the reads and the keys read."""

    def __init__(self, sequences: list[list[Key]]) -> None:
        self.sequences, self.reads, self.keys = sequences, 0, 0

    def __call__(self, windows: Sequence[range]) -> list[list[Key]] | None:
        self.reads += 1
        self.keys += sum(len(window) for window in windows)
        return [[sequence[p] for p in window] for sequence, window in zip(self.sequences, windows, strict=True)]


def _expected(sequences: list[list[Key]], offset: int, limit: int) -> list[Element]:
    merged = sorted((key, Element(s, p)) for s, sequence in enumerate(sequences) for p, key in enumerate(sequence))
    return [element for _, element in merged[offset : offset + limit]]


@pytest.fixture
def small_rounds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rounds of a handful of samples, so that small sequences take several of them."""
    monkeypatch.setattr(merged_order, "SAMPLES", 4)
    monkeypatch.setattr(merged_order, "MIN_SAMPLES", 2)
    monkeypatch.setattr(merged_order, "WHOLE_KEYS", 6)


@pytest.mark.parametrize("shape", ["interleaved", "one after another", "crowded moments", "burst"])
def test_every_page_equals_the_plain_merge(small_rounds: None, shape: str) -> None:
    rng = random.Random(shape)
    sequences = _sequences([40, 7, 0, 23, 1], shape, rng)
    total, most_reads = sum(map(len, sequences)), 0
    for limit in (1, 3):
        for offset in range(total + 2):
            reader = Reader(sequences)
            got = page_elements([len(s) for s in sequences], offset, limit, reader)
            assert got == _expected(sequences, offset, limit), (offset, limit)
            most_reads = max(most_reads, reader.reads)
    assert most_reads >= 3  # sampling rounds before the whole read


def test_a_page_past_the_end_or_of_no_rows_reads_nothing() -> None:
    reader = Reader([[(1, 0, 0)], []])
    assert page_elements([1, 0], 1, 5, reader) == []
    assert page_elements([1, 0], 0, 0, reader) == []
    assert reader.reads == 0


@pytest.mark.parametrize("shape", ["interleaved", "one after another", "crowded moments", "burst"])
def test_a_deep_page_of_a_large_merge_takes_few_reads_of_few_keys(shape: str) -> None:
    """Two sampling rounds then one whole read, for 120,000 elements in two sequences as
    uneven as the benchmark's: some thousands of keys read instead of the offset's 90,000."""
    rng = random.Random(shape)
    sequences = _sequences([100_000, 20_000], shape, rng)
    for offset in (90_000, 60_123, 119_990):
        reader = Reader(sequences)
        assert page_elements([100_000, 20_000], offset, 50, reader) == _expected(sequences, offset, 50)
        assert reader.reads <= 3 and reader.keys <= 2 * merged_order.SAMPLES + merged_order.WHOLE_KEYS, (
            offset, reader.reads, reader.keys)


def test_a_sequence_changed_under_the_reads_gives_none(small_rounds: None) -> None:
    sequences = _sequences([30, 30], "interleaved", random.Random(1))
    reader = Reader(sequences)

    def shrinking(windows: Sequence[range]) -> list[list[Key]] | None:
        return None if reader.reads else reader(windows)  # the second read finds rows gone

    assert page_elements([30, 30], 31, 2, shrinking) is None


def test_keys_that_contradict_earlier_reads_give_none(small_rounds: None) -> None:
    """A backstop for reads not made in one snapshot: the same position read again with another
    key (records replaced by a reorganisation between the reads) ends the search."""
    before = _sequences([30, 30], "interleaved", random.Random(3))
    after = [[(t + 7, position, s) for t, position, s in sequence] for sequence in before]
    reader = Reader(before)

    def replaced(windows: Sequence[range]) -> list[list[Key]] | None:
        if reader.reads:
            reader.sequences = after
        return reader(windows)

    assert page_elements([30, 30], 31, 2, replaced) is None


def test_a_merge_needing_more_rounds_than_the_bound_gives_none(small_rounds: None,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A bound on the rounds rather than a loop: the caller then reads the page another way."""
    monkeypatch.setattr(merged_order, "MAX_ROUNDS", 1)
    sequences = _sequences([30, 30], "interleaved", random.Random(2))
    assert page_elements([30, 30], 31, 2, Reader(sequences)) is None
