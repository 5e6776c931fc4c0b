import pytest

from tests.chain import USDC, Chain, Revert
from tests.contracts.scenario import (
    CLAIMANT,
    FUNDING,
    MAX_ALLOWANCE,
    OWNER,
    POSTER,
    STRANGER,
    ZERO_ADDRESS,
    address,
    balance_changes,
    read_all,
    token_balances,
    usdc,
)

pytestmark = pytest.mark.chain


def allowance(chain: Chain, owner: int, spender: int) -> int:
    return int(usdc(chain).functions.allowance(address(chain, owner), address(chain, spender)).call())


def test_metadata_owner_and_dev_funding(chain: Chain) -> None:
    functions = usdc(chain).functions
    assert (functions.name().call(), functions.symbol().call(), functions.decimals().call()) == (
        "Test USD Coin",
        "tUSDC",
        6,
    )
    assert functions.owner().call() == address(chain, OWNER)
    assert functions.totalSupply().call() == 10 * FUNDING
    balances = read_all(chain, [functions.balanceOf(account) for account in chain.deployment.accounts])
    assert balances == [FUNDING] * 10


def test_owner_mints(chain: Chain) -> None:
    before = token_balances(chain)

    receipt = chain.send(usdc(chain).functions.mint(address(chain, STRANGER), 7), address(chain, OWNER))

    assert balance_changes(chain, before) == {STRANGER: 7}
    assert usdc(chain).functions.totalSupply().call() == 10 * FUNDING + 7
    assert chain.events(receipt, "Transfer") == [
        {"from": ZERO_ADDRESS, "to": address(chain, STRANGER), "value": 7}
    ]


def test_mint_by_anyone_else_reverts(chain: Chain) -> None:
    call = usdc(chain).functions.mint(address(chain, STRANGER), USDC)

    assert chain.revert_of(call, address(chain, STRANGER)) == Revert("NotOwner", ())


def test_mint_to_the_zero_address_reverts(chain: Chain) -> None:
    call = usdc(chain).functions.mint(ZERO_ADDRESS, USDC)

    assert chain.revert_of(call, address(chain, OWNER)) == Revert("ZeroAddress", ())


def test_approve_sets_and_overwrites_the_allowance(chain: Chain) -> None:
    approve = usdc(chain).functions.approve
    chain.send(approve(address(chain, STRANGER), 5 * USDC), address(chain, POSTER))

    receipt = chain.send(approve(address(chain, STRANGER), 2 * USDC), address(chain, POSTER))

    assert allowance(chain, POSTER, STRANGER) == 2 * USDC
    assert chain.events(receipt, "Approval") == [
        {"owner": address(chain, POSTER), "spender": address(chain, STRANGER), "value": 2 * USDC}
    ]


def test_transfer_moves_tokens(chain: Chain) -> None:
    before = token_balances(chain)

    receipt = chain.send(
        usdc(chain).functions.transfer(address(chain, STRANGER), 3 * USDC + 1), address(chain, POSTER)
    )

    assert balance_changes(chain, before) == {POSTER: -(3 * USDC + 1), STRANGER: 3 * USDC + 1}
    assert chain.events(receipt, "Transfer") == [
        {"from": address(chain, POSTER), "to": address(chain, STRANGER), "value": 3 * USDC + 1}
    ]


def test_transfer_of_the_whole_balance(chain: Chain) -> None:
    before = token_balances(chain)

    chain.send(usdc(chain).functions.transfer(address(chain, STRANGER), FUNDING), address(chain, POSTER))

    assert balance_changes(chain, before) == {POSTER: -FUNDING, STRANGER: FUNDING}


def test_transfer_over_the_balance_reverts(chain: Chain) -> None:
    call = usdc(chain).functions.transfer(address(chain, STRANGER), FUNDING + 1)

    assert chain.revert_of(call, address(chain, POSTER)) == Revert(
        "InsufficientBalance", (FUNDING, FUNDING + 1)
    )


def test_transfer_to_the_zero_address_reverts(chain: Chain) -> None:
    call = usdc(chain).functions.transfer(ZERO_ADDRESS, 1)

    assert chain.revert_of(call, address(chain, POSTER)) == Revert("ZeroAddress", ())


def test_transfer_from_spends_the_allowance(chain: Chain) -> None:
    chain.send(usdc(chain).functions.approve(address(chain, STRANGER), 5 * USDC), address(chain, POSTER))
    before = token_balances(chain)

    receipt = chain.send(
        usdc(chain).functions.transferFrom(address(chain, POSTER), address(chain, CLAIMANT), 2 * USDC),
        address(chain, STRANGER),
    )

    assert balance_changes(chain, before) == {POSTER: -2 * USDC, CLAIMANT: 2 * USDC}
    assert allowance(chain, POSTER, STRANGER) == 3 * USDC
    assert chain.events(receipt, "Transfer") == [
        {"from": address(chain, POSTER), "to": address(chain, CLAIMANT), "value": 2 * USDC}
    ]


def test_transfer_from_with_the_maximum_allowance_does_not_spend_it(chain: Chain) -> None:
    approve = usdc(chain).functions.approve(address(chain, STRANGER), MAX_ALLOWANCE)
    chain.send(approve, address(chain, POSTER))

    chain.send(
        usdc(chain).functions.transferFrom(address(chain, POSTER), address(chain, CLAIMANT), 2 * USDC),
        address(chain, STRANGER),
    )

    assert allowance(chain, POSTER, STRANGER) == MAX_ALLOWANCE


@pytest.mark.parametrize("allowed", [0, 2 * USDC - 1])
def test_transfer_from_over_the_allowance_reverts(chain: Chain, allowed: int) -> None:
    chain.send(usdc(chain).functions.approve(address(chain, STRANGER), allowed), address(chain, POSTER))
    call = usdc(chain).functions.transferFrom(address(chain, POSTER), address(chain, CLAIMANT), 2 * USDC)

    assert chain.revert_of(call, address(chain, STRANGER)) == Revert(
        "InsufficientAllowance", (allowed, 2 * USDC)
    )


@pytest.mark.parametrize("allowed", [FUNDING + 1, MAX_ALLOWANCE])
def test_transfer_from_over_the_balance_reverts(chain: Chain, allowed: int) -> None:
    chain.send(usdc(chain).functions.approve(address(chain, STRANGER), allowed), address(chain, POSTER))
    call = usdc(chain).functions.transferFrom(address(chain, POSTER), address(chain, CLAIMANT), FUNDING + 1)

    assert chain.revert_of(call, address(chain, STRANGER)) == Revert(
        "InsufficientBalance", (FUNDING, FUNDING + 1)
    )
    assert allowance(chain, POSTER, STRANGER) == allowed


def test_transfer_from_to_the_zero_address_reverts(chain: Chain) -> None:
    chain.send(usdc(chain).functions.approve(address(chain, STRANGER), USDC), address(chain, POSTER))
    call = usdc(chain).functions.transferFrom(address(chain, POSTER), ZERO_ADDRESS, USDC)

    assert chain.revert_of(call, address(chain, STRANGER)) == Revert("ZeroAddress", ())
