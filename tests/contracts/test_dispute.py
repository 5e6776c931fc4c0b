import pytest
from web3.contract.contract import ContractFunction

from tests.chain import Chain, Revert
from tests.contracts.scenario import (
    BOARD,
    CLAIMANT,
    DISPUTE_BOND,
    DISPUTE_HASH,
    DISPUTE_URI,
    FUNDING,
    GROUT,
    OTHER_GROUT,
    OWNER,
    POSTER,
    STRANGER,
    DisputeStatus,
    SubmissionStatus,
    address,
    approve,
    balance_changes,
    board,
    get_dispute,
    get_submission,
    make_bounty,
    make_dispute,
    make_submission,
    submission_in,
    token_balances,
    usdc,
)

pytestmark = pytest.mark.chain


def dispute(chain: Chain, submission_id: int) -> ContractFunction:
    return board(chain).functions.dispute(submission_id, DISPUTE_URI, DISPUTE_HASH)


@pytest.fixture
def submission_id(chain: Chain) -> int:
    return make_submission(chain, make_bounty(chain))


def test_dispute_records_a_pending_dispute_and_marks_the_submission_disputed(chain: Chain, submission_id: int) -> None:
    approve(chain, GROUT, DISPUTE_BOND)

    chain.send(dispute(chain, submission_id), address(chain, GROUT))

    assert board(chain).functions.disputeCount().call() == 1
    assert get_dispute(chain, 1) == {
        "submissionId": submission_id,
        "challenger": address(chain, GROUT),
        "status": DisputeStatus.PENDING_HUMAN_REVIEW,
        "bondAmount": DISPUTE_BOND,
        "metadataHash": DISPUTE_HASH,
        "metadataUri": DISPUTE_URI,
    }
    submission = get_submission(chain, submission_id)
    assert submission["status"] == SubmissionStatus.DISPUTED
    assert submission["pendingDisputes"] == 1


def test_dispute_emits_dispute_created(chain: Chain, submission_id: int) -> None:
    approve(chain, GROUT, DISPUTE_BOND)

    receipt = chain.send(dispute(chain, submission_id), address(chain, GROUT))

    assert chain.events(receipt, "DisputeCreated") == [
        {
            "disputeId": 1,
            "submissionId": submission_id,
            "challenger": address(chain, GROUT),
            "bountyId": 1,
            "bondAmount": DISPUTE_BOND,
            "metadataUri": DISPUTE_URI,
            "metadataHash": DISPUTE_HASH,
        }
    ]


def test_dispute_pulls_the_dispute_bond(chain: Chain, submission_id: int) -> None:
    approve(chain, GROUT, DISPUTE_BOND)
    before = token_balances(chain)

    receipt = chain.send(dispute(chain, submission_id), address(chain, GROUT))

    assert balance_changes(chain, before) == {GROUT: -DISPUTE_BOND, BOARD: DISPUTE_BOND}
    assert chain.events(receipt, "Transfer") == [
        {"from": address(chain, GROUT), "to": board(chain).address, "value": DISPUTE_BOND}
    ]


@pytest.mark.parametrize("second_challenger", [GROUT, OTHER_GROUT])
def test_a_disputed_submission_can_be_disputed_again(chain: Chain, submission_id: int, second_challenger: int) -> None:
    make_dispute(chain, submission_id)

    dispute_id = make_dispute(chain, submission_id, challenger=second_challenger)

    assert dispute_id == 2
    assert get_dispute(chain, dispute_id)["status"] == DisputeStatus.PENDING_HUMAN_REVIEW
    submission = get_submission(chain, submission_id)
    assert submission["status"] == SubmissionStatus.DISPUTED
    assert submission["pendingDisputes"] == 2


@pytest.mark.parametrize("sender", [OWNER, POSTER, CLAIMANT, STRANGER])
def test_dispute_by_a_non_grout_reverts(chain: Chain, submission_id: int, sender: int) -> None:
    approve(chain, sender, DISPUTE_BOND)

    assert chain.revert_of(dispute(chain, submission_id), address(chain, sender)) == Revert(
        "NotGrout", ()
    )


