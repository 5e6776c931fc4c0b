"""What the three lists differ in: one ListSpec per resource, the data the shared list suite
(test_lists.py) runs on. Each resource's own file keeps only what that list alone does."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from operator import attrgetter
from typing import Any, NamedTuple

from records.models import Bounty, Deployment, Dispute, Submission
from tests.api import helpers as h
from tests.factories import ACTIVE_CONTRACT, T0, make_bounty, make_dispute, make_submission

Record = Bounty | Submission | Dispute
# (query parameters, the parameter the 400's detail must name)
Malformed = tuple[dict[str, str], str]


class StatusChange(NamedTuple):
    """A contract event gives one of the searchable pair (0 the target, 1 the decoy) a new status;
    `gone`, a q that matched only its old status, then matches nothing."""

    record: int
    status: str
    gone: str


@dataclass(frozen=True)
class ListSpec:
    resource: str
    own_id: str  # the record's own ID, which is no list filter
    # sort key -> the attribute it orders by; an alias names the same attribute as its key.
    # Written out from docs/api.md (Parameters), not read from records.kinds on purpose: this is
    # the oracle the lists are checked against, so a key dropped from or renamed in the
    # descriptor fails the suite instead of vanishing from it silently.
    sort_keys: Mapping[str, str]
    make_sortable: Callable[[Deployment], list[Record]]  # records whose every sort key has ties
    amount_key: str  # a sort key on an amount
    array_sort_key: str  # the key an unpaged array is checked sorted by
    tie_sort_keys: Sequence[str]  # keys whose ties a page walk must neither repeat nor skip
    text_field: str  # the route's text field, a sort key too
    make_searchable: Callable[[Deployment], tuple[Record, Record]]  # (target, decoy)
    q_matches: Mapping[str, str]  # q finds the target, and only it, by each of these
    q_misses: Mapping[str, str]  # q finds neither record by these
    status_change: StatusChange
    malformed_filters: Sequence[Malformed]

    @property
    def path(self) -> str:
        return h.LIST_PATHS[self.resource]

    def sort_value(self, key: str) -> Callable[[Any], Any]:
        return attrgetter(self.sort_keys[key])

    def alias_groups(self) -> list[list[str]]:
        """The sort keys grouped by the attribute they order by: a key with its aliases."""
        groups: dict[str, list[str]] = {}
        for key, attribute in self.sort_keys.items():
            groups.setdefault(attribute, []).append(key)
        return list(groups.values())


def malformed_filters(parents: Sequence[str], *combined: Malformed) -> list[Malformed]:
    """The malformed deployment qualifiers, each parent filter with a value that is no ID, and `combined`."""
    not_ids = ("abc", "-1", "1.0", "", " 7", "0x7", "\u0667")
    return [*h.MALFORMED_QUALIFIERS, *(({parent: value}, parent) for parent in parents for value in not_ids),
            *combined]


# ------------------------------------------------------------------ bounties


def _sortable_bounties(deployment: Deployment) -> list[Record]:
    rows = [
        # created_at, deadline (seconds after T0), reward, bond, status, poster, prompt, submissions
        (3, 50, 10, 7, "open", "0x" + "b0" * 20, "b", 2),
        (1, 50, 9, 2**70, "resolved", "0x" + "A0" * 20, "B", 0),
        (3, 20, 2**70, 7, "refunded", "0x" + "c0" * 20, "a", 1),
        (2, 90, 10, h.UINT256_MAX, "open", "0x" + "a1" * 20, "\u00e9", 2),
        (0, 0, 0, 0, "resolved", "0x" + "0F" * 20, "10", 0),
        (5, 10, h.UINT256_MAX, 9, "open", "0x" + "b0" * 20, "9\U0001f600", 1),
    ]
    bounties: list[Record] = []
    for created, deadline, reward, bond, status, poster, prompt, submissions in rows:
        bounty = make_bounty(deployment, created_at=T0 + timedelta(seconds=created),
                             deadline=T0 + timedelta(seconds=deadline), bounty_amount=reward, bond_amount=bond,
                             status=status, poster=poster, prompt=prompt)
        for _ in range(submissions):
            make_submission(bounty)
        bounties.append(bounty)
    return bounties


_BOUNTY_TARGET: dict[str, Any] = {
    "bounty_id": 424242, "status": "resolved", "poster": "0x" + "a1b2c3d4e5" * 4,
    "metadata_uri": "ipfs://target-uri", "metadata_hash": "0x" + "cd" * 32, "tx_hash": "0x" + "ef" * 32,
    "prompt": "Find the \u00c9clair 100%_done", "bounty_amount": 777777, "fee_amount": 333333,
    "bond_amount": 555555, "duration": 864864, "block_number": 616161,
}
_BOUNTY_DECOY: dict[str, Any] = {
    "bounty_id": 313131, "status": "open", "poster": "0x" + "5a" * 20, "metadata_uri": "ipfs://decoy",
    "metadata_hash": "0x" + "11" * 32, "tx_hash": "0x" + "22" * 32, "prompt": "other",
}


def _searchable_bounties(deployment: Deployment) -> tuple[Record, Record]:
    return make_bounty(deployment, **_BOUNTY_TARGET), make_bounty(deployment, **_BOUNTY_DECOY)


BOUNTIES = ListSpec(
    resource="bounties",
    own_id="bounty_id",
    sort_keys={
        "id": "bounty_id", "created_at": "created_at", "deadline": "deadline", "reward": "bounty_amount",
        "bounty_amount": "bounty_amount", "bond": "bond_amount", "bond_amount": "bond_amount", "status": "status",
        "poster": "poster", "prompt": "prompt", "submissions": "submission_count",
        "submission_count": "submission_count",
    },
    make_sortable=_sortable_bounties,
    amount_key="reward",
    array_sort_key="bond",
    tie_sort_keys=("status", "submissions", "created_at"),
    text_field="prompt",
    make_searchable=_searchable_bounties,
    q_matches={
        "own id": "2424",
        "whole id": "424242",
        "status": "resolved",
        "status in capitals": "RESOLVED",
        "poster lowercase": "a1b2c3d4e5a1",
        "poster uppercase": "0XA1B2C3D4E5A1B2",
        "poster checksummed": h.checksummed(_BOUNTY_TARGET["poster"]),
        "metadata_uri": "target-uri",
        "metadata_hash": "cdcdcd",
        "tx_hash": "0x" + "ef" * 32,
        "prompt": "\u00e9CLAIR",
        "literal percent": "%",
        "literal underscore": "_",
        "literal percent and underscore": "0%_d",
    },
    q_misses={
        "reward": "777777", "fee": "333333", "bond": "555555", "duration": "864864", "block number": "616161",
        "chain id": "91342", "contract address": ACTIVE_CONTRACT[2:12], "wildcard lookalike": "1%0",
        "across two fields": "resolved0x", "separator": "\x1f", "nothing": "zzzz",
    },
    status_change=StatusChange(record=0, status="refunded", gone="resolved"),
    malformed_filters=malformed_filters(()),
)


# ------------------------------------------------------------------ submissions


def _sortable_submissions(deployment: Deployment) -> list[Record]:
    bounties = [make_bounty(deployment) for _ in range(3)]
    rows = [
        # bounty, created_at, review_deadline (seconds after T0), bond, status, claimant, content, disputes
        (2, 3, 50, 10, "submitted", "0x" + "b0" * 20, "b", 2),
        (0, 1, 50, 9, "disputed", "0x" + "A0" * 20, "B", 0),
        (2, 3, 20, 2**70, "accepted", "0x" + "c0" * 20, "a", 1),
        (1, 2, 90, 10, "rejected", "0x" + "a1" * 20, "\u00e9", 2),
        (0, 0, 0, 0, "refunded", "0x" + "0F" * 20, "10", 0),
        (1, 5, 10, h.UINT256_MAX, "submitted", "0x" + "b0" * 20, "9\U0001f600", 1),
    ]
    submissions: list[Record] = []
    for bounty, created, review, bond, status, claimant, text, disputes in rows:
        submission = make_submission(bounties[bounty], created_at=T0 + timedelta(seconds=created),
                                     review_deadline=T0 + timedelta(seconds=review), bond_amount=bond,
                                     status=status, claimant=claimant, content=text)
        for _ in range(disputes):
            make_dispute(submission)
        submissions.append(submission)
    return submissions


_SUBMISSION_TARGET: dict[str, Any] = {
    "submission_id": 424242, "status": "accepted", "tile_id": "0x" + "a1b2c3d4e5" * 4,
    "claimant": "0x" + "f9e8d7c6b5" * 4, "metadata_uri": "ipfs://target-uri", "metadata_hash": "0x" + "cd" * 32,
    "tx_hash": "0x" + "ef" * 32, "content": "My \u00c9clair answer", "bond_amount": 777777,
    "block_number": 616161,
}
_SUBMISSION_DECOY: dict[str, Any] = {
    "submission_id": 313131, "status": "submitted", "tile_id": "0x" + "5a" * 20, "claimant": "0x" + "6b" * 20,
    "metadata_uri": "ipfs://decoy", "metadata_hash": "0x" + "11" * 32, "tx_hash": "0x" + "22" * 32,
    "content": "other",
}


def _searchable_submissions(deployment: Deployment) -> tuple[Record, Record]:
    parent = make_bounty(deployment, bounty_id=5151515, metadata_uri="ipfs://parent", prompt="parent prompt")
    return (make_submission(parent, **_SUBMISSION_TARGET),
            make_submission(make_bounty(deployment, bounty_id=6262626), **_SUBMISSION_DECOY))


SUBMISSIONS = ListSpec(
    resource="submissions",
    own_id="submission_id",
    sort_keys={
        "id": "submission_id", "created_at": "created_at", "submitted": "created_at", "bounty": "bounty_id",
        "bounty_id": "bounty_id", "bond": "bond_amount", "bond_amount": "bond_amount", "status": "status",
        "claimant": "claimant", "content": "content", "review": "review_deadline",
        "review_deadline": "review_deadline", "disputes": "dispute_count", "dispute_count": "dispute_count",
    },
    make_sortable=_sortable_submissions,
    amount_key="bond",
    array_sort_key="review",
    tie_sort_keys=("bounty", "disputes", "submitted"),
    text_field="content",
    make_searchable=_searchable_submissions,
    q_matches={
        "own id": "2424",
        "parent bounty id": "151515",
        "status": "accepted",
        "status in capitals": "ACCEPTED",
        "tile_id": "a1b2c3d4e5a1",
        "tile_id checksummed": h.checksummed(_SUBMISSION_TARGET["tile_id"]),
        "claimant": "F9E8D7",
        "claimant checksummed": h.checksummed(_SUBMISSION_TARGET["claimant"]),
        "metadata_uri": "target-uri",
        "metadata_hash": "cdcdcd",
        "tx_hash": "efefef",
        "content": "\u00e9CLAIR ANS",
    },
    q_misses={
        "bond": "777777", "block number": "616161", "chain id": "91342", "parent's prompt": "parent prompt",
        "parent's metadata": "ipfs://parent", "across two fields": "accepted0x", "nothing": "zzzz",
    },
    status_change=StatusChange(record=1, status="disputed", gone="submitted"),
    malformed_filters=malformed_filters(
        ["bounty_id"],
        ({"bounty_id": "abc", "chain_id": "91342", "contract_address": ACTIVE_CONTRACT}, "bounty_id"),
        ({"bounty_id": "7", "chain_id": "x", "contract_address": ACTIVE_CONTRACT}, "chain_id"),
        ({"bounty_id": "7", "chain_id": "91342", "contract_address": "0x7"}, "contract_address"),
    ),
)


# ------------------------------------------------------------------ disputes


def _sortable_disputes(deployment: Deployment) -> list[Record]:
    bounties = [make_bounty(deployment) for _ in range(3)]
    submissions = [make_submission(bounties[2]), make_submission(bounties[0]), make_submission(bounties[1])]
    rows = [
        # submission, created_at (seconds after T0), bond, status, challenger, reason
        (0, 3, 10, "pending_human_review", "0x" + "b0" * 20, "b"),
        (1, 1, 9, "upheld", "0x" + "A0" * 20, "B"),
        (0, 3, 2**70, "rejected", "0x" + "c0" * 20, "a"),
        (2, 2, 10, "cancelled", "0x" + "a1" * 20, "\u00e9"),
        (1, 0, 0, "upheld", "0x" + "0F" * 20, "10"),
        (2, 5, h.UINT256_MAX, "pending_human_review", "0x" + "b0" * 20, "9\U0001f600"),
    ]
    return [make_dispute(submissions[submission], created_at=T0 + timedelta(seconds=created), bond_amount=bond,
                         status=status, challenger_id=challenger, reason=reason)
            for submission, created, bond, status, challenger, reason in rows]


_DISPUTE_TARGET: dict[str, Any] = {
    "dispute_id": 424242, "status": "upheld", "challenger_id": "0x" + "a1b2c3d4e5" * 4,
    "metadata_uri": "ipfs://target-uri", "metadata_hash": "0x" + "cd" * 32, "tx_hash": "0x" + "ef" * 32,
    "reason": "Copied the \u00c9clair", "bond_amount": 777777, "block_number": 616161,
}
_DISPUTE_DECOY: dict[str, Any] = {
    "dispute_id": 313131, "status": "pending_human_review", "challenger_id": "0x" + "5a" * 20,
    "metadata_uri": "ipfs://decoy", "metadata_hash": "0x" + "11" * 32, "tx_hash": "0x" + "22" * 32,
    "reason": "other",
}


def _searchable_disputes(deployment: Deployment) -> tuple[Record, Record]:
    parent = make_bounty(deployment, bounty_id=5151515, metadata_uri="ipfs://parent")
    submission = make_submission(parent, submission_id=8383838, metadata_uri="ipfs://parent",
                                 claimant="0x" + "c1" * 20)
    decoy_parent = make_submission(make_bounty(deployment, bounty_id=6262626), submission_id=9494949)
    return make_dispute(submission, **_DISPUTE_TARGET), make_dispute(decoy_parent, **_DISPUTE_DECOY)


DISPUTES = ListSpec(
    resource="disputes",
    own_id="dispute_id",
    sort_keys={
        "id": "dispute_id", "created_at": "created_at", "submitted": "created_at", "bounty": "bounty_id",
        "bounty_id": "bounty_id", "submission": "submission_id", "submission_id": "submission_id",
        "bond": "bond_amount", "bond_amount": "bond_amount", "status": "status", "challenger": "challenger_id",
        "reason": "reason",
    },
    make_sortable=_sortable_disputes,
    amount_key="bond_amount",
    array_sort_key="reason",
    tie_sort_keys=("submission", "status"),
    text_field="reason",
    make_searchable=_searchable_disputes,
    q_matches={
        "own id": "2424",
        "parent bounty id": "151515",
        "parent submission id": "838383",
        "status": "upheld",
        "status in capitals": "UPHELD",
        "challenger": "a1b2c3d4e5a1",
        "challenger checksummed": h.checksummed(_DISPUTE_TARGET["challenger_id"]),
        "metadata_uri": "target-uri",
        "metadata_hash": "cdcdcd",
        "tx_hash": "efefef",
        "reason": "\u00e9CLAIR",
    },
    q_misses={
        "bond": "777777", "block number": "616161", "chain id": "91342", "parent's metadata": "ipfs://parent",
        "submission's claimant": "c1c1c1", "across two fields": "upheld0x", "nothing": "zzzz",
    },
    status_change=StatusChange(record=1, status="cancelled", gone="pending"),
    malformed_filters=malformed_filters(
        ["bounty_id", "submission_id"],
        ({"bounty_id": "7", "chain_id": "x", "contract_address": ACTIVE_CONTRACT}, "chain_id"),
        ({"submission_id": "70", "chain_id": "91342", "contract_address": "0x7"}, "contract_address"),
    ),
)

SPECS = (BOUNTIES, SUBMISSIONS, DISPUTES)
