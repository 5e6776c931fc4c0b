import pytest
from web3.contract.contract import ContractFunction

from tests.chain import Chain, Revert
from tests.contracts.scenario import (
    BOARD,
    BOND,
    BOUNTY_HASH,
    BOUNTY_URI,
    DURATION,
    FEE,
    FUNDING,
    OWNER,
    POSTER,
    REVIEW_WINDOW,
    REWARD,
    BountyStatus,
    address,
    allow_pulls,
    approve,
    balance_changes,
    block_time,
    board,
    credits,
    get_bounty,
    get_submission,
    make_bounty,
    make_submission,
    send_at,
    token_balances,
    usdc,
)

pytestmark = pytest.mark.chain


def create(chain: Chain, reward: int = REWARD, duration: int = DURATION) -> ContractFunction:
    return board(chain).functions.createBounty(BOUNTY_URI, BOUNTY_HASH, reward, duration)


def test_create_bounty_records_an_open_bounty(chain: Chain) -> None:
    approve(chain, POSTER, REWARD + FEE)
    receipt = chain.send(create(chain), address(chain, POSTER))

    assert board(chain).functions.bountyCount().call() == 1
    assert get_bounty(chain, 1) == {
        "poster": address(chain, POSTER),
        "status": BountyStatus.OPEN,
        "duration": DURATION,
        "deadline": block_time(chain, receipt) + DURATION,
        "challengeWindow": REVIEW_WINDOW,
        "rewardAmount": REWARD,
        "feeAmount": FEE,
        "bondAmount": BOND,
        "reviewCursor": 0,
        "liveSubmissions": 0,
        "metadataHash": BOUNTY_HASH,
        "metadataUri": BOUNTY_URI,
    }
    assert board(chain).functions.submissionQueue(1).call() == []


def test_create_bounty_emits_bounty_created(chain: Chain) -> None:
    approve(chain, POSTER, REWARD + FEE)
    receipt = chain.send(create(chain), address(chain, POSTER))

    assert chain.events(receipt, "BountyCreated") == [
        {
            "bountyId": 1,
            "poster": address(chain, POSTER),
            "rewardAmount": REWARD,
            "feeAmount": FEE,
            "bondAmount": BOND,
            "duration": DURATION,
            "deadline": block_time(chain, receipt) + DURATION,
            "challengeWindow": REVIEW_WINDOW,
            "metadataUri": BOUNTY_URI,
            "metadataHash": BOUNTY_HASH,
        }
    ]


def test_create_bounty_pulls_reward_plus_fee(chain: Chain) -> None:
    approve(chain, POSTER, REWARD + FEE)
    before = token_balances(chain)

    receipt = chain.send(create(chain), address(chain, POSTER))

    assert balance_changes(chain, before) == {POSTER: -(REWARD + FEE), BOARD: REWARD + FEE}
    assert chain.events(receipt, "Transfer") == [
        {"from": address(chain, POSTER), "to": board(chain).address, "value": REWARD + FEE}
    ]
    allowance = usdc(chain).functions.allowance(address(chain, POSTER), board(chain).address)
    assert allowance.call() == 0


def test_create_bounty_credits_fee_to_fee_recipient(chain: Chain) -> None:
    approve(chain, POSTER, REWARD + FEE)
    receipt = chain.send(create(chain), address(chain, POSTER))

    assert credits(chain) == {OWNER: FEE}
    assert chain.events(receipt, "Credited") == [
        {"account": address(chain, OWNER), "amount": FEE, "balance": FEE}
    ]


def test_fee_credits_accumulate_over_bounties(chain: Chain) -> None:
    make_bounty(chain)
    approve(chain, POSTER, REWARD + FEE)
    receipt = chain.send(create(chain), address(chain, POSTER))

    assert credits(chain) == {OWNER: 2 * FEE}
    assert chain.events(receipt, "Credited") == [
        {"account": address(chain, OWNER), "amount": FEE, "balance": 2 * FEE}
    ]


