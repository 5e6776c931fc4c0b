"""The board holds exactly what it owes: outstanding credits plus what open records lock up."""

from collections.abc import Callable

import pytest

from tests.chain import Chain
from tests.contracts.scenario import (
    BOARD,
    DISPUTE_BOND,
    OTHER_CLAIMANT,
    OTHER_GROUT,
    REWARD,
    STRANGER,
    BountyStatus,
    DisputeStatus,
    SubmissionStatus,
    address,
    board,
    credits,
    finalize,
    get_bounty,
    get_dispute,
    get_submission,
    make_bounty,
    make_dispute,
    make_submission,
    pass_deadline,
    pass_review_window,
    resolve,
    token_balances,
    usdc,
)

pytestmark = pytest.mark.chain


def locked(chain: Chain) -> int:
    """Rewards of open bounties, bonds of live submissions and bonds of pending disputes."""
    functions = board(chain).functions
    bounties = [get_bounty(chain, i) for i in range(1, functions.bountyCount().call() + 1)]
    submissions = [get_submission(chain, i) for i in range(1, functions.submissionCount().call() + 1)]
    disputes = [get_dispute(chain, i) for i in range(1, functions.disputeCount().call() + 1)]
    live = (SubmissionStatus.SUBMITTED, SubmissionStatus.DISPUTED)
    return int(
        sum(b["rewardAmount"] for b in bounties if b["status"] == BountyStatus.OPEN)
        + sum(s["bondAmount"] for s in submissions if s["status"] in live)
        + sum(d["bondAmount"] for d in disputes if d["status"] == DisputeStatus.PENDING_HUMAN_REVIEW)
    )


def assert_conserved(chain: Chain) -> None:
    held = usdc(chain).functions.balanceOf(board(chain).address).call()
    assert held == sum(credits(chain).values()) + locked(chain)


def withdraw_everything(chain: Chain) -> None:
    for party in credits(chain):
        chain.send(board(chain).functions.withdraw(), address(chain, party))


def anyone_calls(chain: Chain, function: str, record_id: int) -> None:
    chain.send(getattr(board(chain).functions, function)(record_id), address(chain, STRANGER))


def test_the_board_holds_outstanding_credits_plus_locked_amounts_throughout(chain: Chain) -> None:
    supply = usdc(chain).functions.totalSupply().call()
    contested = make_bounty(chain)
    expired = make_bounty(chain, duration=3_600)
    still_open = make_bounty(chain, poster=STRANGER, reward=REWARD + 7)
    rejected = make_submission(chain, contested)
    accepted = make_submission(chain, contested, claimant=OTHER_CLAIMANT)
    refunded = make_submission(chain, contested)
    upheld = make_dispute(chain, rejected)
    assert_conserved(chain)
    cancelled = make_dispute(chain, rejected, challenger=OTHER_GROUT)
    not_upheld = make_dispute(chain, accepted)
    assert_conserved(chain)

    steps: list[Callable[[], object]] = [
        lambda: resolve(chain, upheld, upheld=True),
        lambda: withdraw_everything(chain),
        lambda: anyone_calls(chain, "cancelResolvedDispute", cancelled),
        lambda: resolve(chain, not_upheld, upheld=False),
        lambda: anyone_calls(chain, "advanceReviewCursor", contested),
        lambda: pass_review_window(chain, refunded),
        lambda: finalize(chain, contested),
        lambda: anyone_calls(chain, "refundSubmissionBond", refunded),
        lambda: pass_deadline(chain, expired),
        lambda: anyone_calls(chain, "refundExpired", expired),
        lambda: make_dispute(chain, make_submission(chain, still_open)),
        lambda: withdraw_everything(chain),
    ]
    for step in steps:
        step()
        assert_conserved(chain)

    assert credits(chain) == {}
    still_locked = (REWARD + 7) + (REWARD + 7) * 1_000 // 10_000 + DISPUTE_BOND
    assert token_balances(chain)[BOARD] == locked(chain) == still_locked
    holders = [*chain.deployment.accounts, board(chain).address]
    assert sum(usdc(chain).functions.balanceOf(h).call() for h in holders) == supply
    statuses = [get_submission(chain, s)["status"] for s in (rejected, accepted, refunded)]
    assert statuses == [SubmissionStatus.REJECTED, SubmissionStatus.ACCEPTED, SubmissionStatus.REFUNDED]
    assert get_bounty(chain, contested)["status"] == BountyStatus.RESOLVED
    assert get_bounty(chain, expired)["status"] == BountyStatus.REFUNDED
