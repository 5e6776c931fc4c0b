"""Roles, amounts and small steps shared by the contract tests.

Parties are account indexes of the dev chain (see contracts/devchain.py); the helpers turn them
into addresses. Every helper mines real transactions through `Chain.send`, so a step that
unexpectedly reverts fails the test where it happens.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from web3 import Web3
from web3.contract import Contract
from web3.types import TxReceipt

from contracts.devchain import bounty_contract, usdc_contract
from tests.chain import USDC, Chain


class BountyStatus(IntEnum):
    OPEN = 0
    RESOLVED = 1
    REFUNDED = 2


class SubmissionStatus(IntEnum):
    SUBMITTED = 0
    DISPUTED = 1
    ACCEPTED = 2
    REJECTED = 3
    REFUNDED = 4


class DisputeStatus(IntEnum):
    PENDING_HUMAN_REVIEW = 0
    UPHELD = 1
    REJECTED = 2
    CANCELLED = 3


# Account 0 is owner, arbiter and fee recipient; 3 and 4 are the whitelisted grouts.
OWNER = 0
POSTER = 1
CLAIMANT = 2
GROUT = 3
OTHER_GROUT = 4
OTHER_CLAIMANT = 5
STRANGER = 6
PARTIES = (OWNER, POSTER, CLAIMANT, GROUT, OTHER_GROUT, OTHER_CLAIMANT, STRANGER)
BOARD = "board"
ZERO_ADDRESS = "0x" + "00" * 20
MAX_ALLOWANCE = 2**256 - 1

FUNDING = 1_000_000 * USDC
REWARD = 100 * USDC
FEE = REWARD * 250 // 10_000
BOND = REWARD * 1_000 // 10_000
DISPUTE_BOND = 5 * USDC
REVIEW_WINDOW = 24 * 3600
DURATION = 7 * 24 * 3600

BOUNTY_URI = "ipfs://bounty"
BOUNTY_HASH = Web3.keccak(text="bounty metadata")
SUBMISSION_URI = "ipfs://submission"
SUBMISSION_HASH = Web3.keccak(text="submission metadata")
DISPUTE_URI = "ipfs://dispute"
DISPUTE_HASH = Web3.keccak(text="dispute metadata")


_contracts: dict[tuple[int, str], Contract] = {}


def board(chain: Chain) -> Contract:
    """The bounty contract, built once per session: building a web3 Contract takes ~10 ms."""
    key = (id(chain.w3), chain.deployment.contract_address)
    if key not in _contracts:
        _contracts[key] = bounty_contract(chain.w3, chain.deployment.contract_address)
    return _contracts[key]


def usdc(chain: Chain) -> Contract:
    """The test USDC contract, built once per session."""
    key = (id(chain.w3), chain.deployment.usdc_address)
    if key not in _contracts:
        _contracts[key] = usdc_contract(chain.w3, chain.deployment.usdc_address)
    return _contracts[key]


def address(chain: Chain, party: int) -> str:
    return chain.account(party)


def approve(chain: Chain, party: int, amount: int) -> None:
    """Lets the board pull `amount` from `party`."""
    chain.send(usdc(chain).functions.approve(board(chain).address, amount), address(chain, party))


def allow_pulls(chain: Chain, party: int, amount: int) -> None:
    """Makes sure the board may pull `amount` from `party`, approving it without limit (which the
    token never spends down) the first time: one approval per party and test keeps tests fast.
    The exact amounts pulled are pinned by the balance tests of each pull."""
    allowance = usdc(chain).functions.allowance(address(chain, party), board(chain).address)
    if allowance.call() < amount:
        approve(chain, party, MAX_ALLOWANCE)


def _new_id(chain: Chain, receipt: TxReceipt, event: str) -> int:
    """The id of the record the transaction created: the first indexed argument of `event`."""
    topic = getattr(board(chain).events, event).topic
    (record_id,) = (
        int.from_bytes(log["topics"][1], "big")
        for log in receipt["logs"]
        if log["address"] == board(chain).address and log["topics"][0].to_0x_hex() == topic
    )
    return record_id


def quote(reward: int) -> tuple[int, int]:
    """The post fee and submission bond of `reward` at the default parameters."""
    return reward * 250 // 10_000, reward * 1_000 // 10_000


def block_time(chain: Chain, receipt: TxReceipt) -> int:
    return int(chain.w3.eth.get_block(receipt["blockNumber"])["timestamp"])


def _struct(chain: Chain, getter: str, record_id: int) -> dict[str, Any]:
    """A struct view as a dict keyed by the struct's field names, in struct order."""
    function = getattr(board(chain).functions, getter)
    fields = [c["name"] for c in function.abi["outputs"][0]["components"]]
    return dict(zip(fields, function(record_id).call(), strict=True))