@pytest.mark.parametrize("unknown_id", [0, 2])
def test_dispute_of_unknown_submission_reverts(chain: Chain, submission_id: int, unknown_id: int) -> None:
    approve(chain, GROUT, DISPUTE_BOND)

    assert chain.revert_of(dispute(chain, unknown_id), address(chain, GROUT)) == Revert(
        "UnknownSubmission", (unknown_id,)
    )


@pytest.mark.parametrize(
    "status",
    [SubmissionStatus.ACCEPTED, SubmissionStatus.REJECTED, SubmissionStatus.REFUNDED],
    ids=lambda status: status.name.lower(),
)
def test_dispute_of_a_closed_submission_reverts(chain: Chain, status: SubmissionStatus) -> None:
    closed_id = submission_in(chain, status)
    approve(chain, GROUT, DISPUTE_BOND)

    assert chain.revert_of(dispute(chain, closed_id), address(chain, GROUT)) == Revert(
        "WrongSubmissionStatus", (closed_id, status)
    )


@pytest.mark.parametrize(
    "status",
    [SubmissionStatus.SUBMITTED, SubmissionStatus.DISPUTED],
    ids=lambda status: status.name.lower(),
)
def test_dispute_on_a_resolved_bounty_reverts(chain: Chain, status: SubmissionStatus) -> None:
    live_id = submission_in(chain, status, bounty_resolved=True)
    approve(chain, GROUT, DISPUTE_BOND)

    assert chain.revert_of(dispute(chain, live_id), address(chain, GROUT)) == Revert(
        "BountyNotOpen", (get_submission(chain, live_id)["bountyId"],)
    )


def test_dispute_at_the_review_deadline_is_allowed(chain: Chain, submission_id: int) -> None:
    review_deadline = get_submission(chain, submission_id)["reviewDeadline"]

    dispute_id = make_dispute(chain, submission_id, at=review_deadline)

    assert get_dispute(chain, dispute_id)["status"] == DisputeStatus.PENDING_HUMAN_REVIEW


@pytest.mark.parametrize("already_disputed", [False, True])
def test_dispute_after_the_review_deadline_reverts(chain: Chain, submission_id: int, already_disputed: bool) -> None:
    if already_disputed:
        make_dispute(chain, submission_id)
    approve(chain, GROUT, DISPUTE_BOND)
    review_deadline = get_submission(chain, submission_id)["reviewDeadline"]

    revert = chain.revert_of(
        dispute(chain, submission_id), address(chain, GROUT), at=review_deadline + 1
    )

    assert revert == Revert("ReviewWindowClosed", (submission_id,))


@pytest.mark.parametrize("allowance", [0, DISPUTE_BOND - 1])
def test_dispute_without_enough_allowance_reverts(chain: Chain, submission_id: int, allowance: int) -> None:
    approve(chain, GROUT, allowance)

    assert chain.revert_of(dispute(chain, submission_id), address(chain, GROUT)) == Revert(
        "InsufficientAllowance", (allowance, DISPUTE_BOND)
    )


def test_dispute_with_insufficient_balance_reverts(chain: Chain, submission_id: int) -> None:
    approve(chain, GROUT, DISPUTE_BOND)
    give_away = usdc(chain).functions.transfer(address(chain, STRANGER), FUNDING)
    chain.send(give_away, address(chain, GROUT))

    assert chain.revert_of(dispute(chain, submission_id), address(chain, GROUT)) == Revert(
        "InsufficientBalance", (0, DISPUTE_BOND)
    )
    assert get_submission(chain, submission_id)["status"] == SubmissionStatus.SUBMITTED


@pytest.mark.parametrize("unknown_id", [0, 2])
def test_get_dispute_of_unknown_dispute_reverts(chain: Chain, submission_id: int, unknown_id: int) -> None:
    make_dispute(chain, submission_id)
    call = board(chain).functions.getDispute(unknown_id)

    assert chain.revert_of(call, address(chain, GROUT)) == Revert(
        "UnknownDispute", (unknown_id,)
    )
