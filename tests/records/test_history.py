"""records.history: the positions the service hands out read back as themselves, and nothing else
reads as a position (a client that sends anything else gets a snapshot); digests chain over every
part of an entry and start from the deployment's own."""

from __future__ import annotations

import pytest

from records.history import DIGEST_HEX, MAX_SEQ, Position, genesis_digest, next_digest

GENESIS = genesis_digest(91342, "0xe7f1725e7734ce288f8367e1bb143e90bb3f0512")
DIGEST = next_digest(GENESIS, 1, "bounty.created", 7, b'{"id":1}')


@pytest.mark.parametrize("position", [Position(0, GENESIS), Position(1, DIGEST), Position(42, "0" * DIGEST_HEX),
                                      Position(MAX_SEQ, "f" * DIGEST_HEX)])
def test_what_str_gives_parses_back_to_the_same_position(position: Position) -> None:
    assert Position.parse(str(position)) == position


@pytest.mark.parametrize("text", [
    "3", "0", "", ".",                                                # bare seqs, and nothing
    f"3.{DIGEST.upper()}", f"3.{DIGEST[:-1]}G",                       # hex in upper case, or not hex
    f"-3.{DIGEST}", f"+3.{DIGEST}", f"03.{DIGEST}", f"00.{DIGEST}",   # signs, leading zeros
    f" 3.{DIGEST}", f"3.{DIGEST} ", f"3.{DIGEST}\n", f"3 .{DIGEST}", f"3. {DIGEST}", f"\t3.{DIGEST}",
    "3.", f".{DIGEST}", f"3.{DIGEST[:-1]}", f"3.{DIGEST}0", f"3.{DIGEST}.4", f"3..{DIGEST}", f"3,{DIGEST}",
    f"{MAX_SEQ + 1}.{DIGEST}", f"{2**64}.{DIGEST}", f"{10**19}.{DIGEST}", f"{'9' * 400}.{DIGEST}",  # huge
    f"\uff13.{DIGEST}", f"\u0663.{DIGEST}", f"3.{DIGEST[:-1]}\uff41",  # digits and letters of other scripts
    f"3_0.{DIGEST}", f"3e2.{DIGEST}", f"0x3.{DIGEST}",
    "9" * 1_000_000, f"3.{DIGEST}" * 1000,
])
def test_nothing_else_parses(text: str) -> None:
    assert Position.parse(text) is None


def test_a_genesis_is_its_deployments_own_whatever_the_case_of_its_address() -> None:
    address = "0xe7f1725e7734ce288f8367e1bb143e90bb3f0512"
    assert genesis_digest(91342, address) == genesis_digest(91342, "0xE7f1725E7734CE288F8367e1Bb143E90bb3F0512")
    assert len({genesis_digest(91342, address), genesis_digest(1, address),
                genesis_digest(91342, "0x" + "ab" * 20)}) == 3
    assert len(GENESIS) == DIGEST_HEX and int(GENESIS, 16) >= 0


def test_a_digest_changes_with_every_part_of_the_entry_and_with_the_one_before() -> None:
    variants = [next_digest(genesis_digest(1, "0x" + "ab" * 20), 1, "bounty.created", 7, b'{"id":1}'),
                next_digest(GENESIS, 2, "bounty.created", 7, b'{"id":1}'),
                next_digest(GENESIS, 1, "bounty.updated", 7, b'{"id":1}'),
                next_digest(GENESIS, 1, "bounty.created", 8, b'{"id":1}'),
                next_digest(GENESIS, 1, "bounty.created", 7, b'{"id":2}'),
                next_digest(GENESIS, 1, "bounty.created", 7, b'{"id": 1}')]  # the text as written, not its value
    assert DIGEST not in variants and len(set(variants)) == len(variants)
    assert next_digest(GENESIS, 1, "bounty.created", 7, b'{"id":1}') == DIGEST  # and nothing else