def get_bounty(chain: Chain, bounty_id: int) -> dict[str, Any]:
    return _struct(chain, "getBounty", bounty_id)


def get_submission(chain: Chain, submission_id: int) -> dict[str, Any]:
    return _struct(chain, "getSubmission", submission_id)


def get_dispute(chain: Chain, dispute_id: int) -> dict[str, Any]:
    return _struct(chain, "getDispute", dispute_id)


def read_all(chain: Chain, calls: list[Any]) -> list[Any]:
    """The results of several view calls, read in one JSON-RPC batch."""
    with chain.w3.batch_requests() as batch:
        for call in calls:
            batch.add(call)
        return list(batch.execute())


def credits(chain: Chain) -> dict[int, int]:
    """The non-zero credited balances, by account index."""
    credit_of = board(chain).functions.credits
    amounts = read_all(chain, [credit_of(address(chain, party)) for party in PARTIES])
    return {party: amount for party, amount in zip(PARTIES, amounts, strict=True) if amount}


def token_balances(chain: Chain) -> dict[int | str, int]:
    """Token balances of every party (by account index) and of the board (`BOARD`)."""
    holders: dict[int | str, str] = {party: address(chain, party) for party in PARTIES}
    holders[BOARD] = board(chain).address
    balance_of = usdc(chain).functions.balanceOf
    amounts = read_all(chain, [balance_of(a) for a in holders.values()])
    return dict(zip(holders, amounts, strict=True))


def balance_changes(chain: Chain, before: dict[int | str, int]) -> dict[int | str, int]:
    """The token balances that changed since `before`, as signed differences."""
    after = token_balances(chain)
    return {holder: after[holder] - before[holder] for holder in after if after[holder] != before[holder]}


@dataclass(frozen=True)
class _FixedGas:
    """A contract call that `Chain.send` transacts without a gas estimate: web3 estimates
    against the latest block, not against the timestamp set for the next one."""

    call: Any

    def transact(self, transaction: dict[str, Any]) -> Any:
        return self.call.transact({**transaction, "gas": 3_000_000})


def send_at(chain: Chain, call: Any, party: int, timestamp: int) -> TxReceipt:
    """Mines `call` from `party` in a block with exactly this timestamp; fails if it reverts."""
    chain.set_next_timestamp(timestamp)
    receipt = chain.send(_FixedGas(call), address(chain, party))
    assert block_time(chain, receipt) == timestamp
    return receipt


def _send(chain: Chain, call: Any, party: int, at: int | None) -> TxReceipt:
    return chain.send(call, address(chain, party)) if at is None else send_at(chain, call, party, at)


def make_bounty(
    chain: Chain, *, poster: int = POSTER, reward: int = REWARD, duration: int = DURATION
) -> int:
    """Posts a bounty; returns its id."""
    _, _, total = board(chain).functions.quoteCreate(reward).call()
    allow_pulls(chain, poster, total)
    call = board(chain).functions.createBounty(BOUNTY_URI, BOUNTY_HASH, reward, duration)
    return _new_id(chain, chain.send(call, address(chain, poster)), "BountyCreated")