def test_bounty_ids_are_sequential(chain: Chain) -> None:
    assert [make_bounty(chain) for _ in range(3)] == [1, 2, 3]
    assert board(chain).functions.bountyCount().call() == 3


def test_create_bounty_with_zero_reward_reverts(chain: Chain) -> None:
    approve(chain, POSTER, REWARD + FEE)

    assert chain.revert_of(create(chain, reward=0), address(chain, POSTER)) == Revert(
        "ZeroAmount", ()
    )


def test_create_bounty_with_zero_duration_reverts(chain: Chain) -> None:
    approve(chain, POSTER, REWARD + FEE)

    assert chain.revert_of(create(chain, duration=0), address(chain, POSTER)) == Revert(
        "InvalidDuration", ()
    )


LATEST_DEADLINE = 2**64 - 1 - 86_400  # a submission at it still has a review deadline in uint64


def test_create_bounty_accepts_the_latest_deadline_a_review_window_can_follow(chain: Chain) -> None:
    approve(chain, POSTER, REWARD + FEE)
    now = chain.timestamp() + 10

    send_at(chain, create(chain, duration=LATEST_DEADLINE - now), POSTER, now)

    assert get_bounty(chain, 1)["deadline"] == LATEST_DEADLINE


@pytest.mark.parametrize("overshoot", [1, 10**9])
def test_create_bounty_with_a_deadline_no_review_window_can_follow_reverts(chain: Chain, overshoot: int) -> None:
    approve(chain, POSTER, REWARD + FEE)
    now = chain.timestamp() + 10
    duration = LATEST_DEADLINE - now + overshoot

    revert = chain.revert_of(create(chain, duration=duration), address(chain, POSTER), at=now)

    assert revert == Revert("InvalidDuration", ())


@pytest.mark.parametrize(
    "allowance", [0, REWARD, REWARD + FEE - 1], ids=["none", "reward-only", "one-short"]
)
def test_create_bounty_without_enough_allowance_reverts(chain: Chain, allowance: int) -> None:
    approve(chain, POSTER, allowance)

    assert chain.revert_of(create(chain), address(chain, POSTER)) == Revert(
        "InsufficientAllowance", (allowance, REWARD + FEE)
    )


def test_create_bounty_with_insufficient_balance_reverts(chain: Chain) -> None:
    approve(chain, POSTER, 2**256 - 1)
    total = FUNDING + FUNDING * 250 // 10_000

    assert chain.revert_of(create(chain, reward=FUNDING), address(chain, POSTER)) == Revert(
        "InsufficientBalance", (FUNDING, total)
    )


def test_failed_create_bounty_leaves_no_trace(chain: Chain) -> None:
    before = token_balances(chain)

    chain.revert_of(create(chain), address(chain, POSTER))

    assert balance_changes(chain, before) == {}
    assert credits(chain) == {}
    assert board(chain).functions.bountyCount().call() == 0


@pytest.mark.parametrize("view", ["getBounty", "submissionQueue"])
def test_bounty_views_of_unknown_bounty_revert(chain: Chain, view: str) -> None:
    make_bounty(chain)
    call = getattr(board(chain).functions, view)(2)

    assert chain.revert_of(call, address(chain, POSTER)) == Revert("UnknownBounty", (2,))


def test_a_submission_at_the_latest_deadline_gets_a_review_deadline_that_fits(chain: Chain) -> None:
    now = chain.timestamp() + 10
    _, _, total = board(chain).functions.quoteCreate(REWARD).call()
    allow_pulls(chain, POSTER, total)
    send_at(chain, create(chain, duration=LATEST_DEADLINE - now), POSTER, now)

    submission_id = make_submission(chain, 1, at=LATEST_DEADLINE)

    assert get_submission(chain, submission_id)["reviewDeadline"] == 2**64 - 1
