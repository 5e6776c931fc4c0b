import pytest

from tests.chain import Chain, Revert
from tests.contracts.scenario import (
    BOND,
    CLAIMANT,
    DISPUTE_BOND,
    FEE,
    GROUT,
    OTHER_CLAIMANT,
    OTHER_GROUT,
    OWNER,
    POSTER,
    REWARD,
    STRANGER,
    BountyStatus,
    DisputeStatus,
    SubmissionStatus,
    address,
    balance_changes,
    board,
    credits,
    finalize,
    get_bounty,
    get_dispute,
    get_submission,
    make_bounty,
    make_dispute,
    make_submission,
    pass_review_window,
    resolve,
    token_balances,
)

pytestmark = pytest.mark.chain


@pytest.fixture
def submission_id(chain: Chain) -> int:
    return make_submission(chain, make_bounty(chain))


def test_upheld_dispute_rejects_the_submission(chain: Chain, submission_id: int) -> None:
    dispute_id = make_dispute(chain, submission_id)

    receipt = resolve(chain, dispute_id, upheld=True)

    assert get_dispute(chain, dispute_id)["status"] == DisputeStatus.UPHELD
    submission = get_submission(chain, submission_id)
    assert submission["status"] == SubmissionStatus.REJECTED
    assert submission["pendingDisputes"] == 0
    bounty = get_bounty(chain, 1)
    assert bounty["status"] == BountyStatus.OPEN
    assert bounty["liveSubmissions"] == 0
    assert chain.events(receipt, "DisputeResolved") == [
        {
            "disputeId": dispute_id,
            "submissionId": submission_id,
            "upheld": True,
            "submissionStatus": SubmissionStatus.REJECTED,
        }
    ]


def test_upheld_dispute_credits_submission_bond_and_dispute_bond_to_challenger(
    chain: Chain, submission_id: int
) -> None:
    dispute_id = make_dispute(chain, submission_id)
    before = token_balances(chain)

    receipt = resolve(chain, dispute_id, upheld=True)

    assert credits(chain) == {OWNER: FEE, GROUT: BOND + DISPUTE_BOND}
    assert chain.events(receipt, "Credited") == [
        {"account": address(chain, GROUT), "amount": BOND + DISPUTE_BOND, "balance": BOND + DISPUTE_BOND}
    ]
    assert balance_changes(chain, before) == {}


def test_rejected_dispute_returns_the_submission_to_submitted(chain: Chain, submission_id: int) -> None:
    dispute_id = make_dispute(chain, submission_id)

    receipt = resolve(chain, dispute_id, upheld=False)

    assert get_dispute(chain, dispute_id)["status"] == DisputeStatus.REJECTED
    submission = get_submission(chain, submission_id)
    assert submission["status"] == SubmissionStatus.SUBMITTED
    assert submission["pendingDisputes"] == 0
    assert get_bounty(chain, 1)["liveSubmissions"] == 1
    assert chain.events(receipt, "DisputeResolved") == [
        {
            "disputeId": dispute_id,
            "submissionId": submission_id,
            "upheld": False,
            "submissionStatus": SubmissionStatus.SUBMITTED,
        }
    ]


def test_rejected_dispute_credits_dispute_bond_to_claimant(chain: Chain, submission_id: int) -> None:
    dispute_id = make_dispute(chain, submission_id)
    before = token_balances(chain)

    receipt = resolve(chain, dispute_id, upheld=False)

    assert credits(chain) == {OWNER: FEE, CLAIMANT: DISPUTE_BOND}
    assert chain.events(receipt, "Credited") == [
        {"account": address(chain, CLAIMANT), "amount": DISPUTE_BOND, "balance": DISPUTE_BOND}
    ]
    assert balance_changes(chain, before) == {}


def test_rejected_dispute_keeps_the_submission_disputed_while_another_is_pending(
    chain: Chain, submission_id: int
) -> None:
    first = make_dispute(chain, submission_id)
    second = make_dispute(chain, submission_id, challenger=OTHER_GROUT)

    receipt = resolve(chain, first, upheld=False)

    submission = get_submission(chain, submission_id)
    assert submission["status"] == SubmissionStatus.DISPUTED
    assert submission["pendingDisputes"] == 1
    assert get_dispute(chain, second)["status"] == DisputeStatus.PENDING_HUMAN_REVIEW
    assert chain.events(receipt, "DisputeResolved") == [
        {
            "disputeId": first,
            "submissionId": submission_id,
            "upheld": False,
            "submissionStatus": SubmissionStatus.DISPUTED,
        }
    ]

    receipt = resolve(chain, second, upheld=False)

    assert get_submission(chain, submission_id)["status"] == SubmissionStatus.SUBMITTED
    assert chain.events(receipt, "DisputeResolved")[0]["submissionStatus"] == (
        SubmissionStatus.SUBMITTED
    )
    assert credits(chain) == {OWNER: FEE, CLAIMANT: 2 * DISPUTE_BOND}


