"""The explorer as a guide to the historical phase (BOUNTY_EXPLORER_RPC_URL).

A node capped at a few blocks per eth_getLogs makes a first sync cost what the chain's length
holds. A block explorer (Blockscout's /api/eth-rpc) indexes every log and answers eth_getLogs over
any range, 1,000 logs a page, the next page asked with `paging_options` (the block number and log
index of the last log received, in hex without 0x) until a page comes empty. So the historical phase asks the explorer
which blocks hold the contract's record events, and asks the node only about those:

- every block the explorer names is proven with the node: the node's header at that number must
  have the explorer's `blockHash`, and what is applied is the node's own eth_getLogs by that
  `blockHash` (one request for many blocks). The node stays the authority over content;
- the blocks between are empty on the explorer's word. That word is checked afterwards against
  the contract's own state (indexer.proof), which a log the explorer never showed cannot escape:
  the first block guided is kept in `SyncState.guided_from_block` until the proof passes, and a
  difference has those blocks read again by range through the node and repaired (indexer.reread);
- the explorer is asked up to its `eth_blockNumber` (the newest block it has stored): the rest is
  read by range as without it. Blocks it stored without their logs yet (an explorer catching up)
  are taken as empty there too, and it is the proof that finds them.

A range the explorer refuses or times out on is split in two, at most SPLITS times over, and the
ranges asked after it are no wider than the half of the one it failed on (the guide's `span`),
for the rest of the process: a catch-up step that begins again (after a reorganisation, a node
behind) does not pay its timeouts again.

An explorer that is down, limits the rate, asks for a pause past the ceiling (Retry-After:
WaitTooLong), times out on every split of a range, answers malformed or names a block the node
contradicts costs speed only: it is set aside for the rest of the
process with one warning, counted as an error of kind `explorer` (bounty_indexer_rpc_errors_total),
and the blocks it has not guided are read by range. A bulk backfill's reader process that sets it
aside tells the indexer's process with its batches (`Batch.explorer_set_aside`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from typing import Any

from indexer.errors import NodeBehind, RetriesExhausted, RpcError, Stopped
from indexer.events import RECORD_EVENT_TOPICS
from indexer.rpc import RpcClient

logger = logging.getLogger(__name__)

Logs = list[dict[str, Any]]

PROVEN_PER_REQUEST = 50  # blocks the node proves in one request (a header and a getLogs by hash each)
SPLITS = 8  # a range the explorer refuses or times out on is halved at most this many times over
_HASH = re.compile(r"0x[0-9a-fA-F]{64}")
_TOPICS = frozenset(topic.lower() for topic in RECORD_EVENT_TOPICS)


class ExplorerSetAside(Exception):
    """The explorer cannot guide any further: why, in words an operator can act on."""


class ExplorerGuide:
    """The explorer's log index as the historical phase's guide, the node as its proof."""

    def __init__(self, explorer: RpcClient, node: RpcClient, address: str) -> None:
        self.explorer = explorer
        self.node = node
        self.address = address.lower()
        self.set_aside_because: str | None = None  # None: in use
        # The blocks an eth_getLogs asks at most, once the explorer refused or timed out on wider
        # ranges (the half of the range it failed on); None: any. Kept for the rest of the process,
        # as the node's range cap is: each catch-up step (a new one after a reorganisation or a
        # node behind, a restart of the reader) asked the ranges it had failed on again.
        self.span: int | None = None

    @property
    def in_use(self) -> bool:
        return self.set_aside_because is None

    def use(self, node: RpcClient) -> None:
        """Asks through these clients from now on (a forked reader process's own)."""
        self.node = node
        self.explorer = self.explorer.fresh()

    def set_aside(self, because: str) -> None:
        """No more guidance from the explorer in this process; the blocks are read by range."""
        if self.set_aside_because is None:
            self.set_aside_because = because
            self.node.tally.error("explorer")
            logger.warning("the explorer at %s is set aside: %s; reading the blocks by range through the node",
                           self.explorer.node, because)

    def set_aside_in_reader(self, because: str | None) -> None:
        """What a reader process forked from this one found (Batch.explorer_set_aside): an
        explorer it set aside, and said so and counted there, is not asked again from here."""
        if because is not None and self.set_aside_because is None:
            self.set_aside_because = because

    def read(self, start: int, end: int) -> Iterator[tuple[int, int, Logs]]:
        """Blocks `start` up to at most `end`, as consecutive spans (first, last, logs) whose
        logs are the node's own for the blocks the explorer named and proven by the node's
        headers. It ends where the explorer's index ends, or where the explorer can no longer be
        believed: the caller reads the blocks after the last span by range."""
        if not self.in_use:
            return
        try:
            covered = min(end, self._head())
            first = start
            for complete_to, named in self._named_blocks(start, covered):
                numbers = sorted(named)
                for i in range(0, len(numbers), PROVEN_PER_REQUEST):
                    group = numbers[i : i + PROVEN_PER_REQUEST]
                    logs = self._proven({number: named[number] for number in group})
                    last = group[-1] if i + PROVEN_PER_REQUEST < len(numbers) else complete_to
                    yield first, last, logs
                    first = last + 1
                if first <= complete_to:
                    yield first, complete_to, []
                    first = complete_to + 1
        except ExplorerSetAside as exc:
            self.set_aside(str(exc))

    def first_event_block(self) -> int | None:
        """The block of the contract's first log, as the explorer says and the node's header of
        that block confirms (its hash); None when the explorer cannot say (set aside) or names none."""
        if not self.in_use:
            return None
        try:
            page = self._ask("eth_getLogs", [{"address": self.address, "fromBlock": "0x0", "toBlock": "latest"}])
            logs = [log for log in page if not (isinstance(log, dict) and log.get("removed"))] \
                if isinstance(page, list) else []
            if not logs:
                return None
            number, _, block_hash = self._read_log(logs[0], 0, 2**63)
            try:
                header = self.node.call("eth_getBlockByNumber", [hex(number), False])
            except (RetriesExhausted, Stopped):
                raise
            except (RpcError, NodeBehind) as exc:
                raise ExplorerSetAside(f"the node does not give block {number}, of the contract's first log as the "
                                       f"explorer names it: {exc}") from exc
            if not isinstance(header, dict) or str(header.get("hash", "")).lower() != block_hash:
                raise ExplorerSetAside(f"the explorer named block {number} ({block_hash}) for the contract's first "
                                       f"log; the node's block {number} is {header!r}")
            return number
        except ExplorerSetAside as exc:
            self.set_aside(str(exc))
            return None

    # ------------------------------------------------------------------ the explorer's side

    def _call(self, method: str, params: list[Any]) -> Any:
        """One call to the explorer, counted with the node's calls for the `explorer` phase."""
        try:
            return self.explorer.call(method, params, behind_retries=0)
        finally:
            self.node.tally.absorb(self.explorer.tally.take(), phase="explorer")

    def _ask(self, method: str, params: list[Any]) -> Any:
        try:
            return self._call(method, params)
        except Stopped:
            raise
        except (RpcError, RetriesExhausted, NodeBehind) as exc:
            raise ExplorerSetAside(f"{method} failed: {exc}") from exc

    def _head(self) -> int:
        answer = self._ask("eth_blockNumber", [])
        try:
            return int(answer, 16)
        except (TypeError, ValueError):
            raise ExplorerSetAside(f"eth_blockNumber answered {answer!r}") from None

    def _named_blocks(self, start: int, end: int) -> Iterator[tuple[int, dict[int, str]]]:
        """(complete_to, {block: hash}): the blocks up to `complete_to` that hold the contract's
        record events, as the explorer says, page after page; every block up to `complete_to`
        that it does not name holds none, on its word."""
        ranges = [(start, end, 0)]  # (first, last, splits so far): a refused range is split in two
        while ranges:
            first, last, splits = ranges.pop(0)
            if first > last:
                continue
            if self.span is not None and last - first + 1 > self.span:  # no wider than it answered
                ranges[:0] = [(first, first + self.span - 1, splits), (first + self.span, last, splits)]
                continue
            try:
                yield from self._pages(first, last)
            except _Refused as refused:
                if splits >= SPLITS or refused.first >= last:
                    raise ExplorerSetAside(f"eth_getLogs for blocks {refused.first}-{last} failed even split "
                                           f"{splits} times: {refused.cause}") from None
                middle = (refused.first + last) // 2
                half = middle - refused.first + 1
                self.span = half if self.span is None else min(self.span, half)
                ranges[:0] = [(refused.first, middle, splits + 1), (middle + 1, last, splits + 1)]

    def _pages(self, first: int, last: int) -> Iterator[tuple[int, dict[int, str]]]:
        """The record-event blocks of blocks first..last, page by page, as `_named_blocks` says;
        _Refused (from the first block not yet complete) when the explorer refuses or times out."""
        paging: dict[str, str] | None = None
        after = (first - 1, -1)  # the last log received: the next page's must come after it
        named: dict[int, str] = {}
        while True:
            query: dict[str, Any] = {"address": self.address, "fromBlock": hex(first), "toBlock": hex(last)}
            if paging is not None:
                query["paging_options"] = paging
            try:
                page = self._call("eth_getLogs", [query])
            except Stopped:
                raise
            except NodeBehind as exc:  # words of a node behind, from an explorer: not waited for
                raise ExplorerSetAside(f"eth_getLogs failed: {exc}") from exc
            except RetriesExhausted as exc:
                if getattr(exc.__cause__, "kind", None) != "timeout":
                    raise ExplorerSetAside(f"eth_getLogs failed: {exc}") from exc
                raise _Refused(after[0] + 1 if after[1] < 0 else after[0], exc) from exc
            except RpcError as exc:
                raise _Refused(after[0] + 1 if after[1] < 0 else after[0], exc) from exc
            if not isinstance(page, list):
                raise ExplorerSetAside(f"eth_getLogs answered {type(page).__name__}, not a list")
            if not page:  # past the last page (whatever page size the explorer keeps to)
                yield last, named
                return
            for log in page:
                if isinstance(log, dict) and log.get("removed"):  # of a block since replaced
                    continue
                number, index, block_hash = self._read_log(log, first, last)
                if (number, index) <= after:
                    raise ExplorerSetAside(f"eth_getLogs answered its logs out of order (block {number} log {index} "
                                           f"after block {after[0]} log {after[1]})")
                after = (number, index)
                topics = log.get("topics")
                if not isinstance(topics, list) or not topics or str(topics[0]).lower() not in _TOPICS:
                    continue  # not a record event
                if named.setdefault(number, block_hash) != block_hash:
                    raise ExplorerSetAside(f"eth_getLogs gave block {number} two hashes")
            # The last block may go on in the next page.
            yield after[0] - 1, {number: h for number, h in named.items() if number < after[0]}
            named = {number: h for number, h in named.items() if number >= after[0]}
            paging = {"blockNumber": f"{after[0]:X}", "logIndex": f"{after[1]:X}"}
            first = after[0]  # a resumed page asks from the last block received (`after` excludes what came)

    def _read_log(self, log: Any, first: int, last: int) -> tuple[int, int, str]:
        try:
            number, index, block_hash = int(log["blockNumber"], 16), int(log["logIndex"], 16), str(log["blockHash"])
            address = str(log["address"]).lower()
        except (KeyError, TypeError, ValueError):
            raise ExplorerSetAside(f"eth_getLogs answered a log that does not read: {log!r}") from None
        if not first <= number <= last or address != self.address or not _HASH.fullmatch(block_hash):
            raise ExplorerSetAside(f"eth_getLogs for blocks {first}-{last} of {self.address} answered a log of "
                                   f"block {number} of {address} with block hash {block_hash!r}")
        return number, index, block_hash.lower()

    # ------------------------------------------------------------------ the node's side

    def _proven(self, named: dict[int, str]) -> Logs:
        """The node's own logs of these blocks, each block's header checked to have the hash the
        explorer named (one request); the blocks' time added to logs that lack `blockTimestamp`."""
        calls: list[tuple[str, list[Any]]] = []
        for number, block_hash in named.items():
            calls.append(("eth_getBlockByNumber", [hex(number), False]))
            calls.append(("eth_getLogs", [{"blockHash": block_hash, "address": self.address,
                                           "topics": [RECORD_EVENT_TOPICS]}]))
        try:
            answers = self.node.batch(calls, behind_retries=2)
        except (RetriesExhausted, Stopped):  # the node's own trouble, waited for as usual: not the explorer's
            raise
        except NodeBehind as exc:  # a hash the node does not know
            raise ExplorerSetAside(f"the node does not know a block the explorer named: {exc}") from exc
        except RpcError as exc:
            raise ExplorerSetAside(f"the node refused the logs of a block the explorer named: {exc}") from exc
        proven: Logs = []
        for (number, block_hash), header, logs in zip(named.items(), answers[::2], answers[1::2], strict=True):
            node_hash = header.get("hash") if isinstance(header, dict) else None
            if not isinstance(node_hash, str) or node_hash.lower() != block_hash:
                raise ExplorerSetAside(f"the explorer named block {number} with hash {block_hash}; the node's block "
                                       f"{number} has hash {node_hash}")
            if not isinstance(logs, list) or not logs:
                raise ExplorerSetAside(f"the explorer named block {number} ({block_hash}) for the contract's events; "
                                       "the node holds none there")
            for log in logs:
                if not isinstance(log, dict) or str(log.get("blockHash", "")).lower() != block_hash:
                    raise ExplorerSetAside(f"the node answered the logs of block {block_hash} with {log!r}")
                if "blockTimestamp" not in log and "timestamp" in header:
                    log["blockTimestamp"] = header["timestamp"]  # the node's own header, of that very hash
            proven.extend(logs)
        return proven


class _Refused(Exception):
    """The explorer refused or timed out on a range from block `first` on."""

    def __init__(self, first: int, cause: Exception) -> None:
        super().__init__(str(cause))
        self.first = first
        self.cause = cause