def make_submission(
    chain: Chain, bounty_id: int, *, claimant: int = CLAIMANT, at: int | None = None
) -> int:
    """Submits to the bounty (in a block at `at`, if given); returns the submission's id."""
    allow_pulls(chain, claimant, get_bounty(chain, bounty_id)["bondAmount"])
    call = board(chain).functions.submit(bounty_id, SUBMISSION_URI, SUBMISSION_HASH)
    return _new_id(chain, _send(chain, call, claimant, at), "SubmissionCreated")


def make_dispute(
    chain: Chain, submission_id: int, *, challenger: int = GROUT, at: int | None = None
) -> int:
    """Disputes the submission (in a block at `at`, if given); returns the dispute's id."""
    allow_pulls(chain, challenger, board(chain).functions.disputeBond().call())
    call = board(chain).functions.dispute(submission_id, DISPUTE_URI, DISPUTE_HASH)
    return _new_id(chain, _send(chain, call, challenger, at), "DisputeCreated")


def resolve(chain: Chain, dispute_id: int, *, upheld: bool) -> TxReceipt:
    return chain.send(board(chain).functions.resolveDispute(dispute_id, upheld), address(chain, OWNER))


def reject_submission(chain: Chain, submission_id: int) -> None:
    """Rejects a submission through an upheld dispute."""
    resolve(chain, make_dispute(chain, submission_id), upheld=True)


def pass_review_window(chain: Chain, submission_id: int) -> None:
    """Mines a block one second after the submission's review deadline."""
    chain.mine(get_submission(chain, submission_id)["reviewDeadline"] + 1)


def pass_deadline(chain: Chain, bounty_id: int) -> None:
    """Mines a block one second after the bounty's deadline."""
    chain.mine(get_bounty(chain, bounty_id)["deadline"] + 1)


def finalize(chain: Chain, bounty_id: int) -> TxReceipt:
    return chain.send(board(chain).functions.finalize(bounty_id), address(chain, STRANGER))


def resolved_bounty(chain: Chain) -> tuple[int, int]:
    """A bounty resolved by accepting its only submission; returns (bounty, submission)."""
    bounty_id = make_bounty(chain)
    submission_id = make_submission(chain, bounty_id)
    pass_review_window(chain, submission_id)
    finalize(chain, bounty_id)
    return bounty_id, submission_id


def refunded_bounty(chain: Chain) -> int:
    """An expired bounty nobody submitted to, refunded to its poster."""
    bounty_id = make_bounty(chain)
    pass_deadline(chain, bounty_id)
    chain.send(board(chain).functions.refundExpired(bounty_id), address(chain, STRANGER))
    return bounty_id


def submission_in(chain: Chain, status: SubmissionStatus, *, bounty_resolved: bool = False) -> int:
    """A submission of OTHER_CLAIMANT in `status` (accepted: of CLAIMANT). With `bounty_resolved`,
    and always for accepted and refunded ones, the bounty is then resolved by accepting an
    earlier submission of CLAIMANT."""
    if status in (SubmissionStatus.ACCEPTED, SubmissionStatus.REFUNDED):
        bounty_resolved = True
    bounty_id = make_bounty(chain)
    winner = make_submission(chain, bounty_id) if bounty_resolved else None
    submission_id = make_submission(chain, bounty_id, claimant=OTHER_CLAIMANT)
    if status == SubmissionStatus.DISPUTED:
        make_dispute(chain, submission_id)
    elif status == SubmissionStatus.REJECTED:
        reject_submission(chain, submission_id)
    if winner is None:
        return submission_id
    pass_review_window(chain, winner)
    finalize(chain, bounty_id)
    if status == SubmissionStatus.ACCEPTED:
        return winner
    if status == SubmissionStatus.REFUNDED:
        refund = board(chain).functions.refundSubmissionBond(submission_id)
        chain.send(refund, address(chain, STRANGER))
    return submission_id
