import pytest
from web3.contract.contract import ContractFunction

from tests.chain import Chain, Revert
from tests.contracts.scenario import (
    BOND,
    CLAIMANT,
    DISPUTE_BOND,
    FEE,
    GROUT,
    OTHER_CLAIMANT,
    OWNER,
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
    pass_review_window,
    refunded_bounty,
    reject_submission,
    resolve,
    resolved_bounty,
    send_at,
    token_balances,
)

pytestmark = pytest.mark.chain


def finalize_call(chain: Chain, bounty_id: int) -> ContractFunction:
    return board(chain).functions.finalize(bounty_id)


def test_finalize_accepts_the_submission_at_the_cursor(chain: Chain) -> None:
    bounty_id = make_bounty(chain)
    submission_id = make_submission(chain, bounty_id)
    pass_review_window(chain, submission_id)

    receipt = finalize(chain, bounty_id)

    assert get_submission(chain, submission_id)["status"] == SubmissionStatus.ACCEPTED
    bounty = get_bounty(chain, bounty_id)
    assert bounty["status"] == BountyStatus.RESOLVED
    assert bounty["liveSubmissions"] == 0
    assert bounty["reviewCursor"] == 0
    assert chain.events(receipt, "BountyFinalized") == [
        {
            "bountyId": bounty_id,
            "submissionId": submission_id,
            "claimant": address(chain, CLAIMANT),
            "payout": REWARD + BOND,
        }
    ]


def test_finalize_credits_reward_plus_bond_to_the_claimant(chain: Chain) -> None:
    bounty_id = make_bounty(chain)
    submission_id = make_submission(chain, bounty_id)
    pass_review_window(chain, submission_id)
    before = token_balances(chain)

    receipt = finalize(chain, bounty_id)

    assert credits(chain) == {OWNER: FEE, CLAIMANT: REWARD + BOND}
    assert chain.events(receipt, "Credited") == [
        {"account": address(chain, CLAIMANT), "amount": REWARD + BOND, "balance": REWARD + BOND}
    ]
    assert balance_changes(chain, before) == {}


def test_finalize_at_the_review_deadline_reverts_and_works_a_second_later(chain: Chain) -> None:
    bounty_id = make_bounty(chain)
    submission_id = make_submission(chain, bounty_id)
    review_deadline = get_submission(chain, submission_id)["reviewDeadline"]

    revert = chain.revert_of(
        finalize_call(chain, bounty_id), address(chain, STRANGER), at=review_deadline
    )
    assert revert == Revert("ReviewWindowOpen", (submission_id,))

    send_at(chain, finalize_call(chain, bounty_id), STRANGER, review_deadline + 1)
    assert get_submission(chain, submission_id)["status"] == SubmissionStatus.ACCEPTED


def test_finalize_does_not_wait_for_the_bounty_deadline(chain: Chain) -> None:
    bounty_id = make_bounty(chain, duration=30 * 24 * 3600)
    submission_id = make_submission(chain, bounty_id)
    pass_review_window(chain, submission_id)
    assert chain.timestamp() < get_bounty(chain, bounty_id)["deadline"]

    finalize(chain, bounty_id)

    assert get_bounty(chain, bounty_id)["status"] == BountyStatus.RESOLVED


def test_finalize_after_a_rejected_dispute(chain: Chain) -> None:
    bounty_id = make_bounty(chain)
    submission_id = make_submission(chain, bounty_id)
    resolve(chain, make_dispute(chain, submission_id), upheld=False)
    pass_review_window(chain, submission_id)

    finalize(chain, bounty_id)

    assert get_submission(chain, submission_id)["status"] == SubmissionStatus.ACCEPTED
    assert credits(chain) == {OWNER: FEE, CLAIMANT: REWARD + BOND + DISPUTE_BOND}


