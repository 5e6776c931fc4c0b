"""refundExpired (the poster's reward) and refundSubmissionBond (a claimant's bond)."""

import pytest
from web3.contract.contract import ContractFunction

from tests.chain import Chain, Revert
from tests.contracts.scenario import (
    BOND,
    CLAIMANT,
    DISPUTE_BOND,
    FEE,
    OTHER_CLAIMANT,
    OWNER,
    POSTER,
    REWARD,
    STRANGER,
    BountyStatus,
    SubmissionStatus,
    address,
    balance_changes,
    board,
    credits,
    finalize,
    get_bounty,
    get_submission,
    make_bounty,
    make_dispute,
    make_submission,
    pass_deadline,
    pass_review_window,
    refunded_bounty,
    reject_submission,
    resolve,
    resolved_bounty,
    send_at,
    submission_in,
    token_balances,
)

pytestmark = pytest.mark.chain


def refund_expired(chain: Chain, bounty_id: int) -> ContractFunction:
    return board(chain).functions.refundExpired(bounty_id)


def refund_bond(chain: Chain, submission_id: int) -> ContractFunction:
    return board(chain).functions.refundSubmissionBond(submission_id)


def test_refund_expired_returns_the_reward_to_the_poster(chain: Chain) -> None:
    bounty_id = make_bounty(chain)
    pass_deadline(chain, bounty_id)
    before = token_balances(chain)

    receipt = chain.send(refund_expired(chain, bounty_id), address(chain, STRANGER))

    assert get_bounty(chain, bounty_id)["status"] == BountyStatus.REFUNDED
    assert credits(chain) == {OWNER: FEE, POSTER: REWARD}
    assert chain.events(receipt, "BountyRefunded") == [
        {"bountyId": bounty_id, "poster": address(chain, POSTER), "amount": REWARD}
    ]
    assert chain.events(receipt, "Credited") == [
        {"account": address(chain, POSTER), "amount": REWARD, "balance": REWARD}
    ]
    assert balance_changes(chain, before) == {}


def test_refund_expired_at_the_deadline_reverts_and_works_a_second_later(chain: Chain) -> None:
    bounty_id = make_bounty(chain)
    deadline = get_bounty(chain, bounty_id)["deadline"]

    revert = chain.revert_of(refund_expired(chain, bounty_id), address(chain, STRANGER), at=deadline)
    assert revert == Revert("BountyDeadlineNotReached", (bounty_id,))

    send_at(chain, refund_expired(chain, bounty_id), STRANGER, deadline + 1)
    assert get_bounty(chain, bounty_id)["status"] == BountyStatus.REFUNDED


@pytest.mark.parametrize("advanced", [False, True], ids=["cursor-behind", "cursor-advanced"])
def test_refund_expired_after_every_submission_was_rejected(chain: Chain, advanced: bool) -> None:
    bounty_id = make_bounty(chain)
    for claimant in (CLAIMANT, OTHER_CLAIMANT):
        reject_submission(chain, make_submission(chain, bounty_id, claimant=claimant))
    if advanced:
        chain.send(board(chain).functions.advanceReviewCursor(bounty_id), address(chain, STRANGER))
    pass_deadline(chain, bounty_id)

    chain.send(refund_expired(chain, bounty_id), address(chain, STRANGER))

    assert get_bounty(chain, bounty_id)["status"] == BountyStatus.REFUNDED
    assert credits(chain)[POSTER] == REWARD


@pytest.mark.parametrize(
    "status",
    [SubmissionStatus.SUBMITTED, SubmissionStatus.DISPUTED],
    ids=lambda status: status.name.lower(),
)
def test_refund_expired_with_a_live_submission_reverts(chain: Chain, status: SubmissionStatus) -> None:
    bounty_id = make_bounty(chain)
    reject_submission(chain, make_submission(chain, bounty_id))
    live = make_submission(chain, bounty_id, claimant=OTHER_CLAIMANT)
    if status == SubmissionStatus.DISPUTED:
        make_dispute(chain, live)
    pass_deadline(chain, bounty_id)

    assert chain.revert_of(refund_expired(chain, bounty_id), address(chain, STRANGER)) == Revert(
        "SubmissionsPending", (bounty_id,)
    )


def test_refund_expired_of_a_resolved_bounty_reverts(chain: Chain) -> None:
    bounty_id, _ = resolved_bounty(chain)
    pass_deadline(chain, bounty_id)

    assert chain.revert_of(refund_expired(chain, bounty_id), address(chain, STRANGER)) == Revert(
        "BountyNotOpen", (bounty_id,)
    )


