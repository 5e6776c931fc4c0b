import pytest
from web3.contract.contract import ContractFunction

from tests.chain import Chain, Revert
from tests.contracts.scenario import (
    BOND,
    CLAIMANT,
    DISPUTE_BOND,
    FEE,
    GROUT,
    OTHER_GROUT,
    OWNER,
    STRANGER,
    DisputeStatus,
    SubmissionStatus,
    address,
    balance_changes,
    board,
    credits,
    get_dispute,
    get_submission,
    make_bounty,
    make_dispute,
    make_submission,
    resolve,
    token_balances,
)

pytestmark = pytest.mark.chain


def cancel(chain: Chain, dispute_id: int) -> ContractFunction:
    return board(chain).functions.cancelResolvedDispute(dispute_id)


@pytest.fixture
def submission_id(chain: Chain) -> int:
    return make_submission(chain, make_bounty(chain))


def upheld_and_pending(chain: Chain, submission_id: int) -> tuple[int, int]:
    """Two disputes on the submission: the first upheld, the second still pending."""
    upheld = make_dispute(chain, submission_id)
    pending = make_dispute(chain, submission_id, challenger=OTHER_GROUT)
    resolve(chain, upheld, upheld=True)
    return upheld, pending


@pytest.mark.parametrize("sender", [STRANGER, OTHER_GROUT, OWNER, CLAIMANT])
def test_cancel_pending_dispute_of_rejected_submission(chain: Chain, submission_id: int, sender: int) -> None:
    _, pending = upheld_and_pending(chain, submission_id)
    before = token_balances(chain)

    receipt = chain.send(cancel(chain, pending), address(chain, sender))

    assert get_dispute(chain, pending)["status"] == DisputeStatus.CANCELLED
    submission = get_submission(chain, submission_id)
    assert submission["status"] == SubmissionStatus.REJECTED
    assert submission["pendingDisputes"] == 0
    assert chain.events(receipt, "DisputeCancelled") == [
        {"disputeId": pending, "submissionId": submission_id}
    ]
    assert balance_changes(chain, before) == {}


def test_cancel_credits_the_dispute_bond_back_to_its_challenger(chain: Chain, submission_id: int) -> None:
    _, pending = upheld_and_pending(chain, submission_id)

    receipt = chain.send(cancel(chain, pending), address(chain, STRANGER))

    assert credits(chain) == {OWNER: FEE, GROUT: BOND + DISPUTE_BOND, OTHER_GROUT: DISPUTE_BOND}
    assert chain.events(receipt, "Credited") == [
        {"account": address(chain, OTHER_GROUT), "amount": DISPUTE_BOND, "balance": DISPUTE_BOND}
    ]


def test_cancel_adds_to_the_challengers_earlier_credit(chain: Chain, submission_id: int) -> None:
    upheld = make_dispute(chain, submission_id)
    pending = make_dispute(chain, submission_id)
    resolve(chain, upheld, upheld=True)

    receipt = chain.send(cancel(chain, pending), address(chain, STRANGER))

    total = BOND + 2 * DISPUTE_BOND
    assert credits(chain) == {OWNER: FEE, GROUT: total}
    assert chain.events(receipt, "Credited") == [
        {"account": address(chain, GROUT), "amount": DISPUTE_BOND, "balance": total}
    ]


@pytest.mark.parametrize("unknown_id", [0, 3])
def test_cancel_unknown_dispute_reverts(chain: Chain, submission_id: int, unknown_id: int) -> None:
    upheld_and_pending(chain, submission_id)

    assert chain.revert_of(cancel(chain, unknown_id), address(chain, STRANGER)) == Revert(
        "UnknownDispute", (unknown_id,)
    )


def test_cancel_pending_dispute_of_disputed_submission_reverts(chain: Chain, submission_id: int) -> None:
    dispute_id = make_dispute(chain, submission_id)

    assert chain.revert_of(cancel(chain, dispute_id), address(chain, STRANGER)) == Revert(
        "WrongSubmissionStatus", (submission_id, SubmissionStatus.DISPUTED)
    )


def test_cancel_upheld_dispute_reverts(chain: Chain, submission_id: int) -> None:
    upheld, _ = upheld_and_pending(chain, submission_id)

    assert chain.revert_of(cancel(chain, upheld), address(chain, STRANGER)) == Revert(
        "WrongDisputeStatus", (upheld, DisputeStatus.UPHELD)
    )


def test_cancel_rejected_dispute_reverts(chain: Chain, submission_id: int) -> None:
    dispute_id = make_dispute(chain, submission_id)
    resolve(chain, dispute_id, upheld=False)

    assert chain.revert_of(cancel(chain, dispute_id), address(chain, STRANGER)) == Revert(
        "WrongDisputeStatus", (dispute_id, DisputeStatus.REJECTED)
    )


def test_cancel_twice_reverts(chain: Chain, submission_id: int) -> None:
    _, pending = upheld_and_pending(chain, submission_id)
    chain.send(cancel(chain, pending), address(chain, STRANGER))

    assert chain.revert_of(cancel(chain, pending), address(chain, STRANGER)) == Revert(
        "WrongDisputeStatus", (pending, DisputeStatus.CANCELLED)
    )
    assert credits(chain) == {OWNER: FEE, GROUT: BOND + DISPUTE_BOND, OTHER_GROUT: DISPUTE_BOND}
