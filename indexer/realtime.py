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

When to poll for the head is indexer.clock's to say.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from eth_utils.crypto import keccak

from indexer.commit import Committer
from indexer.errors import ChainChanged, IndexerError, NodeBehind, RangeTooLarge, RetriesExhausted, RpcError
from indexer.events import RECORD_EVENT_TOPICS
from indexer.fetch import Batch, BatchReader
from indexer.pipeline import RecordMemory
from indexer.rpc import UNREACHABLE_AFTER, RpcClient, is_not_served
from records.models import Deployment

logger = logging.getLogger(__name__)

Header = dict[str, Any]
Log = dict[str, Any]
# A block's logs or receipts the node lacks are asked again at once this many times (after the
# client's short backoff): behind a load balancer the next request likely meets another backend.
# A node that does not answer at all gives up after UNREACHABLE_AFTER failures, as the head's poll
# does: the indexer's own wait for it says so in /health within seconds.
BEHIND_RETRIES = 2
# A range the node timed out on (while it answered the same blocks one by one) is not asked as wide
# for this long: a node overloaded for a while may answer it again later, unlike a refusal.
TIMED_OUT_FOR = 600.0


# ------------------------------------------------------------------------------------ the bloom


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
        a link was broken. A broken link drops every header kept: a header below it may be the
        stale one (a block since replaced), so all are asked again."""
        expected = parent
        for number in range(first, last + 1):
            header = self._headers.get(number)
            if header is None:
                return number - 1, False
            if expected is not None and header.get("parentHash") != expected:
                self._headers.clear()
                return first - 1, True
            expected = header["hash"]
        return last, False

    def forget_from(self, number: int) -> None:
        """Drops the headers from `number` on (a block the node lacks may have been replaced)."""
        for stale in [n for n in self._headers if n >= number]:
            del self._headers[stale]

    def missing(self, first: int, last: int) -> list[int]:
        return [n for n in range(first, last + 1) if n not in self._headers]


class LiveReader:
    """The node's answers for one block at a time, checked against its header."""

    def __init__(self, rpc: RpcClient, address: str, span: Callable[[], int | None] = lambda: 1) -> None:
        self.rpc = rpc
        self.address = address
        self.bloom = BloomFilter(address)
        self.span = span  # the widest getLogs range the node allows, as known (None: not known)
        self._refused: int | None = None  # the narrowest range it refused here
        self._timed_out: tuple[int, float] | None = None  # the narrowest range it timed out on, and when (monotonic)
        self._receipts_served = True

    def headers(self, numbers: list[int]) -> list[Header | None]:
        """The headers of these blocks by number, in one request; None for a block the node lacks."""
        if not numbers:
            return []
        answers = self.rpc.batch([("eth_getBlockByNumber", [hex(n), False]) for n in numbers],
                                 failures=UNREACHABLE_AFTER)
        headers: list[Header | None] = []
        for number, header in zip(numbers, answers, strict=True):
            if header is not None and (not isinstance(header, dict) or header.get("number") != hex(number)):
                raise IndexerError(f"the node at {self.rpc.node} answered {header!r} when asked for the header of "
                                   f"block {number}")
            headers.append(header)
        return headers

    def logs(self, headers: list[Header]) -> list[list[Log]]:
        """The contract's record logs of each block, in one request for every block whose bloom
        may hold one (a node far away answers a round trip later: the blocks of a hand-over are
        many). Once the node lacks a block, the blocks before it: NodeBehind when it lacks the first.

        Several such blocks within a range the node allows are asked in one getLogs over the range
        (one call, not one a block); a block the range's answer holds no log of, its bloom says it
        may, is asked by its hash as a single one is (a backend that lacks it answered the range).
        A range the node refused is not asked as wide again; one it timed out on, while it answered
        the same blocks one by one, not for TIMED_OUT_FOR seconds."""
        wanted = [header for header in headers if self.bloom.may_hold(header.get("logsBloom"))]
        asked = {header["hash"] for header in wanted}
        answers, timed_out = self._by_range(wanted)
        wanted = [header for header in wanted if header["hash"] not in answers]
        if wanted:  # a refusal of one of them: asked one by one below, up to the first that fails
            with contextlib.suppress(NodeBehind, RpcError):
                answers.update(zip((h["hash"] for h in wanted),
                                   self.rpc.batch([self._get_logs(header) for header in wanted],
                                                  behind_retries=BEHIND_RETRIES, failures=UNREACHABLE_AFTER),
                                   strict=True))
                if timed_out is not None:  # the range's fault, not the node's: it answered the blocks one by one
                    self._timed_out = (timed_out, time.monotonic())
                    logger.info("the node at %s timed out on getLogs over %d blocks and answered them one by one; "
                                "a range as wide is not asked for %.0f s", self.rpc.node, timed_out, TIMED_OUT_FOR)
        read: list[list[Log]] = []
        for header in headers:
            try:
                if header["hash"] in answers:
                    raw = answers[header["hash"]]
                elif header["hash"] in asked:
                    raw = self._call(*self._get_logs(header))
                else:
                    read.append([])
                    continue
                read.append(self._taken(header, raw))
            except NodeBehind:
                if not read:
                    raise
                break
        return read

    def _by_range(self, wanted: list[Header]) -> tuple[dict[str, list[Log]], int | None]:
        """The logs of the blocks of `wanted` that one getLogs over their range holds, by block
        hash; the blocks it holds none of are left out, to be asked by hash. Nothing for fewer
        than two blocks, a range wider than the node allows, or a refusal. And the range's size
        when the node timed out on it (`logs` remembers it if the blocks then answer one by one)."""
        if len(wanted) < 2:
            return {}, None
        first, last = int(wanted[0]["number"], 16), int(wanted[-1]["number"], 16)
        size = last - first + 1
        if not self._may_ask(size):
            return {}, None
        try:
            logs = self.rpc.call("eth_getLogs", [{"address": self.address, "fromBlock": hex(first),
                                                  "toBlock": hex(last), "topics": [RECORD_EVENT_TOPICS]}],
                                 behind_retries=0, failures=UNREACHABLE_AFTER)
        except RangeTooLarge:  # a cap the reader processes learnt, not this one: never asked as wide again
            self._refused = size if self._refused is None else min(self._refused, size)
            return {}, None
        except RetriesExhausted as exc:  # asked block by block instead
            return {}, size if getattr(exc.__cause__, "kind", None) == "timeout" else None
        except (NodeBehind, RpcError):  # asked block by block instead
            return {}, None
        if not isinstance(logs, list):
            return {}, None
        by_hash: dict[str, list[Log]] = {}
        for log in logs:
            if isinstance(log, dict):
                by_hash.setdefault(str(log.get("blockHash")), []).append(log)
        return {header["hash"]: by_hash[header["hash"]] for header in wanted if header["hash"] in by_hash}, None

    def _may_ask(self, size: int) -> bool:
        """Whether a range of `size` blocks may be asked: within the node's cap, narrower than any
        it refused, and than one it timed out on less than TIMED_OUT_FOR seconds ago."""
        cap = self.span()
        timed_out = self._timed_out
        return (cap is None or size <= cap) and (self._refused is None or size < self._refused) and (
            timed_out is None or size < timed_out[0] or time.monotonic() - timed_out[1] >= TIMED_OUT_FOR)

    def _call(self, method: str, params: list[Any]) -> Any:
        """One call about one block. A refusal other than a method not served (a query timeout,
        a node that takes only block numbers for receipts) is asked again at the next poll, as
        a node behind is: NodeBehind."""
        try:
            return self.rpc.call(method, params, behind_retries=BEHIND_RETRIES, failures=UNREACHABLE_AFTER)
        except NodeBehind:
            raise
        except RpcError as exc:
            if is_not_served(exc):
                raise
            logger.warning("the node at %s refused %s for one block (%s); asking again", self.rpc.node, method, exc)
            raise NodeBehind(f"{method} refused: {exc}") from exc

    def _get_logs(self, header: Header) -> tuple[str, list[Any]]:
        return "eth_getLogs", [{"blockHash": header["hash"], "address": self.address, "topics": [RECORD_EVENT_TOPICS]}]

    def _taken(self, header: Header, logs: Any) -> list[Log]:
        """A getLogs answer for a block whose bloom may hold a record log, checked; confirmed by
        the block's receipts when empty."""
        if not isinstance(logs, list):
            raise NodeBehind(f"eth_getLogs for block {int(header['number'], 16)} answered {logs!r}")
        checked = self._checked(header, logs, "eth_getLogs")
        return checked or self._confirmed_empty(header)

    @staticmethod
    def _is_hex(value: Any) -> bool:
        return isinstance(value, str) and value.startswith("0x") and len(value) > 2 and \
            all(c in "0123456789abcdefABCDEF" for c in value[2:])

    def _checked(self, header: Header, logs: list[Any], source: str) -> list[Log]:
        """The contract's logs, not removed, in log order, if every log is of this block (its hash
        and number) with a log index; NodeBehind otherwise (an answer of another backend, asked
        again). A log that does not decode is the decoder's to report."""
        relevant = []
        for log in logs:
            if not isinstance(log, dict) or log.get("blockHash") != header["hash"] or \
                    log.get("blockNumber") != header["number"] or not self._is_hex(log.get("logIndex")):
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
            receipts = self._call("eth_getBlockReceipts", [header["hash"]])
        except RpcError as exc:  # not served (any other refusal: NodeBehind, asked again)
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
        self.live = LiveReader(rpc, address, span=reader.fetcher.cap)
        self.headers = HeaderChain()

    def follow(self, deployment: Deployment, parent: str | None, last: int, head: int, safe: int,
               latest: Header | None) -> None:
        """Blocks last+1..safe one by one, through headers that hang together from `parent` (the
        indexed tip's hash) up to the head, whose header the poll brought (`latest`; None with a
        block tag); ChainChanged when the block after the tip is not its child. Blocks whose
        headers do not hang together, or that the node lacks, wait for the next poll."""
        top = head if latest is not None else safe  # the blocks indexed must be ancestors of the newest header known
        self.headers.forget_to(last)
        for attempt in range(2):  # a broken link drops the headers kept: asked again at once, once
            if latest is not None:
                self.headers.add(latest)
            missing = self.headers.missing(last + 1, top)
            for header in self.live.headers(missing):
                if header is not None:  # None: a backend behind the others; asked again next time
                    self.headers.add(header)
            first = self.headers.get(last + 1)
            newest, broken = self.headers.linked(last + 1, top, parent)
            if not broken:
                break
            fresh = attempt or (latest is not None and last + 1 == head)  # not a header kept from before
            if fresh and first is not None and first.get("parentHash") != parent:
                raise ChainChanged(f"block {last + 1} is not the child of the indexed block {last}")
        else:
            return  # the node's headers do not hang together (backends on two branches): the next poll
        headers = [self.headers.get(number) for number in range(last + 1, min(newest, safe) + 1)]
        read = self.live.logs([header for header in headers if header is not None])  # all there: linked
        if read:  # one batch, one transaction: a hand-over's blocks come many at once
            to = last + len(read)
            events = [event for number, logs in enumerate(read, start=last + 1)
                      for event in self.reader.events_of(logs, number, number)]
            block_headers = {int(header["number"], 16): header for header in headers[:len(read)] if header}
            self.committer.commit(deployment, Batch(last + 1, to, head, to, events, block_headers, parent,
                                                    self.rpc.tally.take(), by_range=False), RecordMemory())
            self.headers.forget_to(to)
        if len(read) < len(headers):  # the node lacked a block, perhaps since replaced: asked again
            self.headers.forget_from(last + 1 + len(read))
        self.committer.calls.blocks(last + len(read), self.committer.metrics)