def test_refund_expired_twice_reverts(chain: Chain) -> None:
    bounty_id = refunded_bounty(chain)

    assert chain.revert_of(refund_expired(chain, bounty_id), address(chain, STRANGER)) == Revert(
        "BountyNotOpen", (bounty_id,)
    )
    assert credits(chain) == {OWNER: FEE, POSTER: REWARD}


@pytest.mark.parametrize("bounty_id", [0, 2])
def test_refund_expired_of_unknown_bounty_reverts(chain: Chain, bounty_id: int) -> None:
    make_bounty(chain)

    assert chain.revert_of(refund_expired(chain, bounty_id), address(chain, STRANGER)) == Revert(
        "UnknownBounty", (bounty_id,)
    )


def test_refund_submission_bond_after_another_submission_won(chain: Chain) -> None:
    bounty_id = make_bounty(chain)
    winner = make_submission(chain, bounty_id)
    loser = make_submission(chain, bounty_id, claimant=OTHER_CLAIMANT)
    pass_review_window(chain, winner)
    finalize(chain, bounty_id)
    before = token_balances(chain)

    receipt = chain.send(refund_bond(chain, loser), address(chain, STRANGER))

    assert get_submission(chain, loser)["status"] == SubmissionStatus.REFUNDED
    assert get_bounty(chain, bounty_id)["liveSubmissions"] == 0
    assert credits(chain) == {OWNER: FEE, CLAIMANT: REWARD + BOND, OTHER_CLAIMANT: BOND}
    assert chain.events(receipt, "SubmissionRefunded") == [
        {
            "submissionId": loser,
            "bountyId": bounty_id,
            "claimant": address(chain, OTHER_CLAIMANT),
            "amount": BOND,
        }
    ]
    assert chain.events(receipt, "Credited") == [
        {"account": address(chain, OTHER_CLAIMANT), "amount": BOND, "balance": BOND}
    ]
    assert balance_changes(chain, before) == {}


def test_refund_submission_bond_after_its_dispute_was_rejected_on_a_resolved_bounty(chain: Chain) -> None:
    bounty_id = make_bounty(chain)
    winner = make_submission(chain, bounty_id)
    loser = make_submission(chain, bounty_id, claimant=OTHER_CLAIMANT)
    dispute_id = make_dispute(chain, loser)
    pass_review_window(chain, winner)
    finalize(chain, bounty_id)
    resolve(chain, dispute_id, upheld=False)

    chain.send(refund_bond(chain, loser), address(chain, STRANGER))

    assert get_submission(chain, loser)["status"] == SubmissionStatus.REFUNDED
    assert credits(chain) == {
        OWNER: FEE,
        CLAIMANT: REWARD + BOND,
        OTHER_CLAIMANT: BOND + DISPUTE_BOND,
    }


def test_refund_submission_bond_while_the_bounty_is_open_reverts(chain: Chain) -> None:
    bounty_id = make_bounty(chain)
    submission_id = make_submission(chain, bounty_id)
    pass_deadline(chain, bounty_id)

    assert chain.revert_of(refund_bond(chain, submission_id), address(chain, STRANGER)) == Revert(
        "BountyStillOpen", (bounty_id,)
    )


@pytest.mark.parametrize(
    "status",
    [
        SubmissionStatus.DISPUTED,
        SubmissionStatus.ACCEPTED,
        SubmissionStatus.REJECTED,
        SubmissionStatus.REFUNDED,
    ],
    ids=lambda status: status.name.lower(),
)
def test_refund_submission_bond_of_a_submission_not_submitted_reverts(chain: Chain, status: SubmissionStatus) -> None:
    submission_id = submission_in(chain, status, bounty_resolved=True)

    assert chain.revert_of(refund_bond(chain, submission_id), address(chain, STRANGER)) == Revert(
        "WrongSubmissionStatus", (submission_id, status)
    )


@pytest.mark.parametrize("submission_id", [0, 2])
def test_refund_submission_bond_of_unknown_submission_reverts(chain: Chain, submission_id: int) -> None:
    make_submission(chain, make_bounty(chain))

    assert chain.revert_of(refund_bond(chain, submission_id), address(chain, STRANGER)) == Revert(
        "UnknownSubmission", (submission_id,)
    )