def test_finalize_after_advancing_past_a_rejected_submission(chain: Chain) -> None:
    bounty_id = make_bounty(chain)
    rejected = make_submission(chain, bounty_id)
    accepted = make_submission(chain, bounty_id, claimant=OTHER_CLAIMANT)
    reject_submission(chain, rejected)
    chain.send(board(chain).functions.advanceReviewCursor(bounty_id), address(chain, STRANGER))
    pass_review_window(chain, accepted)

    receipt = finalize(chain, bounty_id)

    assert get_submission(chain, accepted)["status"] == SubmissionStatus.ACCEPTED
    assert get_bounty(chain, bounty_id)["reviewCursor"] == 1
    assert chain.events(receipt, "BountyFinalized")[0]["claimant"] == address(chain, OTHER_CLAIMANT)
    assert credits(chain) == {
        OWNER: FEE,
        GROUT: BOND + DISPUTE_BOND,
        OTHER_CLAIMANT: REWARD + BOND,
    }


def test_finalize_leaves_later_submissions_submitted(chain: Chain) -> None:
    bounty_id = make_bounty(chain)
    accepted = make_submission(chain, bounty_id)
    later = make_submission(chain, bounty_id, claimant=OTHER_CLAIMANT)
    pass_review_window(chain, later)

    finalize(chain, bounty_id)

    assert get_submission(chain, accepted)["status"] == SubmissionStatus.ACCEPTED
    assert get_submission(chain, later)["status"] == SubmissionStatus.SUBMITTED
    bounty = get_bounty(chain, bounty_id)
    assert bounty["liveSubmissions"] == 1
    assert bounty["reviewCursor"] == 0


def test_finalize_with_a_rejected_submission_at_the_cursor_reverts(chain: Chain) -> None:
    bounty_id = make_bounty(chain)
    rejected = make_submission(chain, bounty_id)
    later = make_submission(chain, bounty_id, claimant=OTHER_CLAIMANT)
    reject_submission(chain, rejected)
    pass_review_window(chain, later)

    assert chain.revert_of(finalize_call(chain, bounty_id), address(chain, STRANGER)) == Revert(
        "WrongSubmissionStatus", (rejected, SubmissionStatus.REJECTED)
    )


def test_finalize_with_a_disputed_submission_at_the_cursor_reverts(chain: Chain) -> None:
    bounty_id = make_bounty(chain)
    disputed = make_submission(chain, bounty_id)
    later = make_submission(chain, bounty_id, claimant=OTHER_CLAIMANT)
    make_dispute(chain, disputed)
    pass_review_window(chain, later)

    assert chain.revert_of(finalize_call(chain, bounty_id), address(chain, STRANGER)) == Revert(
        "WrongSubmissionStatus", (disputed, SubmissionStatus.DISPUTED)
    )


def test_finalize_without_submissions_reverts(chain: Chain) -> None:
    bounty_id = make_bounty(chain)

    assert chain.revert_of(finalize_call(chain, bounty_id), address(chain, STRANGER)) == Revert(
        "NoSubmissionAtCursor", (bounty_id,)
    )


def test_finalize_with_the_cursor_past_the_queue_reverts(chain: Chain) -> None:
    bounty_id = make_bounty(chain)
    reject_submission(chain, make_submission(chain, bounty_id))
    chain.send(board(chain).functions.advanceReviewCursor(bounty_id), address(chain, STRANGER))

    assert chain.revert_of(finalize_call(chain, bounty_id), address(chain, STRANGER)) == Revert(
        "NoSubmissionAtCursor", (bounty_id,)
    )


def test_finalize_of_a_resolved_bounty_reverts(chain: Chain) -> None:
    bounty_id, _ = resolved_bounty(chain)

    assert chain.revert_of(finalize_call(chain, bounty_id), address(chain, STRANGER)) == Revert(
        "BountyNotOpen", (bounty_id,)
    )


def test_finalize_of_a_refunded_bounty_reverts(chain: Chain) -> None:
    bounty_id = refunded_bounty(chain)

    assert chain.revert_of(finalize_call(chain, bounty_id), address(chain, STRANGER)) == Revert(
        "BountyNotOpen", (bounty_id,)
    )


@pytest.mark.parametrize("bounty_id", [0, 2])
def test_finalize_of_unknown_bounty_reverts(chain: Chain, bounty_id: int) -> None:
    make_bounty(chain)

    assert chain.revert_of(finalize_call(chain, bounty_id), address(chain, STRANGER)) == Revert(
        "UnknownBounty", (bounty_id,)
    )
