"""The owner's settings: grouts, parameters, arbiter, fee recipient and ownership."""

import pytest
from web3.contract.contract import ContractFunction

from tests.chain import Chain, Revert
from tests.contracts.scenario import (
    BOARD,
    BOND,
    CLAIMANT,
    DISPUTE_BOND,
    DISPUTE_HASH,
    DISPUTE_URI,
    FEE,
    GROUT,
    OTHER_GROUT,
    OWNER,
    PARTIES,
    POSTER,
    REVIEW_WINDOW,
    REWARD,
    STRANGER,
    SUBMISSION_HASH,
    SUBMISSION_URI,
    ZERO_ADDRESS,
    DisputeStatus,
    address,
    approve,
    balance_changes,
    block_time,
    board,
    credits,
    get_bounty,
    get_dispute,
    get_submission,
    make_bounty,
    make_dispute,
    make_submission,
    read_all,
    resolve,
    token_balances,
    usdc,
)

pytestmark = pytest.mark.chain

DEFAULT_PARAMETERS = (250, 1_000, DISPUTE_BOND, REVIEW_WINDOW)
NEW_PARAMETERS = (500, 2_000, 7 * 10**6, 3_600)


def owner_calls(chain: Chain) -> dict[str, ContractFunction]:
    """Every owner-only call, with valid arguments."""
    functions = board(chain).functions
    someone = address(chain, STRANGER)
    return {
        "setGrout": functions.setGrout(someone, True),
        "setParameters": functions.setParameters(*NEW_PARAMETERS),
        "setArbiter": functions.setArbiter(someone),
        "setFeeRecipient": functions.setFeeRecipient(someone),
        "transferOwnership": functions.transferOwnership(someone),
    }


def parameters(chain: Chain) -> tuple[int, ...]:
    functions = board(chain).functions
    views = (functions.postFeeBps, functions.submissionBondBps, functions.disputeBond, functions.reviewWindow)
    return tuple(read_all(chain, [view() for view in views]))


def test_deployment_roles_and_parameters(chain: Chain) -> None:
    functions = board(chain).functions
    roles = read_all(chain, [functions.owner(), functions.arbiter(), functions.feeRecipient()])
    assert roles == [address(chain, OWNER)] * 3
    assert functions.usdc().call() == usdc(chain).address
    assert functions.BPS_DENOMINATOR().call() == 10_000
    assert parameters(chain) == DEFAULT_PARAMETERS
    grouts = read_all(chain, [functions.isGrout(address(chain, party)) for party in PARTIES])
    assert dict(zip(PARTIES, grouts, strict=True)) == {
        party: party in (GROUT, OTHER_GROUT) for party in PARTIES
    }
    counts = [functions.bountyCount(), functions.submissionCount(), functions.disputeCount()]
    assert read_all(chain, counts) == [0, 0, 0]


@pytest.mark.parametrize(
    "function", ["setGrout", "setParameters", "setArbiter", "setFeeRecipient", "transferOwnership"]
)
@pytest.mark.parametrize("sender", [GROUT, STRANGER])
def test_owner_calls_by_anyone_else_revert(chain: Chain, function: str, sender: int) -> None:
    call = owner_calls(chain)[function]

    assert chain.revert_of(call, address(chain, sender)) == Revert("NotOwner", ())


@pytest.mark.parametrize("function", ["setGrout", "setArbiter", "setFeeRecipient", "transferOwnership"])
def test_owner_calls_with_the_zero_address_revert(chain: Chain, function: str) -> None:
    functions = board(chain).functions
    call = (
        functions.setGrout(ZERO_ADDRESS, True)
        if function == "setGrout"
        else getattr(functions, function)(ZERO_ADDRESS)
    )

    assert chain.revert_of(call, address(chain, OWNER)) == Revert("ZeroAddress", ())


def test_set_grout_whitelists_a_new_grout(chain: Chain) -> None:
    submission_id = make_submission(chain, make_bounty(chain))

    receipt = chain.send(
        board(chain).functions.setGrout(address(chain, STRANGER), True), address(chain, OWNER)
    )

    assert board(chain).functions.isGrout(address(chain, STRANGER)).call() is True
    assert chain.events(receipt, "GroutSet") == [
        {"grout": address(chain, STRANGER), "whitelisted": True}
    ]
    dispute_id = make_dispute(chain, submission_id, challenger=STRANGER)
    assert get_dispute(chain, dispute_id)["challenger"] == address(chain, STRANGER)


