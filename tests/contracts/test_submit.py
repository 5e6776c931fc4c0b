import pytest
from web3.contract.contract import ContractFunction

from tests.chain import Chain, Revert
from tests.contracts.scenario import (
    BOARD,
    BOND,
    CLAIMANT,
    FUNDING,
    OTHER_CLAIMANT,
    REVIEW_WINDOW,
    STRANGER,
    SUBMISSION_HASH,
    SUBMISSION_URI,
    SubmissionStatus,
    address,
    approve,
    balance_changes,
    block_time,
    board,
    get_bounty,
    get_submission,
    make_bounty,
    make_submission,
    refunded_bounty,
    resolved_bounty,
    token_balances,
    usdc,
)

pytestmark = pytest.mark.chain


def submit(chain: Chain, bounty_id: int) -> ContractFunction:
    return board(chain).functions.submit(bounty_id, SUBMISSION_URI, SUBMISSION_HASH)


def test_submit_records_a_submitted_submission(chain: Chain) -> None:
    bounty_id = make_bounty(chain)
    approve(chain, CLAIMANT, BOND)

    receipt = chain.send(submit(chain, bounty_id), address(chain, CLAIMANT))

    assert board(chain).functions.submissionCount().call() == 1
    assert get_submission(chain, 1) == {
        "bountyId": bounty_id,
        "claimant": address(chain, CLAIMANT),
        "status": SubmissionStatus.SUBMITTED,
        "reviewDeadline": block_time(chain, receipt) + REVIEW_WINDOW,
        "pendingDisputes": 0,
        "bondAmount": BOND,
        "metadataHash": SUBMISSION_HASH,
        "metadataUri": SUBMISSION_URI,
    }
    assert get_bounty(chain, bounty_id)["liveSubmissions"] == 1
    assert board(chain).functions.submissionQueue(bounty_id).call() == [1]


def test_submit_emits_submission_created(chain: Chain) -> None:
    bounty_id = make_bounty(chain)
    approve(chain, CLAIMANT, BOND)

    receipt = chain.send(submit(chain, bounty_id), address(chain, CLAIMANT))

    assert chain.events(receipt, "SubmissionCreated") == [
        {
            "submissionId": 1,
            "bountyId": bounty_id,
            "claimant": address(chain, CLAIMANT),
            "bondAmount": BOND,
            "reviewDeadline": block_time(chain, receipt) + REVIEW_WINDOW,
            "metadataUri": SUBMISSION_URI,
            "metadataHash": SUBMISSION_HASH,
        }
    ]


def test_submit_pulls_the_bounty_bond(chain: Chain) -> None:
    bounty_id = make_bounty(chain)
    approve(chain, CLAIMANT, BOND)
    before = token_balances(chain)

    receipt = chain.send(submit(chain, bounty_id), address(chain, CLAIMANT))

    assert balance_changes(chain, before) == {CLAIMANT: -BOND, BOARD: BOND}
    assert chain.events(receipt, "Transfer") == [
        {"from": address(chain, CLAIMANT), "to": board(chain).address, "value": BOND}
    ]


def test_submissions_queue_in_submission_order(chain: Chain) -> None:
    first, second = make_bounty(chain), make_bounty(chain)

    submission_ids = [
        make_submission(chain, first, claimant=CLAIMANT),
        make_submission(chain, second, claimant=CLAIMANT),
        make_submission(chain, first, claimant=OTHER_CLAIMANT),
        make_submission(chain, first, claimant=CLAIMANT),
    ]

    assert submission_ids == [1, 2, 3, 4]
    assert board(chain).functions.submissionQueue(first).call() == [1, 3, 4]
    assert board(chain).functions.submissionQueue(second).call() == [2]
    assert get_bounty(chain, first)["liveSubmissions"] == 3
    assert get_bounty(chain, first)["reviewCursor"] == 0


def test_submit_at_the_deadline_is_allowed(chain: Chain) -> None:
    bounty_id = make_bounty(chain)
    deadline = get_bounty(chain, bounty_id)["deadline"]

    submission_id = make_submission(chain, bounty_id, at=deadline)

    assert get_submission(chain, submission_id)["reviewDeadline"] == deadline + REVIEW_WINDOW


def test_submit_after_deadline_reverts(chain: Chain) -> None:
    bounty_id = make_bounty(chain)
    approve(chain, CLAIMANT, BOND)
    deadline = get_bounty(chain, bounty_id)["deadline"]

    revert = chain.revert_of(submit(chain, bounty_id), address(chain, CLAIMANT), at=deadline + 1)

    assert revert == Revert("BountyDeadlinePassed", (bounty_id,))


@pytest.mark.parametrize("bounty_id", [0, 2])
def test_submit_to_unknown_bounty_reverts(chain: Chain, bounty_id: int) -> None:
    make_bounty(chain)
    approve(chain, CLAIMANT, BOND)

    assert chain.revert_of(submit(chain, bounty_id), address(chain, CLAIMANT)) == Revert(
        "UnknownBounty", (bounty_id,)
    )


def test_submit_to_resolved_bounty_reverts(chain: Chain) -> None:
    bounty_id, _ = resolved_bounty(chain)
    approve(chain, CLAIMANT, BOND)

    assert chain.revert_of(submit(chain, bounty_id), address(chain, OTHER_CLAIMANT)) == Revert(
        "BountyNotOpen", (bounty_id,)
    )


def test_submit_to_refunded_bounty_reverts(chain: Chain) -> None:
    bounty_id = refunded_bounty(chain)
    approve(chain, CLAIMANT, BOND)

    assert chain.revert_of(submit(chain, bounty_id), address(chain, CLAIMANT)) == Revert(
        "BountyNotOpen", (bounty_id,)
    )


@pytest.mark.parametrize("allowance", [0, BOND - 1])
def test_submit_without_enough_allowance_reverts(chain: Chain, allowance: int) -> None:
    bounty_id = make_bounty(chain)
    approve(chain, CLAIMANT, allowance)

    assert chain.revert_of(submit(chain, bounty_id), address(chain, CLAIMANT)) == Revert(
        "InsufficientAllowance", (allowance, BOND)
    )


def test_submit_with_insufficient_balance_reverts(chain: Chain) -> None:
    bounty_id = make_bounty(chain)
    approve(chain, CLAIMANT, BOND)
    give_away = usdc(chain).functions.transfer(address(chain, STRANGER), FUNDING - BOND + 1)
    chain.send(give_away, address(chain, CLAIMANT))

    assert chain.revert_of(submit(chain, bounty_id), address(chain, CLAIMANT)) == Revert(
        "InsufficientBalance", (BOND - 1, BOND)
    )
    assert get_bounty(chain, bounty_id)["liveSubmissions"] == 0
    assert board(chain).functions.submissionQueue(bounty_id).call() == []


@pytest.mark.parametrize("submission_id", [0, 2])
def test_get_submission_of_unknown_submission_reverts(chain: Chain, submission_id: int) -> None:
    make_submission(chain, make_bounty(chain))
    call = board(chain).functions.getSubmission(submission_id)

    assert chain.revert_of(call, address(chain, CLAIMANT)) == Revert(
        "UnknownSubmission", (submission_id,)
    )
