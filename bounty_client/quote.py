"""What posting a bounty costs: the contract's post fee and submission bond, rounded as it does."""

from __future__ import annotations

from dataclasses import dataclass

from bounty_client.errors import ValidationError
from bounty_client.validation import Uint, uint_out_of_range, validate_uint

BPS_DENOMINATOR = 10_000


@dataclass(frozen=True)
class QuoteConfig:
    """The contract's rates in basis points; the defaults are the reference contract's
    (`postFeeBps` 250 = 2.5 %, `submissionBondBps` 1000 = 10 %). Pass other values, for example
    read from the contract's views, to quote another deployment."""

    post_fee_bps: int = 250
    submission_bond_bps: int = 1_000

    def __post_init__(self) -> None:
        for name in ("post_fee_bps", "submission_bond_bps"):
            bps = validate_uint(getattr(self, name), 16)
            if bps > BPS_DENOMINATOR:
                raise ValidationError(f"{name} must be at most {BPS_DENOMINATOR}")
            object.__setattr__(self, name, bps)


@dataclass(frozen=True)
class CreateQuote:
    """The amounts of a `createBounty`, in USDC base units.

    `total_amount` (reward + post fee) is what the poster approves and the contract pulls;
    `bond_amount` is what each submitter will have to approve.
    """

    reward_amount: int
    fee_amount: int
    bond_amount: int
    total_amount: int


def _bps(amount: int, bps: int) -> int:
    # Exact floor(amount * bps / 10000), which is what the contract computes without overflow.
    return amount * bps // BPS_DENOMINATOR


def quote_create_amount(reward_amount: Uint, config: QuoteConfig | None = None) -> CreateQuote:
    """The post fee, submission bond and total funding of a bounty of `reward_amount`.

    Rounds down as the contract does: `fee = floor(reward * post_fee_bps / 10000)`,
    `bond = floor(reward * submission_bond_bps / 10000)`, `total = reward + fee`. The reward is
    validated as a uint256 (`number must be a safe uint`, `uint256 value out of range`), and so
    is the total, which the contract could not pull otherwise.
    """
    rates = config or QuoteConfig()
    reward = validate_uint(reward_amount, 256)
    fee = _bps(reward, rates.post_fee_bps)
    total = reward + fee
    if total >> 256:
        raise ValidationError(uint_out_of_range(256))
    return CreateQuote(
        reward_amount=reward,
        fee_amount=fee,
        bond_amount=_bps(reward, rates.submission_bond_bps),
        total_amount=total,
    )
