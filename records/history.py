"""Positions that name their history: a change-log seq with the digest of every change up to it.

The same integer seq can name different changes in two databases: a restored backup, a promoted
standby that had not replayed the last transactions, or a re-index into a new database each go
on numbering from their own past. So each change-log entry carries a digest chained over the
entries before it (`next_digest`: the digest before it, its seq, its type, its block and its
payload as written), starting from the deployment's own (`genesis_digest`), and every position the
service hands out is the seq with that digest (`Position`). A position is valid where the entry at
its seq has the same digest: histories that agree up to it (an identical re-index, a backup whose
catch-up re-applied the same changes) share it, and any difference, wherever it starts, changes
every digest after it. The websocket resumes only from a position it can vouch for, and the API's
data version (records.selectors.data_version) carries the digest, so no cache key or ETag of one
history is taken for another's.

Entries written before digests existed have none: a position at one of them cannot be checked,
and a client resuming from it gets a snapshot, as from a bare integer.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

DIGEST_HEX = 32  # a digest's hex digits (128 bits)
MAX_SEQ = 2**63 - 1  # the largest seq a change log numbers (a PositiveBigIntegerField)
_POSITION = re.compile(rf"(0|[1-9][0-9]{{0,18}})\.([0-9a-f]{{{DIGEST_HEX}}})")


def genesis_digest(chain_id: int, contract_address: str) -> str:
    """The digest before a deployment's first change: a position of one deployment is never
    taken for another's."""
    return _digest(f"bounty-history/1\n{chain_id}\n{contract_address.lower()}".encode())


def next_digest(previous: str, seq: int, type_: str, block_number: int, payload: bytes) -> str:
    """The digest of the entry `seq` (its type, block and payload's JSON text as written), chained
    on the digest before it."""
    return _digest(b"%s\n%d\n%s\n%d\n%s" % (previous.encode(), seq, type_.encode(), block_number, payload))


def _digest(data: bytes) -> str:
    # BLAKE2b: a third cheaper than SHA-256 on a CPU without SHA instructions (the indexer hashes
    # every payload it writes to the change log), and as sound for telling histories apart.
    return hashlib.blake2b(data, digest_size=DIGEST_HEX // 2).hexdigest()


@dataclass(frozen=True, slots=True)
class Position:
    """A place in one history: after the change `seq`, whose chained digest is `digest`."""

    seq: int
    digest: str

    def __str__(self) -> str:
        """The opaque string clients hold and resume with (`?since=`)."""
        return f"{self.seq}.{self.digest}"

    @classmethod
    def parse(cls, text: str) -> Position | None:
        """The position a client sent, or None when it is none the service hands out (a bare
        integer from before positions named their history, or anything else): such a client
        gets a snapshot."""
        match = _POSITION.fullmatch(text)
        return cls(int(match[1]), match[2]) if match and int(match[1]) <= MAX_SEQ else None


# Where a snapshot of no deployment is (none is indexed yet): a position no history holds, so a
# client resuming from it gets a snapshot.
NO_HISTORY = Position(0, "0" * DIGEST_HEX)


@dataclass(frozen=True, slots=True)
class DeploymentVersion:
    """One deployment's part of a data version: the position after its newest change and, while a
    bulk backfill writes records without an entry each (indexer.bulk), its last indexed block."""

    deployment: int  # its pk
    position: Position
    bulk_block: int | None = None

    def __str__(self) -> str:
        text = f"{self.deployment}:{self.position}"
        return text if self.bulk_block is None else f"{text}+{self.bulk_block}"


@dataclass(frozen=True, slots=True)
class DataVersion:
    """What the records of some deployments are at (records.selectors.data_version): it changes
    whenever any of them changes, and names the history it is of. Cache keys, spools and ETags are
    made of it; `floor` is what a replica must hold to answer as new as it (records.replicas)."""

    parts: tuple[DeploymentVersion, ...] = ()

    def floor(self) -> dict[int, int]:
        """The change-log seq of each deployment."""
        return {part.deployment: part.position.seq for part in self.parts}

    def __str__(self) -> str:
        return ",".join(str(part) for part in self.parts)


NO_DATA = DataVersion()  # the version of no deployment (none indexed yet, or none that can exist)
