"""The realtime phase: the blocks near the head, read one by one.

Hosted endpoints are load balancers over backends a few blocks apart, and a backend that lacks a
block answers a getLogs range over it with `[]`, as if it held no logs. So the blocks above the
historical phase's end (indexer.historical: ranges only below the head less BOUNTY_LIVE_BLOCKS,
which every backend has) are read here, each through its header:

- the header by number (the poll for the head gives the newest; the ones between come in one
  batch, each asked once: `HeaderChain` keeps them, linked by their parent hashes);
- its `logsBloom` tested for the contract's address and the record topics: a block the bloom
  rules out costs nothing more;
- where the bloom may hold a record log, `eth_getLogs` by the block's hash (EIP-234), which a
  backend that lacks the block refuses ("unknown block") instead of answering `[]`;
- the answer checked against the header: every log of this block's hash and number, in log order;
  a bloom that matched and an empty answer is confirmed with the block's receipts before it is
  taken for the bloom's false positive.

A `null` header, a head lower than the indexed tip, or a getLogs refused for an unknown block is a
backend behind the others: the phase waits and asks again, and never takes it for progress or a
reorganisation. Each block read here is read once more by range when it has become deep enough
(indexer.reread), which catches what no bloom can.

`BlockClock` learns the chain's block time from the headers' timestamps and when a new block can
be seen after its timestamp, so that the indexer asks for the head about once a block.
"""

from __future__ import annotations

import collections
import logging
import statistics
import time
from collections.abc import Iterable
from typing import Any

from eth_utils.crypto import keccak

from indexer.commit import Committer
from indexer.errors import ChainChanged, IndexerError, NodeBehind, RpcError
from indexer.events import RECORD_EVENT_TOPICS
from indexer.fetch import Batch, BatchReader
from indexer.pipeline import RecordMemory
from indexer.rpc import RpcClient, is_not_served
from records.models import Deployment

logger = logging.getLogger(__name__)

Header = dict[str, Any]
Log = dict[str, Any]


# ------------------------------------------------------------------------------------ the bloom

def _is_hex(value: Any) -> bool:
    return isinstance(value, str) and value.startswith("0x") and len(value) > 2 and \
        all(c in "0123456789abcdefABCDEF" for c in value[2:])


def _bloom_bits(item: bytes) -> tuple[int, int, int]:
    digest = keccak(item)
    return tuple(((digest[i] << 8) | digest[i + 1]) & 2047 for i in (0, 2, 4))  # type: ignore[return-value]


def _in_bloom(bloom: int, bits: tuple[int, int, int]) -> bool:
    return all(bloom >> bit & 1 for bit in bits)


class BloomFilter:
    """Whether a block's logsBloom (the yellow paper's 2048-bit filter of every log's address and
    topics) may hold a log of `address` with one of `topics` as its first topic. It has false
    positives, never false negatives, when the node computes it right."""

    def __init__(self, address: str, topics: Iterable[str] = RECORD_EVENT_TOPICS) -> None:
        self._address = _bloom_bits(bytes.fromhex(address.removeprefix("0x")))
        self._topics = [_bloom_bits(bytes.fromhex(topic.removeprefix("0x"))) for topic in topics]

    def may_hold(self, logs_bloom: str | None) -> bool:
        if not logs_bloom:
            return True  # no bloom: read the block
        bloom = int(logs_bloom, 16)
        return _in_bloom(bloom, self._address) and any(_in_bloom(bloom, topic) for topic in self._topics)


# ------------------------------------------------------------------------------ the block clock

