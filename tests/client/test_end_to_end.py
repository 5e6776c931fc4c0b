"""Every built transaction, signed by a dev account through web3.py and sent to anvil, has its
effect on the reference contract."""

from __future__ import annotations

from typing import cast

import pytest
from web3.types import TxParams

from bounty_client import (
    TransactionBuilder,
    UnsignedTransaction,
    metadata_hash,
    metadata_to_data_uri,
    quote_create_amount,
)
from contracts.devchain import increase_time
from tests.chain import USDC, Chain

pytestmark = pytest.mark.chain

POSTER, CLAIMANT, OTHER_CLAIMANT, LATE_CLAIMANT, RECIPIENT = 1, 2, 5, 6, 7
GROUT, OTHER_GROUT = 3, 4
REWARD = 100 * USDC
DISPUTE_BOND = 5 * USDC
DAY = 86_400
SUBMITTED, DISPUTED, ACCEPTED, REJECTED, REFUNDED = range(5)


@pytest.fixture
def builder(chain: Chain, monkeypatch) -> TransactionBuilder:
    """A builder for the anvil deployment, configured the way an operator would: from the
    environment, with nobody typing an address."""
    monkeypatch.setenv("BOUNTY_CHAIN_ID", str(chain.deployment.chain_id))
    monkeypatch.setenv("BOUNTY_CONTRACT_ADDRESS", chain.deployment.contract_address)
    monkeypatch.setenv("BOUNTY_USDC_ADDRESS", chain.deployment.usdc_address)
    return TransactionBuilder.from_env()


def send(chain: Chain, tx: UnsignedTransaction, account: int):
    """Signs `tx` as dev account `account` (anvil holds its key) and mines it successfully.

    The dict goes to web3.py as built; the cast is for mypy only, since web3 types `value` as
    an int, while the spec's shape (which web3 accepts) has the hex string "0x0".
    """
    params = cast(TxParams, {**tx, "from": chain.account(account)})
    receipt = chain.w3.eth.wait_for_transaction_receipt(chain.w3.eth.send_transaction(params))
    assert receipt["status"] == 1, receipt
    return receipt


def post_bounty(chain, builder, *, duration=DAY, title="Port the parser") -> int:
    quote = quote_create_amount(REWARD)
    send(chain, builder.approve_usdc(quote.total_amount), POSTER)
    metadata = {"title": title}
    receipt = send(
        chain,
        builder.create_bounty(
            metadata_uri=metadata_to_data_uri(metadata),
            metadata_hash=metadata_hash(metadata),
            reward_amount=quote.reward_amount,
            duration=duration,
        ),
        POSTER,
    )
    return int(chain.events(receipt, "BountyCreated")[0]["bountyId"])


def submit_work(chain, builder, bounty_id: int, account: int) -> int:
    send(chain, builder.approve_usdc(quote_create_amount(REWARD).bond_amount), account)
    metadata = {"work": f"by account {account}"}
    receipt = send(
        chain,
        builder.submit(
            bounty_id=bounty_id, metadata_uri=metadata_to_data_uri(metadata), metadata_hash=metadata_hash(metadata)
        ),
        account,
    )
    return int(chain.events(receipt, "SubmissionCreated")[0]["submissionId"])


def dispute_work(chain, builder, submission_id: int, grout: int) -> int:
    send(chain, builder.approve_usdc(DISPUTE_BOND), grout)
    metadata = {"reason": "copied from elsewhere"}
    receipt = send(
        chain,
        builder.dispute(submission_id=submission_id, metadata_uri=metadata_to_data_uri(metadata),
                        metadata_hash=metadata_hash(metadata)),
        grout,
    )
    return int(chain.events(receipt, "DisputeCreated")[0]["disputeId"])


def test_approve_usdc_sets_the_contracts_allowance(chain, builder):
    send(chain, builder.approve_usdc(123_456), POSTER)
    assert chain.usdc.functions.allowance(chain.account(POSTER), chain.deployment.contract_address).call() == 123_456


def test_create_bounty_posts_the_metadata_and_pulls_reward_plus_fee(chain, builder):
    balance = chain.usdc.functions.balanceOf(chain.account(POSTER)).call()
    metadata = {"title": "Port the parser", "tags": ["rust", "ünïcode"]}
    quote = quote_create_amount(REWARD)
    send(chain, builder.approve_usdc(quote.total_amount), POSTER)
    receipt = send(
        chain,
        builder.create_bounty(metadata_uri=metadata_to_data_uri(metadata), metadata_hash=metadata_hash(metadata),
                              reward_amount=str(REWARD), duration=DAY),
        POSTER,
    )
    (event,) = chain.events(receipt, "BountyCreated")
    assert event["metadataUri"] == metadata_to_data_uri(metadata)
    assert "0x" + event["metadataHash"].hex() == metadata_hash(metadata)
    assert (event["rewardAmount"], event["feeAmount"], event["bondAmount"], event["duration"]) == (
        quote.reward_amount, quote.fee_amount, quote.bond_amount, DAY,
    )
    assert chain.usdc.functions.balanceOf(chain.account(POSTER)).call() == balance - quote.total_amount