def test_upheld_dispute_after_a_rejected_one_pays_each_side_its_share(chain: Chain, submission_id: int) -> None:
    first = make_dispute(chain, submission_id)
    second = make_dispute(chain, submission_id, challenger=OTHER_GROUT)

    resolve(chain, first, upheld=False)
    receipt = resolve(chain, second, upheld=True)

    assert get_submission(chain, submission_id)["status"] == SubmissionStatus.REJECTED
    assert chain.events(receipt, "DisputeResolved")[0]["submissionStatus"] == (
        SubmissionStatus.REJECTED
    )
    assert credits(chain) == {
        OWNER: FEE,
        CLAIMANT: DISPUTE_BOND,
        OTHER_GROUT: BOND + DISPUTE_BOND,
    }


def test_upheld_dispute_leaves_other_disputes_pending(chain: Chain, submission_id: int) -> None:
    first = make_dispute(chain, submission_id)
    second = make_dispute(chain, submission_id, challenger=OTHER_GROUT)

    resolve(chain, first, upheld=True)

    assert get_dispute(chain, second)["status"] == DisputeStatus.PENDING_HUMAN_REVIEW
    submission = get_submission(chain, submission_id)
    assert submission["status"] == SubmissionStatus.REJECTED
    assert submission["pendingDisputes"] == 1
    assert credits(chain) == {OWNER: FEE, GROUT: BOND + DISPUTE_BOND}


@pytest.mark.parametrize("upheld", [True, False])
def test_dispute_can_be_resolved_after_another_submission_won(chain: Chain, upheld: bool) -> None:
    bounty_id = make_bounty(chain)
    winner = make_submission(chain, bounty_id)
    loser = make_submission(chain, bounty_id, claimant=OTHER_CLAIMANT)
    dispute_id = make_dispute(chain, loser)
    pass_review_window(chain, winner)
    finalize(chain, bounty_id)

    resolve(chain, dispute_id, upheld=upheld)

    expected = SubmissionStatus.REJECTED if upheld else SubmissionStatus.SUBMITTED
    assert get_submission(chain, loser)["status"] == expected
    assert get_bounty(chain, bounty_id)["liveSubmissions"] == (0 if upheld else 1)
    paid = {GROUT: BOND + DISPUTE_BOND} if upheld else {OTHER_CLAIMANT: DISPUTE_BOND}
    assert credits(chain) == {OWNER: FEE, CLAIMANT: REWARD + BOND, **paid}


@pytest.mark.parametrize("sender", [POSTER, CLAIMANT, GROUT, STRANGER])
def test_resolve_by_non_arbiter_reverts(chain: Chain, submission_id: int, sender: int) -> None:
    dispute_id = make_dispute(chain, submission_id)
    call = board(chain).functions.resolveDispute(dispute_id, True)

    assert chain.revert_of(call, address(chain, sender)) == Revert("NotArbiter", ())


@pytest.mark.parametrize("unknown_id", [0, 2])
def test_resolve_unknown_dispute_reverts(chain: Chain, submission_id: int, unknown_id: int) -> None:
    make_dispute(chain, submission_id)
    call = board(chain).functions.resolveDispute(unknown_id, True)

    assert chain.revert_of(call, address(chain, OWNER)) == Revert(
        "UnknownDispute", (unknown_id,)
    )


@pytest.mark.parametrize("second_decision", [True, False])
@pytest.mark.parametrize("first_decision", [True, False])
def test_resolve_already_resolved_dispute_reverts(
    chain: Chain, submission_id: int, first_decision: bool, second_decision: bool
) -> None:
    dispute_id = make_dispute(chain, submission_id)
    resolve(chain, dispute_id, upheld=first_decision)
    call = board(chain).functions.resolveDispute(dispute_id, second_decision)

    status = DisputeStatus.UPHELD if first_decision else DisputeStatus.REJECTED
    assert chain.revert_of(call, address(chain, OWNER)) == Revert(
        "WrongDisputeStatus", (dispute_id, status)
    )


def test_resolve_cancelled_dispute_reverts(chain: Chain, submission_id: int) -> None:
    first = make_dispute(chain, submission_id)
    second = make_dispute(chain, submission_id, challenger=OTHER_GROUT)
    resolve(chain, first, upheld=True)
    chain.send(board(chain).functions.cancelResolvedDispute(second), address(chain, STRANGER))
    call = board(chain).functions.resolveDispute(second, False)

    assert chain.revert_of(call, address(chain, OWNER)) == Revert(
        "WrongDisputeStatus", (second, DisputeStatus.CANCELLED)
    )


@pytest.mark.parametrize("upheld", [True, False])
def test_resolve_pending_dispute_of_rejected_submission_reverts(chain: Chain, submission_id: int, upheld: bool) -> None:
    first = make_dispute(chain, submission_id)
    second = make_dispute(chain, submission_id, challenger=OTHER_GROUT)
    resolve(chain, first, upheld=True)
    call = board(chain).functions.resolveDispute(second, upheld)

    assert chain.revert_of(call, address(chain, OWNER)) == Revert(
        "WrongSubmissionStatus", (submission_id, SubmissionStatus.REJECTED)
    )
