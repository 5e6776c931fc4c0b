"""Where a page starts in the merge of several sorted sequences, found with a few batched reads.

A deep page of a list merged from several deployments, each already sorted on its own (records
in chain order sorted by `created_at`: records.chronology), starts at the element whose rank in
the merge is the page's offset. Skipping that many elements costs what the offset does; here the
rank is found by sampling instead. Each round reads the keys at a few hundred evenly spaced
positions of every sequence in one batch and narrows, for each sequence, the window of how many
of its elements come before the page. Once the windows are small their keys are read whole and
merged. Two rounds take a million elements down to a few thousand.

No Django here: the caller reads keys through `KeysAt`, by position in each sequence.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Sequence
from itertools import pairwise
from typing import Any, NamedTuple

# A sort key, compared as the merged order runs: unique and ascending within each sequence.
Key = tuple[Any, ...]
# The keys at the given positions of each sequence, in the positions' order; None when a
# sequence no longer has an element at one of them (the data changed under the reads).
KeysAt = Callable[[Sequence[range]], list[list[Key]] | None]

SAMPLES = 512  # keys read per round, shared among the sequences
MIN_SAMPLES = 16  # per sequence and round, however many share it (two at least: both ends narrow)
WHOLE_KEYS = 4_096  # windows up to this many keys in all are read whole
MAX_ROUNDS = 8  # far more than needed (two for a million elements): a bound, not a budget


class Element(NamedTuple):
    sequence: int
    position: int


class _Samples:
    """The keys read so far of one sequence, by position."""

    def __init__(self, length: int) -> None:
        self.length = length
        self.positions: list[int] = []
        self.keys: list[Key] = []

    def add(self, positions: range, keys: list[Key]) -> bool:
        """Adds keys read at the positions; False if they contradict the sequence's order or the
        keys read before (the data changed between the reads)."""
        known = dict(zip(self.positions, self.keys, strict=True))
        for position, key in zip(positions, keys, strict=True):
            if known.setdefault(position, key) != key:
                return False
        self.positions = sorted(known)
        self.keys = [known[p] for p in self.positions]
        return _rising(self.keys)

    def agrees(self, window: range, keys: list[Key]) -> bool:
        """Whether keys read over a whole window are in order and match those sampled in it."""
        first = bisect_left(self.positions, window.start)
        last = bisect_left(self.positions, window.stop)
        return _rising(keys) and all(keys[self.positions[i] - window.start] == self.keys[i] for i in range(first, last))

    def before(self, key: Key) -> tuple[int, int]:
        """Bounds on how many elements of the sequence come before `key`."""
        i = bisect_left(self.keys, key)
        if i < len(self.keys) and self.keys[i] == key:
            return self.positions[i], self.positions[i]
        low = self.positions[i - 1] + 1 if i else 0
        high = self.positions[i] if i < len(self.positions) else self.length
        return low, high


def page_elements(lengths: Sequence[int], offset: int, limit: int, keys_at: KeysAt) -> list[Element] | None:
    """The elements at ranks `offset` to `offset + limit - 1` of the merge of the sequences, in
    order; None if the windows would not narrow, or if the reads disagree (the data changed
    between them: the caller should read in one snapshot, and this is the backstop)."""
    if offset >= sum(lengths) or limit <= 0:
        return []
    samples = [_Samples(length) for length in lengths]
    # For each sequence, how many of its elements come before the page lies in [low, high].
    low, high = [0] * len(lengths), list(lengths)

    def windows() -> list[range]:
        return [range(lo, min(length, hi + limit)) for lo, hi, length in zip(low, high, lengths, strict=True)]

    for _ in range(MAX_ROUNDS):
        whole = windows()
        if sum(len(window) for window in whole) <= max(WHOLE_KEYS, 2 * limit * len(lengths)):
            read = keys_at(whole)
            if read is None:
                return None
            if not all(sample.agrees(window, keys) for sample, window, keys in zip(samples, whole, read, strict=True)):
                return None
            merged = sorted((key, Element(s, position)) for s, keys in enumerate(read)
                            for position, key in zip(whole[s], keys, strict=True))
            start = offset - sum(low)
            if not 0 <= start < len(merged):  # bounds proven from data that has since changed
                return None
            return [element for _, element in merged[start : start + limit]]
        per_sequence = max(MIN_SAMPLES, SAMPLES // len(lengths))
        spread = [range(lo, hi, max(1, -(-(hi - lo) // per_sequence))) for lo, hi in zip(low, high, strict=True)]
        read = keys_at(spread)
        if read is None:
            return None
        if not all(sample.add(positions, keys) for sample, positions, keys in zip(samples, spread, read, strict=True)):
            return None
        narrowed = _narrow(samples, offset, low, high)
        if narrowed == (low, high):
            return None
        low, high = narrowed
    return None


def _rising(keys: list[Key]) -> bool:
    return all(a < b for a, b in pairwise(keys))


def _narrow(samples: list[_Samples], offset: int, low: list[int],
            high: list[int]) -> tuple[list[int], list[int]]:
    """The tightest windows the samples prove. A key known to come at or before the page's
    first element gives lower bounds; one known to come after it gives upper bounds. Both sums
    of bounds rise with the key, so the best key of each kind is found by bisection."""
    candidates = sorted({key for sample in samples for key in sample.keys})

    def bounds(key: Key) -> tuple[list[int], list[int]]:
        lows, highs = zip(*(sample.before(key) for sample in samples), strict=True)
        return list(lows), list(highs)

    # The last key with at most `offset` elements surely before it is at or before the page's first.
    lo_i, hi_i = -1, len(candidates) - 1
    while lo_i < hi_i:
        middle = (lo_i + hi_i + 1) // 2
        lo_i, hi_i = (middle, hi_i) if sum(bounds(candidates[middle])[1]) <= offset else (lo_i, middle - 1)
    if lo_i >= 0:
        low = [max(known, proven) for known, proven in zip(low, bounds(candidates[lo_i])[0], strict=True)]
    # The first key with more than `offset` elements surely before it comes after the page's first.
    lo_j, hi_j = 0, len(candidates)
    while lo_j < hi_j:
        middle = (lo_j + hi_j) // 2
        lo_j, hi_j = (lo_j, middle) if sum(bounds(candidates[middle])[0]) > offset else (middle + 1, hi_j)
    if lo_j < len(candidates):
        high = [min(known, proven) for known, proven in zip(high, bounds(candidates[lo_j])[1], strict=True)]
    return low, high
