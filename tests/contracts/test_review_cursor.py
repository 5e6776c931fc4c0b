import pytest
from web3.contract.contract import ContractFunction

from tests.chain import Chain, Revert
from tests.contracts.scenario import (
    OTHER_CLAIMANT,
    STRANGER,
    address,
    board,
    get_bounty,
    make_bounty,
    make_dispute,
    make_submission,
    reject_submission,
)

pytestmark = pytest.mark.chain


def advance(chain: Chain, bounty_id: int) -> ContractFunction:
    return board(chain).functions.advanceReviewCursor(bounty_id)


def queue(chain: Chain, bounty_id: int, size: int) -> list[int]:
    return [make_submission(chain, bounty_id, claimant=OTHER_CLAIMANT) for _ in range(size)]


@pytest.mark.parametrize(
    ("rejected", "size", "cursor"),
    [([0, 1], 3, 2), ([0, 2], 3, 1), ([0, 1, 2], 3, 3)],
    ids=["two-in-a-row", "stops-at-the-first-live-one", "whole-queue"],
)
def test_advance_moves_the_cursor_past_rejected_submissions(
    chain: Chain, rejected: list[int], size: int, cursor: int
) -> None:
    bounty_id = make_bounty(chain)
    submission_ids = queue(chain, bounty_id, size)
    for position in rejected:
        reject_submission(chain, submission_ids[position])

    receipt = chain.send(advance(chain, bounty_id), address(chain, STRANGER))

    assert get_bounty(chain, bounty_id)["reviewCursor"] == cursor
    assert chain.events(receipt, "ReviewCursorAdvanced") == [
        {"bountyId": bounty_id, "cursor": cursor}
    ]


def test_advance_continues_from_where_the_cursor_stopped(chain: Chain) -> None:
    bounty_id = make_bounty(chain)
    first, second, _ = queue(chain, bounty_id, 3)
    reject_submission(chain, first)
    chain.send(advance(chain, bounty_id), address(chain, STRANGER))
    reject_submission(chain, second)

    receipt = chain.send(advance(chain, bounty_id), address(chain, STRANGER))

    assert get_bounty(chain, bounty_id)["reviewCursor"] == 2
    assert chain.events(receipt, "ReviewCursorAdvanced") == [{"bountyId": bounty_id, "cursor": 2}]


def test_advance_on_an_empty_queue_reverts(chain: Chain) -> None:
    bounty_id = make_bounty(chain)

    assert chain.revert_of(advance(chain, bounty_id), address(chain, STRANGER)) == Revert(
        "CursorCannotMove", (bounty_id,)
    )


@pytest.mark.parametrize("disputed", [False, True], ids=["submitted", "disputed"])
def test_advance_with_a_live_submission_at_the_cursor_reverts(chain: Chain, disputed: bool) -> None:
    bounty_id = make_bounty(chain)
    live, later = queue(chain, bounty_id, 2)
    reject_submission(chain, later)
    if disputed:
        make_dispute(chain, live)

    assert chain.revert_of(advance(chain, bounty_id), address(chain, STRANGER)) == Revert(
        "CursorCannotMove", (bounty_id,)
    )
    assert get_bounty(chain, bounty_id)["reviewCursor"] == 0


def test_advance_at_the_end_of_the_queue_reverts(chain: Chain) -> None:
    bounty_id = make_bounty(chain)
    (only,) = queue(chain, bounty_id, 1)
    reject_submission(chain, only)
    chain.send(advance(chain, bounty_id), address(chain, STRANGER))

    assert chain.revert_of(advance(chain, bounty_id), address(chain, STRANGER)) == Revert(
        "CursorCannotMove", (bounty_id,)
    )


@pytest.mark.parametrize("bounty_id", [0, 2])
def test_advance_on_unknown_bounty_reverts(chain: Chain, bounty_id: int) -> None:
    make_bounty(chain)

    assert chain.revert_of(advance(chain, bounty_id), address(chain, STRANGER)) == Revert(
        "UnknownBounty", (bounty_id,)
    )