def test_submit_and_a_rejected_dispute(chain, builder):
    bounty_id = post_bounty(chain, builder)
    submission_id = submit_work(chain, builder, bounty_id, CLAIMANT)
    assert chain.board.functions.getSubmission(submission_id).call()[2] == SUBMITTED
    dispute_id = dispute_work(chain, builder, submission_id, GROUT)
    assert chain.board.functions.getSubmission(submission_id).call()[2] == DISPUTED

    receipt = send(chain, builder.resolve_dispute(dispute_id, False), 0)
    assert chain.events(receipt, "DisputeResolved")[0]["upheld"] is False
    assert chain.board.functions.getSubmission(submission_id).call()[2] == SUBMITTED
    assert chain.board.functions.credits(chain.account(CLAIMANT)).call() == DISPUTE_BOND


def test_an_upheld_dispute_cursor_finalize_and_bond_refund(chain, builder):
    bounty_id = post_bounty(chain, builder)
    rejected = submit_work(chain, builder, bounty_id, CLAIMANT)
    winner = submit_work(chain, builder, bounty_id, OTHER_CLAIMANT)
    late = submit_work(chain, builder, bounty_id, LATE_CLAIMANT)
    upheld = dispute_work(chain, builder, rejected, GROUT)
    pending = dispute_work(chain, builder, rejected, OTHER_GROUT)

    send(chain, builder.resolve_dispute(upheld, True), 0)
    assert chain.board.functions.getSubmission(rejected).call()[2] == REJECTED
    receipt = send(chain, builder.cancel_resolved_dispute(pending), OTHER_GROUT)
    assert chain.events(receipt, "DisputeCancelled")[0]["disputeId"] == pending
    receipt = send(chain, builder.advance_review_cursor(bounty_id), POSTER)
    assert chain.events(receipt, "ReviewCursorAdvanced")[0]["cursor"] == 1

    increase_time(chain.w3, DAY + 1)
    receipt = send(chain, builder.finalize(bounty_id), POSTER)
    assert chain.events(receipt, "BountyFinalized")[0]["submissionId"] == winner
    assert chain.board.functions.getSubmission(winner).call()[2] == ACCEPTED
    receipt = send(chain, builder.refund_submission_bond(late), LATE_CLAIMANT)
    assert chain.events(receipt, "SubmissionRefunded")[0]["submissionId"] == late
    assert chain.board.functions.getSubmission(late).call()[2] == REFUNDED


def test_refund_expired_then_withdraw_pays_the_poster(chain, builder):
    bounty_id = post_bounty(chain, builder, duration=60)
    increase_time(chain.w3, 61)
    receipt = send(chain, builder.refund_expired(bounty_id), POSTER)
    assert chain.events(receipt, "BountyRefunded")[0]["amount"] == REWARD

    balance = chain.usdc.functions.balanceOf(chain.account(POSTER)).call()
    receipt = send(chain, builder.withdraw(), POSTER)
    assert chain.events(receipt, "Withdrawn")[0]["recipient"] == chain.account(POSTER)
    assert chain.usdc.functions.balanceOf(chain.account(POSTER)).call() == balance + REWARD


def test_withdraw_to_pays_another_address(chain, builder):
    bounty_id = post_bounty(chain, builder)
    submission_id = submit_work(chain, builder, bounty_id, CLAIMANT)
    dispute_id = dispute_work(chain, builder, submission_id, GROUT)
    send(chain, builder.resolve_dispute(dispute_id, True), 0)
    owed = chain.board.functions.credits(chain.account(GROUT)).call()
    assert owed == quote_create_amount(REWARD).bond_amount + DISPUTE_BOND

    before = chain.usdc.functions.balanceOf(chain.account(RECIPIENT)).call()
    send(chain, builder.withdraw_to(chain.account(RECIPIENT).lower()), GROUT)
    assert chain.usdc.functions.balanceOf(chain.account(RECIPIENT)).call() == before + owed
    assert chain.board.functions.credits(chain.account(GROUT)).call() == 0


def test_a_builder_from_the_service_targets_the_deployment_it_reports(chain, read_service):
    read_service.deployment = {
        "chain_id": chain.deployment.chain_id,
        "contract_address": chain.deployment.contract_address.lower(),
        "usdc_address": chain.deployment.usdc_address,
    }
    builder = TransactionBuilder.from_service(read_service.url)
    send(chain, builder.approve_usdc(7), POSTER)
    assert chain.usdc.functions.allowance(chain.account(POSTER), chain.deployment.contract_address).call() == 7
    assert read_service.paths() == ["/health"]