def test_set_grout_removes_a_grout(chain: Chain) -> None:
    submission_id = make_submission(chain, make_bounty(chain))
    approve(chain, GROUT, DISPUTE_BOND)

    receipt = chain.send(
        board(chain).functions.setGrout(address(chain, GROUT), False), address(chain, OWNER)
    )

    assert board(chain).functions.isGrout(address(chain, GROUT)).call() is False
    assert chain.events(receipt, "GroutSet") == [
        {"grout": address(chain, GROUT), "whitelisted": False}
    ]
    call = board(chain).functions.dispute(submission_id, DISPUTE_URI, DISPUTE_HASH)
    assert chain.revert_of(call, address(chain, GROUT)) == Revert("NotGrout", ())


def test_removed_grouts_pending_dispute_still_resolves(chain: Chain) -> None:
    submission_id = make_submission(chain, make_bounty(chain))
    dispute_id = make_dispute(chain, submission_id)
    chain.send(board(chain).functions.setGrout(address(chain, GROUT), False), address(chain, OWNER))

    resolve(chain, dispute_id, upheld=True)

    assert get_dispute(chain, dispute_id)["status"] == DisputeStatus.UPHELD
    assert credits(chain) == {OWNER: FEE, GROUT: BOND + DISPUTE_BOND}


def test_set_parameters_updates_the_views(chain: Chain) -> None:
    receipt = chain.send(
        board(chain).functions.setParameters(*NEW_PARAMETERS), address(chain, OWNER)
    )

    assert parameters(chain) == NEW_PARAMETERS
    fields = ("postFeeBps", "submissionBondBps", "disputeBond", "reviewWindow")
    assert chain.events(receipt, "ParametersSet") == [dict(zip(fields, NEW_PARAMETERS, strict=True))]


@pytest.mark.parametrize(
    "new_parameters",
    [(10_000, 10_000, 0, 1), (0, 0, 2**256 - 1, 365 * 86_400)],
    ids=["upper-bps-lowest-window", "zero-bps-largest-bond-and-window"],
)
def test_set_parameters_accepts_the_bounds(chain: Chain, new_parameters: tuple[int, int, int, int]) -> None:
    chain.send(board(chain).functions.setParameters(*new_parameters), address(chain, OWNER))

    assert parameters(chain) == new_parameters


@pytest.mark.parametrize(
    "new_parameters",
    [(10_001, 1_000, DISPUTE_BOND, 1), (250, 10_001, DISPUTE_BOND, 1), (250, 1_000, DISPUTE_BOND, 0),
     (250, 1_000, DISPUTE_BOND, 365 * 86_400 + 1)],
    ids=["post-fee-over-100-percent", "bond-over-100-percent", "zero-review-window", "review-window-over-a-year"],
)
def test_set_parameters_out_of_bounds_reverts(chain: Chain, new_parameters: tuple[int, int, int, int]) -> None:
    call = board(chain).functions.setParameters(*new_parameters)

    assert chain.revert_of(call, address(chain, OWNER)) == Revert("InvalidParameters", ())
    assert parameters(chain) == DEFAULT_PARAMETERS


