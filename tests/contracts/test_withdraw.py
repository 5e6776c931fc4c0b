import pytest
from web3.contract.contract import ContractFunction

from tests.chain import Chain, Revert
from tests.contracts.scenario import (
    BOARD,
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
    ZERO_ADDRESS,
    SubmissionStatus,
    address,
    balance_changes,
    board,
    credits,
    make_bounty,
    make_dispute,
    make_submission,
    refunded_bounty,
    reject_submission,
    resolve,
    resolved_bounty,
    submission_in,
    token_balances,
)

pytestmark = pytest.mark.chain


def upheld_dispute(chain: Chain) -> None:
    reject_submission(chain, make_submission(chain, make_bounty(chain)))


def rejected_dispute(chain: Chain) -> None:
    submission_id = make_submission(chain, make_bounty(chain))
    resolve(chain, make_dispute(chain, submission_id), upheld=False)


def cancelled_dispute(chain: Chain) -> None:
    submission_id = make_submission(chain, make_bounty(chain))
    upheld = make_dispute(chain, submission_id)
    pending = make_dispute(chain, submission_id, challenger=OTHER_GROUT)
    resolve(chain, upheld, upheld=True)
    chain.send(board(chain).functions.cancelResolvedDispute(pending), address(chain, STRANGER))


def refunded_bond(chain: Chain) -> None:
    submission_in(chain, SubmissionStatus.REFUNDED)


def withdrawal(chain: Chain, method: str) -> ContractFunction:
    """The caller's withdrawal through `method`; withdrawTo pays STRANGER."""
    if method == "withdraw":
        return board(chain).functions.withdraw()
    return board(chain).functions.withdrawTo(address(chain, STRANGER))


# Each resolution path and the credits it leaves, the post fee included.
RESOLUTIONS = {
    "upheld-dispute": (upheld_dispute, {OWNER: FEE, GROUT: BOND + DISPUTE_BOND}),
    "rejected-dispute": (rejected_dispute, {OWNER: FEE, CLAIMANT: DISPUTE_BOND}),
    "cancelled-dispute": (
        cancelled_dispute,
        {OWNER: FEE, GROUT: BOND + DISPUTE_BOND, OTHER_GROUT: DISPUTE_BOND},
    ),
    "finalize": (resolved_bounty, {OWNER: FEE, CLAIMANT: REWARD + BOND}),
    "refund-expired": (refunded_bounty, {OWNER: FEE, POSTER: REWARD}),
    "refund-submission-bond": (
        refunded_bond,
        {OWNER: FEE, CLAIMANT: REWARD + BOND, OTHER_CLAIMANT: BOND},
    ),
}


@pytest.mark.parametrize("resolution", RESOLUTIONS)
def test_every_credited_party_withdraws_exactly_its_credit(chain: Chain, resolution: str) -> None:
    make_resolution, expected = RESOLUTIONS[resolution]
    make_resolution(chain)
    assert credits(chain) == expected

    for party, amount in expected.items():
        before = token_balances(chain)
        receipt = chain.send(board(chain).functions.withdraw(), address(chain, party))

        assert balance_changes(chain, before) == {party: amount, BOARD: -amount}
        assert chain.events(receipt, "Withdrawn") == [
            {"account": address(chain, party), "recipient": address(chain, party), "amount": amount}
        ]
    assert credits(chain) == {}


def test_withdraw_pays_out_the_credit_and_zeroes_it(chain: Chain) -> None:
    make_bounty(chain)
    make_bounty(chain)
    before = token_balances(chain)

    receipt = chain.send(board(chain).functions.withdraw(), address(chain, OWNER))

    assert balance_changes(chain, before) == {OWNER: 2 * FEE, BOARD: -2 * FEE}
    assert board(chain).functions.credits(address(chain, OWNER)).call() == 0
    assert chain.events(receipt, "Transfer") == [
        {"from": board(chain).address, "to": address(chain, OWNER), "value": 2 * FEE}
    ]


def test_withdraw_to_pays_the_recipient_from_the_callers_credit(chain: Chain) -> None:
    resolved_bounty(chain)
    before = token_balances(chain)

    receipt = chain.send(
        board(chain).functions.withdrawTo(address(chain, STRANGER)), address(chain, CLAIMANT)
    )

    assert balance_changes(chain, before) == {STRANGER: REWARD + BOND, BOARD: -(REWARD + BOND)}
    assert credits(chain) == {OWNER: FEE}
    assert chain.events(receipt, "Withdrawn") == [
        {
            "account": address(chain, CLAIMANT),
            "recipient": address(chain, STRANGER),
            "amount": REWARD + BOND,
        }
    ]
    assert chain.events(receipt, "Transfer") == [
        {"from": board(chain).address, "to": address(chain, STRANGER), "value": REWARD + BOND}
    ]


def test_withdraw_to_the_caller_itself(chain: Chain) -> None:
    make_bounty(chain)
    before = token_balances(chain)

    chain.send(board(chain).functions.withdrawTo(address(chain, OWNER)), address(chain, OWNER))

    assert balance_changes(chain, before) == {OWNER: FEE, BOARD: -FEE}
    assert credits(chain) == {}


@pytest.mark.parametrize("method", ["withdraw", "withdrawTo"])
def test_withdraw_without_credit_reverts(chain: Chain, method: str) -> None:
    make_bounty(chain)

    assert chain.revert_of(withdrawal(chain, method), address(chain, POSTER)) == Revert(
        "NothingToWithdraw", ()
    )


@pytest.mark.parametrize("method", ["withdraw", "withdrawTo"])
def test_withdraw_twice_reverts(chain: Chain, method: str) -> None:
    make_bounty(chain)
    chain.send(withdrawal(chain, method), address(chain, OWNER))

    assert chain.revert_of(withdrawal(chain, method), address(chain, OWNER)) == Revert(
        "NothingToWithdraw", ()
    )


def test_withdraw_to_the_zero_address_reverts(chain: Chain) -> None:
    make_bounty(chain)
    call = board(chain).functions.withdrawTo(ZERO_ADDRESS)

    assert chain.revert_of(call, address(chain, OWNER)) == Revert("ZeroAddress", ())
    assert credits(chain) == {OWNER: FEE}
