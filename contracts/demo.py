"""Demo activity on the dev chain, through real transactions, covering every status.

After `seed_demo_activity` the chain holds:

- bounties: #1 resolved, #2 refunded, #3 and #4 open;
- submissions: accepted (#2), rejected (#1), refunded (#3), submitted (#4), disputed (#5, #6);
- disputes: upheld (#1), cancelled (#2), rejected (#3), pending_human_review (#4, #5, #6).

The pending disputes are recent, so the moderators' queue has work when the dev chain starts.
To reach the deadlines the demo moves the chain's clock forward by `DEMO_CLOCK_ADVANCE`: a chain
whose clock starts that far in the past (`manage.py devchain --demo` starts it so) ends the
demo at about the wall clock's time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from web3 import Web3

from bounty_client.metadata import metadata_hash, metadata_to_data_uri
from contracts.devchain import (
    USDC_UNIT,
    DevDeployment,
    bounty_contract,
    increase_time,
    transact,
    usdc_contract,
)

HOUR = 3600
DAY = 24 * HOUR
DEMO_CLOCK_ADVANCE = DAY + HOUR  # past the review window and the shorter bounty deadlines


def _metadata(value: dict[str, Any]) -> tuple[str, bytes]:
    return metadata_to_data_uri(value), bytes.fromhex(metadata_hash(value)[2:])


@dataclass
class _Actors:
    arbiter: str
    poster: str
    second_poster: str
    claimants: list[str]
    grouts: list[str]


class _Demo:
    def __init__(self, w3: Web3, deployment: DevDeployment) -> None:
        self.w3 = w3
        self.board = bounty_contract(w3, deployment.contract_address)
        self.usdc = usdc_contract(w3, deployment.usdc_address)
        accounts = deployment.accounts
        self.actors = _Actors(
            arbiter=deployment.arbiter,
            poster=accounts[1],
            second_poster=accounts[7],
            claimants=[accounts[2], accounts[5], accounts[6]],
            grouts=list(deployment.grouts),
        )

    def _approve(self, sender: str, amount: int) -> None:
        transact(self.w3, self.usdc.functions.approve(self.board.address, amount), sender)

    def create_bounty(self, poster: str, title: str, reward_usdc: int, duration: int) -> int:
        reward = reward_usdc * USDC_UNIT
        _, _, total = self.board.functions.quoteCreate(reward).call()
        self._approve(poster, total)
        uri, digest = _metadata({"title": title, "description": f"Demo bounty: {title}", "reward_usdc": reward_usdc})
        transact(self.w3, self.board.functions.createBounty(uri, digest, reward, duration), poster)
        return int(self.board.functions.bountyCount().call())

    def submit(self, bounty_id: int, claimant: str, summary: str) -> int:
        bond = self.board.functions.getBounty(bounty_id).call()[7]
        self._approve(claimant, bond)
        uri, digest = _metadata({"bounty_id": bounty_id, "summary": summary})
        transact(self.w3, self.board.functions.submit(bounty_id, uri, digest), claimant)
        return int(self.board.functions.submissionCount().call())

    def dispute(self, submission_id: int, grout: str, reason: str) -> int:
        self._approve(grout, self.board.functions.disputeBond().call())
        uri, digest = _metadata({"submission_id": submission_id, "reason": reason})
        transact(self.w3, self.board.functions.dispute(submission_id, uri, digest), grout)
        return int(self.board.functions.disputeCount().call())

    def call(self, sender: str, name: str, *args: Any) -> None:
        transact(self.w3, getattr(self.board.functions, name)(*args), sender)


def seed_demo_activity(w3: Web3, deployment: DevDeployment) -> dict[str, int]:
    """Runs the demo scenario; returns how many records of each kind it made."""
    demo = _Demo(w3, deployment)
    a = demo.actors
    first, second, third = a.claimants

    resolved = demo.create_bounty(a.poster, "Translate the onboarding guide to Portuguese", 250, 2 * HOUR)
    refunded = demo.create_bounty(a.second_poster, "Logo for the community call", 40, HOUR)
    rejected_sub = demo.submit(resolved, first, "Machine translation, lightly edited")
    accepted_sub = demo.submit(resolved, second, "Full human translation with glossary")
    refunded_sub = demo.submit(resolved, third, "Partial translation, chapters 1-3")
    upheld = demo.dispute(rejected_sub, a.grouts[0], "Unedited machine output; glossary terms wrong")
    cancelled = demo.dispute(rejected_sub, a.grouts[1], "Same problem as the first dispute")
    overturned = demo.dispute(accepted_sub, a.grouts[1], "Suspected plagiarism")
    demo.call(a.arbiter, "resolveDispute", upheld, True)
    demo.call(a.arbiter, "resolveDispute", overturned, False)
    demo.call(first, "cancelResolvedDispute", cancelled)
    demo.call(first, "advanceReviewCursor", resolved)

    increase_time(w3, DEMO_CLOCK_ADVANCE)
    demo.call(second, "finalize", resolved)
    demo.call(third, "refundSubmissionBond", refunded_sub)
    demo.call(a.second_poster, "refundExpired", refunded)
    demo.call(second, "withdraw")

    open_bounty = demo.create_bounty(a.poster, "Write integration tests for the indexer", 500, 14 * DAY)
    demo.submit(open_bounty, first, "Tests for backfill and follow mode")
    disputed_sub = demo.submit(open_bounty, second, "Tests copied from another project")
    demo.dispute(disputed_sub, a.grouts[0], "Copied without attribution")
    second_open = demo.create_bounty(a.second_poster, "Audit the fee rounding", 120, 7 * DAY)
    contested_sub = demo.submit(second_open, third, "Report: no issues found")
    demo.dispute(contested_sub, a.grouts[0], "Report misses the rounding of the bond")
    demo.dispute(contested_sub, a.grouts[1], "Report is a template")

    return {
        "bounties": int(demo.board.functions.bountyCount().call()),
        "submissions": int(demo.board.functions.submissionCount().call()),
        "disputes": int(demo.board.functions.disputeCount().call()),
    }