def test_new_fee_bond_and_window_apply_to_later_bounties_only(chain: Chain) -> None:
    earlier = make_bounty(chain)
    chain.send(board(chain).functions.setParameters(*NEW_PARAMETERS), address(chain, OWNER))
    later = make_bounty(chain)

    def snapshot(bounty_id: int) -> tuple[int, int, int]:
        bounty = get_bounty(chain, bounty_id)
        return bounty["feeAmount"], bounty["bondAmount"], bounty["challengeWindow"]

    new_fee = REWARD * 500 // 10_000
    assert snapshot(earlier) == (FEE, BOND, REVIEW_WINDOW)
    assert snapshot(later) == (new_fee, REWARD * 2_000 // 10_000, 3_600)
    assert credits(chain) == {OWNER: FEE + new_fee}


def test_submissions_to_an_earlier_bounty_keep_its_bond_and_window(chain: Chain) -> None:
    bounty_id = make_bounty(chain)
    chain.send(board(chain).functions.setParameters(*NEW_PARAMETERS), address(chain, OWNER))
    approve(chain, CLAIMANT, BOND)
    before = token_balances(chain)

    receipt = chain.send(
        board(chain).functions.submit(bounty_id, SUBMISSION_URI, SUBMISSION_HASH),
        address(chain, CLAIMANT),
    )

    assert balance_changes(chain, before) == {CLAIMANT: -BOND, BOARD: BOND}
    submission = get_submission(chain, 1)
    assert submission["bondAmount"] == BOND
    assert submission["reviewDeadline"] == block_time(chain, receipt) + REVIEW_WINDOW


def test_disputes_pull_the_current_dispute_bond_and_keep_it(chain: Chain) -> None:
    submission_id = make_submission(chain, make_bounty(chain))
    earlier = make_dispute(chain, submission_id)
    chain.send(board(chain).functions.setParameters(*NEW_PARAMETERS), address(chain, OWNER))
    before = token_balances(chain)

    later = make_dispute(chain, submission_id, challenger=OTHER_GROUT)

    new_bond = NEW_PARAMETERS[2]
    assert balance_changes(chain, before) == {OTHER_GROUT: -new_bond, BOARD: new_bond}
    assert get_dispute(chain, earlier)["bondAmount"] == DISPUTE_BOND
    assert get_dispute(chain, later)["bondAmount"] == new_bond
    resolve(chain, earlier, upheld=False)
    resolve(chain, later, upheld=True)
    assert credits(chain) == {OWNER: FEE, CLAIMANT: DISPUTE_BOND, OTHER_GROUT: BOND + new_bond}


def test_set_arbiter_hands_dispute_resolution_over(chain: Chain) -> None:
    submission_id = make_submission(chain, make_bounty(chain))
    first = make_dispute(chain, submission_id)
    second = make_dispute(chain, submission_id, challenger=OTHER_GROUT)

    receipt = chain.send(
        board(chain).functions.setArbiter(address(chain, STRANGER)), address(chain, OWNER)
    )

    assert board(chain).functions.arbiter().call() == address(chain, STRANGER)
    assert chain.events(receipt, "ArbiterSet") == [{"arbiter": address(chain, STRANGER)}]
    old_arbiter = board(chain).functions.resolveDispute(first, False)
    assert chain.revert_of(old_arbiter, address(chain, OWNER)) == Revert("NotArbiter", ())
    chain.send(board(chain).functions.resolveDispute(second, False), address(chain, STRANGER))
    assert get_dispute(chain, second)["status"] == DisputeStatus.REJECTED


def test_set_fee_recipient_redirects_later_fees(chain: Chain) -> None:
    make_bounty(chain)

    receipt = chain.send(
        board(chain).functions.setFeeRecipient(address(chain, STRANGER)), address(chain, OWNER)
    )
    make_bounty(chain)

    assert board(chain).functions.feeRecipient().call() == address(chain, STRANGER)
    assert chain.events(receipt, "FeeRecipientSet") == [{"feeRecipient": address(chain, STRANGER)}]
    assert credits(chain) == {OWNER: FEE, STRANGER: FEE}


def test_transfer_ownership_hands_the_owner_calls_over(chain: Chain) -> None:
    receipt = chain.send(
        board(chain).functions.transferOwnership(address(chain, STRANGER)), address(chain, OWNER)
    )

    assert board(chain).functions.owner().call() == address(chain, STRANGER)
    assert chain.events(receipt, "OwnershipTransferred") == [
        {"previousOwner": address(chain, OWNER), "newOwner": address(chain, STRANGER)}
    ]
    set_grout = board(chain).functions.setGrout(address(chain, POSTER), True)
    assert chain.revert_of(set_grout, address(chain, OWNER)) == Revert("NotOwner", ())
    chain.send(set_grout, address(chain, STRANGER))
    assert board(chain).functions.isGrout(address(chain, POSTER)).call() is True


def test_transfer_ownership_keeps_arbiter_and_fee_recipient(chain: Chain) -> None:
    chain.send(
        board(chain).functions.transferOwnership(address(chain, STRANGER)), address(chain, OWNER)
    )

    assert board(chain).functions.arbiter().call() == address(chain, OWNER)
    assert board(chain).functions.feeRecipient().call() == address(chain, OWNER)