class BlockClock:
    """When the next block is due, learnt from the chain.

    The block time is the median of the recent headers' timestamp steps. A block can be seen some
    time after its timestamp (`delay`): set from the poll that first saw a block, then drawn
    earlier by a few milliseconds a block for as long as each due poll finds its block, so that
    a poll that comes too early (and is asked again `step` later) is rare. Without a block time
    (too few blocks yet, or blocks that share a timestamp) it polls every `poll_interval`."""

    DRAW_IN = 0.005  # of the block time, by which each block found at the first poll moves the next poll earlier

    def __init__(self, poll_interval: float) -> None:
        self.poll_interval = poll_interval
        self.block_time: float | None = None
        self.delay = 0.0  # seconds after its timestamp a block is seen
        self._steps: collections.deque[float] = collections.deque(maxlen=32)
        self._last: tuple[int, int] | None = None  # the newest block seen: number, timestamp
        self._missed = False  # a poll since the last block found nothing new

    @property
    def step(self) -> float:
        """Between polls while a due block has not come."""
        if self.block_time is None:
            return self.poll_interval
        return min(self.poll_interval, max(0.02, self.block_time / 8))

    def seen(self, number: int, timestamp: int, sent: float) -> None:
        """A poll sent at `sent` (wall-clock seconds) found block `number` new."""
        last = self._last
        if last is not None and number > last[0]:
            self._steps.append((timestamp - last[1]) / (number - last[0]))
            median = statistics.median(self._steps) if len(self._steps) >= 3 else None
            self.block_time = median if median else None
            if self.block_time is not None:
                if self._missed or number > last[0] + 1:  # found after a poll too early, or late: as seen
                    self.delay = min(self.block_time, sent - timestamp)
                else:
                    self.delay -= self.DRAW_IN * self.block_time
        self._last = number, timestamp
        self._missed = False

    def missed(self) -> None:
        """A poll found no new block."""
        self._missed = True

    def wait(self, now: float | None = None) -> float:
        """Seconds until the next poll."""
        if self.block_time is None or self._last is None:
            return self.poll_interval
        now = time.time() if now is None else now
        due = self._last[1] + self.block_time + self.delay
        if self._missed or due <= now:
            return self.step
        return min(due - now, self.block_time + self.step)


# ---------------------------------------------------------------------------- headers and logs

class HeaderChain:
    """Headers of blocks not indexed yet, by number, as polls and batches brought them; each asked
    of the node once while it stays linked to its neighbours."""

    def __init__(self) -> None:
        self._headers: dict[int, Header] = {}

    def add(self, header: Header) -> None:
        self._headers[int(header["number"], 16)] = header

    def get(self, number: int) -> Header | None:
        return self._headers.get(number)

    def forget_to(self, number: int) -> None:
        """Drops the headers up to `number` (indexed now)."""
        for known in [n for n in self._headers if n <= number]:
            del self._headers[known]

    def clear(self) -> None:
        self._headers.clear()

    def linked(self, first: int, last: int, parent: str | None) -> tuple[int, bool]:
        """The newest block up to `last` whose headers from `first` hang together from `parent`
        (the indexed tip's hash; None: no check), first - 1 when the first does not; and whether
        a link was broken. The headers from a broken link on are dropped: they are asked again."""
        expected = parent
        for number in range(first, last + 1):
            header = self._headers.get(number)
            if header is None:
                return number - 1, False
            if expected is not None and header.get("parentHash") != expected:
                for stale in [n for n in self._headers if n >= number]:
                    del self._headers[stale]
                return number - 1, True
            expected = header["hash"]
        return last, False

    def missing(self, first: int, last: int) -> list[int]:
        return [n for n in range(first, last + 1) if n not in self._headers]


