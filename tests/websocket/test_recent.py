"""The live feed's memory of its newest messages (records.ws.recent): what it vouches for, what it
hands back, and its bounds."""

from __future__ import annotations

from records.history import Position
from records.ws.recent import RecentChanges, Remembered


def entry(seq: int, *, resync: bool = False, size: int = 10) -> Remembered:
    return Remembered(seq, f"{seq:032x}", b"t" * size, b"f" * size, resync)


def memory(*entries: Remembered, base: Position | None = None, messages: int = 100,
           size: int = 1_000_000) -> RecentChanges:
    recent = RecentChanges()
    recent.reset(base, max_messages=messages, max_bytes=size)
    recent.extend(list(entries))
    return recent


def test_it_vouches_for_its_base_and_each_remembered_position_with_the_same_digest() -> None:
    recent = memory(entry(5), entry(6), base=Position(4, "a" * 32))
    assert recent.vouches(Position(4, "a" * 32))
    assert recent.vouches(Position(5, f"{5:032x}")) and recent.vouches(Position(6, f"{6:032x}"))
    assert not recent.vouches(Position(6, "b" * 32))  # another history's change 6
    assert not recent.vouches(Position(4, "b" * 32)) and not recent.vouches(Position(7, f"{7:032x}"))


def test_it_hands_back_the_messages_from_a_seq_through_the_first_resync() -> None:
    recent = memory(entry(5), entry(6, resync=True), entry(7), base=Position(4, "a" * 32))
    assert [e.seq for e in recent.from_seq(5) or []] == [5, 6]
    assert [e.seq for e in recent.from_seq(7) or []] == [7]
    assert recent.from_seq(8) == []  # past the newest: nothing missed
    assert recent.from_seq(4) is None  # before what it remembers


def test_an_empty_memory_at_its_base_hands_back_nothing_missed() -> None:
    recent = memory(base=Position(4, "a" * 32))
    assert recent.vouches(Position(4, "a" * 32)) and recent.from_seq(5) == []
    assert recent.from_seq(4) is None


def test_it_forgets_the_oldest_past_its_count_and_the_forgotten_position_becomes_its_base() -> None:
    recent = memory(*(entry(n) for n in range(1, 6)), messages=3)
    assert len(recent) == 3 and recent.base == Position(2, f"{2:032x}")
    assert recent.vouches(Position(2, f"{2:032x}")) and not recent.vouches(Position(1, f"{1:032x}"))


def test_it_forgets_the_oldest_past_its_bytes() -> None:
    recent = memory(*(entry(n, size=100) for n in range(1, 6)), size=450)  # 200 bytes a message
    assert len(recent) == 2 and recent.size == 400


def test_a_gap_in_what_it_is_given_forgets_everything_before_it() -> None:
    recent = memory(entry(1), entry(2), base=Position(0, "a" * 32))
    recent.extend([entry(5)])
    assert recent.base is None and recent.from_seq(5) == [entry(5)] and recent.from_seq(2) is None
