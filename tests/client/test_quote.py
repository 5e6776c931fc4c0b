"""quote_create_amount: the contract's rates and rounding."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bounty_client import CreateQuote, QuoteConfig, ValidationError, quote_create_amount
from tests.chain import USDC
from tests.client.conftest import exactly


def contract_bps(amount: int, bps: int) -> int:
    """The contract's overflow-free formula, written out independently."""
    return (amount // 10_000) * bps + ((amount % 10_000) * bps) // 10_000


def test_it_quotes_the_reference_rates():
    assert quote_create_amount(100 * USDC) == CreateQuote(
        reward_amount=100_000_000, fee_amount=2_500_000, bond_amount=10_000_000, total_amount=102_500_000
    )


@pytest.mark.parametrize(
    ("reward", "fee", "bond"),
    [(1, 0, 0), (39, 0, 3), (40, 1, 4), (399, 9, 39), (9_999, 249, 999), (10_001, 250, 1_000)],
)
def test_it_rounds_down_like_the_contract(reward, fee, bond):
    quote = quote_create_amount(reward)
    assert (quote.fee_amount, quote.bond_amount, quote.total_amount) == (fee, bond, reward + fee)


def test_it_takes_other_rates_and_decimal_strings():
    quote = quote_create_amount("1000000", QuoteConfig(post_fee_bps=10_000, submission_bond_bps=1))
    assert quote == CreateQuote(reward_amount=1_000_000, fee_amount=1_000_000, bond_amount=100, total_amount=2_000_000)


@given(
    reward=st.integers(min_value=0, max_value=(2**256 - 1) * 10_000 // 10_250),
    post_fee_bps=st.integers(min_value=0, max_value=250),
    submission_bond_bps=st.integers(min_value=0, max_value=10_000),
)
def test_it_matches_the_contract_formula_across_uint256(reward, post_fee_bps, submission_bond_bps):
    quote = quote_create_amount(reward, QuoteConfig(post_fee_bps, submission_bond_bps))
    assert quote.fee_amount == contract_bps(reward, post_fee_bps)
    assert quote.bond_amount == contract_bps(reward, submission_bond_bps)
    assert quote.total_amount == reward + quote.fee_amount


@pytest.mark.parametrize(
    ("reward", "message"),
    [(1.5, "number must be a safe uint"), (-1, "number must be a safe uint"), (True, "number must be a safe uint"),
     (2**256, "uint256 value out of range"), (2**256 - 1, "uint256 value out of range")],
)
def test_it_validates_the_reward_and_the_total(reward, message):
    with pytest.raises(ValidationError, match=exactly(message)):
        quote_create_amount(reward)


@pytest.mark.parametrize("rates", [{"post_fee_bps": 10_001}, {"submission_bond_bps": 65_535}])
def test_it_refuses_rates_above_one_hundred_percent(rates):
    with pytest.raises(ValidationError, match="must be at most 10000"):
        QuoteConfig(**rates)


@pytest.mark.chain
def test_it_agrees_with_the_contracts_quote_view(chain):
    for reward in (1, 39, 399, 100 * USDC, 123_456_789, 2**200 + 12_345):
        fee, bond, total = chain.board.functions.quoteCreate(reward).call()
        assert quote_create_amount(reward) == CreateQuote(reward, fee, bond, total)


@pytest.mark.chain
def test_it_agrees_with_the_contract_after_the_owner_changes_the_rates(chain):
    chain.send(chain.board.functions.setParameters(333, 1_234, 5 * USDC, 86_400), chain.deployment.owner)
    config = QuoteConfig(
        post_fee_bps=chain.board.functions.postFeeBps().call(),
        submission_bond_bps=chain.board.functions.submissionBondBps().call(),
    )
    for reward in (7_777, 100 * USDC + 1):
        fee, bond, total = chain.board.functions.quoteCreate(reward).call()
        assert quote_create_amount(reward, config) == CreateQuote(reward, fee, bond, total)