class LiveReader:
    """The node's answers for one block at a time, checked against its header."""

    def __init__(self, rpc: RpcClient, address: str) -> None:
        self.rpc = rpc
        self.address = address
        self.bloom = BloomFilter(address)
        self._receipts_served = True

    def headers(self, numbers: list[int]) -> list[Header | None]:
        """The headers of these blocks by number, in one request; None for a block the node lacks."""
        if not numbers:
            return []
        answers = self.rpc.batch([("eth_getBlockByNumber", [hex(n), False]) for n in numbers])
        headers: list[Header | None] = []
        for number, header in zip(numbers, answers, strict=True):
            if header is not None and (not isinstance(header, dict) or header.get("number") != hex(number)):
                raise IndexerError(f"the node at {self.rpc.node} answered {header!r} when asked for the header of "
                                   f"block {number}")
            headers.append(header)
        return headers

    def logs(self, header: Header) -> list[Log]:
        """The contract's record logs of this block. NodeBehind when the node lacks the block."""
        if not self.bloom.may_hold(header.get("logsBloom")):
            return []
        block_hash, number = header["hash"], header["number"]
        logs = self.rpc.call("eth_getLogs", [{"blockHash": block_hash, "address": self.address,
                                              "topics": [RECORD_EVENT_TOPICS]}], behind_retries=0)
        if not isinstance(logs, list):
            raise NodeBehind(f"eth_getLogs for block {int(number, 16)} answered {logs!r}")
        checked = self._checked(header, logs, "eth_getLogs")
        if not checked:
            checked = self._confirmed_empty(header)
        return checked

    def _checked(self, header: Header, logs: list[Any], source: str) -> list[Log]:
        """The contract's logs, not removed, in log order, if every log is of this block (its hash
        and number) with a log index; NodeBehind otherwise (an answer of another backend, asked
        again). A log that does not decode is the decoder's to report."""
        relevant = []
        for log in logs:
            if not isinstance(log, dict) or log.get("blockHash") != header["hash"] or \
                    log.get("blockNumber") != header["number"] or not _is_hex(log.get("logIndex")):
                raise NodeBehind(f"{source} for block {int(header['number'], 16)} ({header['hash']}) answered a log "
                                 f"of another block: {log!r}")
            if not log.get("removed") and str(log.get("address", "")).lower() == self.address:
                relevant.append(log)
        return sorted(relevant, key=lambda log: int(log["logIndex"], 16))

    def _confirmed_empty(self, header: Header) -> list[Log]:
        """A bloom that matched, and getLogs answered nothing: the block's receipts tell whether
        the bloom was wrong (then nothing) or the answer was (then their record logs)."""
        if not self._receipts_served:
            return []
        try:
            receipts = self.rpc.call("eth_getBlockReceipts", [header["hash"]], behind_retries=0)
        except RpcError as exc:
            if not is_not_served(exc):
                raise
            logger.info("the node at %s does not serve eth_getBlockReceipts (%s): a bloom's false positive is "
                        "confirmed by the second reading of the block only", self.rpc.node, exc)
            self._receipts_served = False
            return []
        if not isinstance(receipts, list):
            raise NodeBehind(f"eth_getBlockReceipts for block {int(header['number'], 16)} answered {receipts!r}")
        topics = set(RECORD_EVENT_TOPICS)
        held = [log for receipt in receipts for log in receipt.get("logs", [])
                if str(log.get("address", "")).lower() == self.address and (log.get("topics") or [None])[0] in topics]
        if held:
            logger.warning("the node at %s answered eth_getLogs for block %d (%s) with nothing, but its receipts "
                           "hold %d record logs: taking those", self.rpc.node, int(header["number"], 16),
                           header["hash"], len(held))
        return self._checked(header, held, "eth_getBlockReceipts")


# ----------------------------------------------------------------------------------- the phase

class Realtime:
    """The realtime phase over the headers it keeps (`headers`) and the node's answers (`live`)."""

    def __init__(self, rpc: RpcClient, reader: BatchReader, committer: Committer, address: str) -> None:
        self.rpc = rpc
        self.reader = reader  # its decoder
        self.committer = committer
        self.live = LiveReader(rpc, address)
        self.headers = HeaderChain()

    def follow(self, deployment: Deployment, parent: str | None, last: int, head: int, safe: int,
               latest: Header | None) -> bool:
        """Blocks last+1..safe one by one, through headers that hang together from `parent` (the
        indexed tip's hash) up to the head, whose header the poll brought (`latest`; None with a
        block tag). True when it should run again at once (headers were dropped); ChainChanged
        when the block after the tip is not its child."""
        top = head if latest is not None else safe  # the blocks indexed must be ancestors of the newest header known
        if latest is not None:
            self.headers.add(latest)
        self.headers.forget_to(last)
        missing = self.headers.missing(last + 1, top)
        for header in self.live.headers(missing):
            if header is not None:  # None: a backend behind the others; asked again next time
                self.headers.add(header)
        newest, broken = self.headers.linked(last + 1, top, parent)
        if broken and newest == last:
            raise ChainChanged(f"block {last + 1} is not the child of the indexed block {last}")
        memory = RecordMemory()
        for number in range(last + 1, min(newest, safe) + 1):
            header = self.headers.get(number)
            assert header is not None  # linked
            events = self.reader.events_of(self.live.logs(header), number, number)
            batch = Batch(number, number, head, number, events, {number: header}, parent, self.rpc.tally.take(),
                          by_range=False)
            self.committer.commit(deployment, batch, memory)
            parent = header["hash"]
            self.headers.forget_to(number)
        self.committer.calls.blocks(min(newest, safe), self.committer.metrics)
        return broken
