"""Post fee and submission bond round down: fee = reward * 250 // 10000, bond = reward * 1000 // 10000."""

import pytest
from web3.exceptions import ContractPanicError

from tests.chain import Chain
from tests.contracts.scenario import (
    BOARD,
    BOUNTY_HASH,
    BOUNTY_URI,
    CLAIMANT,
    DISPUTE_BOND,
    DURATION,
    OWNER,
    POSTER,
    REVIEW_WINDOW,
    STRANGER,
    SUBMISSION_HASH,
    SUBMISSION_URI,
    address,
    approve,
    balance_changes,
    board,
    credits,
    finalize,
    get_bounty,
    get_submission,
    make_bounty,
    make_submission,
    pass_review_window,
    quote,
    token_balances,
)

pytestmark = pytest.mark.chain

UINT256_MAX = 2**256 - 1


@pytest.mark.parametrize(
    "reward",
    [0, 1, 9, 10, 39, 40, 399, 400, 10_001, 123_456_789, 2**255 + 12_345],
)
def test_quote_create_rounds_fee_and_bond_down(chain: Chain, reward: int) -> None:
    fee, bond = quote(reward)

    assert board(chain).functions.quoteCreate(reward).call() == [fee, bond, reward + fee]


@pytest.mark.parametrize("bond_bps", [0, 1_000, 9_999, 10_000])
def test_quote_create_floors_the_bond_of_the_largest_reward(chain: Chain, bond_bps: int) -> None:
    parameters = board(chain).functions.setParameters(0, bond_bps, DISPUTE_BOND, REVIEW_WINDOW)
    chain.send(parameters, address(chain, OWNER))

    assert board(chain).functions.quoteCreate(UINT256_MAX).call() == [
        0,
        UINT256_MAX * bond_bps // 10_000,
        UINT256_MAX,
    ]


def test_quote_create_of_a_reward_whose_total_overflows_reverts(chain: Chain) -> None:
    # reward + fee does not fit in a uint256: such a bounty could never be funded either.
    with pytest.raises(ContractPanicError, match="0x11"):
        board(chain).functions.quoteCreate(UINT256_MAX).call()


@pytest.mark.parametrize("reward", [1, 39, 10_001, 399_999])
def test_create_bounty_pulls_reward_plus_floored_fee(chain: Chain, reward: int) -> None:
    fee, bond = quote(reward)
    before = token_balances(chain)

    bounty_id = make_bounty(chain, reward=reward)

    assert balance_changes(chain, before) == {POSTER: -(reward + fee), BOARD: reward + fee}
    bounty = get_bounty(chain, bounty_id)
    assert (bounty["feeAmount"], bounty["bondAmount"]) == (fee, bond)
    assert credits(chain) == ({OWNER: fee} if fee else {})


@pytest.mark.parametrize("reward", [1, 39, 10_001, 399_999])
def test_submit_pulls_the_floored_bond_and_finalize_pays_it_back(chain: Chain, reward: int) -> None:
    fee, bond = quote(reward)
    bounty_id = make_bounty(chain, reward=reward)
    before = token_balances(chain)

    submission_id = make_submission(chain, bounty_id)

    assert balance_changes(chain, before) == ({CLAIMANT: -bond, BOARD: bond} if bond else {})
    pass_review_window(chain, submission_id)
    finalize(chain, bounty_id)
    before = token_balances(chain)
    chain.send(board(chain).functions.withdraw(), address(chain, CLAIMANT))
    assert balance_changes(chain, before) == {CLAIMANT: reward + bond, BOARD: -(reward + bond)}
    assert credits(chain) == ({OWNER: fee} if fee else {})


def test_a_reward_under_ten_base_units_charges_no_fee_and_no_bond(chain: Chain) -> None:
    approve(chain, POSTER, 9)
    create = board(chain).functions.createBounty(BOUNTY_URI, BOUNTY_HASH, 9, DURATION)

    receipt = chain.send(create, address(chain, POSTER))

    assert chain.events(receipt, "Credited") == []
    assert chain.events(receipt, "Transfer") == [
        {"from": address(chain, POSTER), "to": board(chain).address, "value": 9}
    ]

    submit = board(chain).functions.submit(1, SUBMISSION_URI, SUBMISSION_HASH)
    receipt = chain.send(submit, address(chain, STRANGER))

    assert chain.events(receipt, "Transfer") == []
    assert get_submission(chain, 1)["bondAmount"] == 0
