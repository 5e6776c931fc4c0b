"""Decoding of the record events from raw logs, and metadata and times no caller can use to stop
the indexer: invalid UTF-8, NUL characters, long and astral strings, deadlines past year 9999,
and logs whose body does not decode."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import pytest
from eth_abi.abi import encode as abi_encode
from web3 import Web3
from web3.types import TxReceipt

from contracts.demo import seed_demo_activity
from indexer.errors import IndexerError
from indexer.events import RECORD_EVENT_TOPICS, LogRef, UndecodableLog, decode_log
from indexer.models import ChangeLogEntry
from indexer.rpc import RpcClient
from indexer.sync import Indexer
from indexer.transitions import chain_time
from records.models import Bounty
from tests.chain import USDC, Chain
from tests.indexer.conftest import catch_up_to_head, config_for
from tests.indexer.mirror import RECORD_EVENTS, assert_live_consumer_is_current, assert_mirror_equals_chain

HASH = b"\x22" * 32
LAST_SECOND = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)
CREATE_BOUNTY = Web3.keccak(text="createBounty(string,bytes32,uint256,uint64)")[:4]


def raw_logs(chain: Chain) -> list[dict[str, Any]]:
    """The record logs of the bounty contract, as eth_getLogs returns them."""
    query = {"address": chain.deployment.contract_address, "fromBlock": "0x0", "toBlock": "latest",
             "topics": [RECORD_EVENT_TOPICS]}
    logs: list[dict[str, Any]] = chain.w3.provider.make_request("eth_getLogs", [query])["result"]  # type: ignore[arg-type]
    return logs


def create_bounty(chain: Chain, uri: bytes, duration: int = 3600) -> TxReceipt:
    """createBounty with `uri` as the raw bytes of its string argument, valid UTF-8 or not."""
    chain.send(chain.usdc.functions.approve(chain.board.address, 2**256 - 1), chain.account(1))
    arguments = abi_encode(["bytes", "bytes32", "uint256", "uint64"], [uri, HASH, 10 * USDC, duration])
    tx_hash = chain.w3.eth.send_transaction({"from": chain.account(1), "to": chain.board.address,
                                             "data": CREATE_BOUNTY + arguments})
    receipt = chain.w3.eth.wait_for_transaction_receipt(tx_hash)
    assert receipt["status"] == 1
    return receipt


def _camel(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(part.title() for part in rest)


def _as_decoded(value: Any) -> Any:
    """A value as web3 decodes it, in decode_log's terms: hex bytes, lowercase addresses."""
    if isinstance(value, bytes):
        return "0x" + value.hex()
    if isinstance(value, str) and Web3.is_checksum_address(value):
        return value.lower()
    return value


def test_decode_log_reads_every_record_event_as_web3_does(chain: Chain) -> None:
    seed_demo_activity(chain.w3, chain.deployment)
    by_web3 = {(log["transactionHash"], log["logIndex"]): log
               for name in RECORD_EVENTS for log in getattr(chain.board.events, name)().get_logs(from_block=0)}
    raw = raw_logs(chain)
    assert len(raw) == len(by_web3)

    for log in raw:
        event = decode_log(log)
        expected = by_web3[(bytes.fromhex(log["transactionHash"][2:]), int(log["logIndex"], 16))]
        assert type(event).__name__ == expected["event"]
        assert event.log == LogRef(block_number=expected["blockNumber"], block_hash="0x" + expected["blockHash"].hex(),
                                   tx_hash="0x" + expected["transactionHash"].hex(), log_index=expected["logIndex"])
        fields = {f.name: getattr(event, f.name) for f in dataclasses.fields(event) if f.name != "log"}
        assert fields == {name: _as_decoded(expected["args"][_camel(name)]) for name in fields}
    assert {type(decode_log(log)).__name__ for log in raw} == set(RECORD_EVENTS)


@pytest.mark.parametrize("key", ["blockHash", "transactionHash"])
@pytest.mark.parametrize("value", ["0x12", "0x" + "zz" * 32, None])
def test_a_log_whose_hash_is_not_a_hash_is_the_nodes_fault_and_named(chain: Chain, key: str, value: Any) -> None:
    # Not a log to skip (a record would be lost): the indexer stops on it, naming the answer,
    # and the ledger stores the hashes it checked here as they are.
    create_bounty(chain, b"ipfs://hash")
    log = {**raw_logs(chain)[-1], key: value}
    with pytest.raises(IndexerError, match=f"the node answered a log with {key} {value!r}, not a 32-byte hash"):
        decode_log(log)


@pytest.mark.parametrize(("uri", "stored"), [
    pytest.param(b"ipfs://\xff\xfe/\xc3(", "ipfs://\ufffd\ufffd/\ufffd(", id="invalid-utf8"),
    pytest.param(b"ok \xf0\x9f\xa6", "ok \ufffd", id="truncated-multibyte-sequence"),
    pytest.param(b"\xc0\xaf\xed\xa0\x80", "\ufffd" * 5, id="overlong-and-surrogate-encodings"),
    pytest.param(b"a\x00b\x00", "a\ufffdb\ufffd", id="nul-characters"),
    pytest.param("𝄞 🦄 👩‍👩‍👧 ipfs://émoji".encode(), "𝄞 🦄 👩‍👩‍👧 ipfs://émoji", id="astral-characters"),
    pytest.param(("data:text/plain,🦄" + "x" * 16_000).encode(), "data:text/plain,🦄" + "x" * 16_000, id="16-kb"),
    pytest.param(b"", "", id="empty"),
])
def test_hostile_metadata_is_indexed_replaced_or_intact(chain: Chain, indexer: Indexer,
                                                        caplog: pytest.LogCaptureFixture, uri: bytes,
                                                        stored: str) -> None:
    create_bounty(chain, uri)
    with caplog.at_level(logging.ERROR):
        catch_up_to_head(indexer)
    assert not [record for record in caplog.records if record.levelno >= logging.ERROR]
    bounty = Bounty.objects.get()
    assert (bounty.prompt, bounty.metadata_uri) == (stored, stored)
    assert ChangeLogEntry.objects.get(type="bounty.created").payload["prompt"] == stored
    assert Bounty.objects.filter(prompt=stored).count() == 1, "the stored text compares equal"


def test_a_deadline_beyond_year_9999_is_stored_as_its_last_second(chain: Chain, indexer: Indexer) -> None:
    duration = 300_000_000_000  # about 9,500 years
    create_bounty(chain, b"ipfs://forever", duration=duration)
    catch_up_to_head(indexer)
    bounty = Bounty.objects.get()
    assert (bounty.duration, bounty.deadline) == (duration, LAST_SECOND)
    assert ChangeLogEntry.objects.get(type="bounty.created").payload["deadline"] == "9999-12-31T23:59:59Z"


def test_a_duration_beyond_the_signed_64_bit_range_is_indexed(chain: Chain, indexer: Indexer) -> None:
    duration = 2**63  # the contract takes any uint64 whose deadline fits in a uint64
    create_bounty(chain, b"ipfs://longest", duration=duration)
    catch_up_to_head(indexer)
    assert Bounty.objects.get().duration == duration


@pytest.mark.parametrize(("timestamp", "moment"), [
    (0, datetime(1970, 1, 1, tzinfo=UTC)),
    (253_402_300_799, LAST_SECOND),
    (253_402_300_800, LAST_SECOND),
    (2**64 - 1, LAST_SECOND),
    (2**256 - 1, LAST_SECOND),
])
def test_chain_time_clamps_beyond_the_last_second_of_year_9999(timestamp: int, moment: datetime) -> None:
    assert chain_time(timestamp) == moment


# ---------------------------------------------------------------- malformed logs

Tamper = Callable[[dict[str, Any]], dict[str, Any]]


def _data_words(log: dict[str, Any], change: Callable[[list[str]], Sequence[str]]) -> dict[str, Any]:
    words = [log["data"][2 + i : 2 + i + 64] for i in range(0, len(log["data"]) - 2, 64)]
    return {**log, "data": "0x" + "".join(change(words))}


MALFORMED: dict[str, Tamper] = {
    "a-topic-missing": lambda log: {**log, "topics": log["topics"][:-1]},
    "an-extra-topic": lambda log: {**log, "topics": [*log["topics"], "0x" + "00" * 32]},
    "no-data": lambda log: {**log, "data": "0x"},
    "data-cut-short": lambda log: _data_words(log, lambda words: words[:5]),
    "data-not-hex": lambda log: {**log, "data": "0x" + "zz" * 32 * 10},
    "data-of-odd-length": lambda log: {**log, "data": log["data"] + "0"},
    "string-offset-beyond-the-data": lambda log: _data_words(log, lambda words: [*words[:6], "ff" * 32, *words[7:]]),
    "string-length-beyond-the-data": lambda log: _data_words(log, lambda words: [*words[:8], "ff" * 32, *words[9:]]),
    "not-a-record-event": lambda log: {**log, "topics": ["0x" + Web3.keccak(text="Other()").hex(), *log["topics"][1:]]},
    "no-topics": lambda log: {**log, "topics": []},
}


@pytest.mark.parametrize("tamper", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_log_does_not_decode(chain: Chain, tamper: Tamper) -> None:
    create_bounty(chain, b"ipfs://well-formed")
    (log,) = raw_logs(chain)
    decode_log(log)
    with pytest.raises(UndecodableLog):
        decode_log(tamper(log))


class MalformedCopies(RpcClient):
    """A node whose eth_getLogs answers (by range, and by block hash in a batch) also hold two
    malformed copies of each log."""

    def batch(self, calls: Sequence[tuple[str, Sequence[Any]]], *, behind_retries: int | None = None,
              failures: int | None = None) -> list[Any]:
        results = super().batch(calls, behind_retries=behind_retries, failures=failures)
        tampers = (MALFORMED["a-topic-missing"], MALFORMED["data-not-hex"])
        return [[*result, *(tamper(log) for log in result for tamper in tampers)] if method == "eth_getLogs" else result
                for (method, _), result in zip(calls, results, strict=True)]


def test_the_indexer_skips_a_log_that_does_not_decode_and_says_so(chain: Chain, db: None,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    seed_demo_activity(chain.w3, chain.deployment)
    indexer = Indexer(config_for(chain), rpc=MalformedCopies(chain.deployment.rpc_url))
    with caplog.at_level(logging.ERROR, logger="indexer.sync"):
        catch_up_to_head(indexer)
    skipped = [r for r in caplog.records if r.getMessage().startswith("skipping a log that does not decode")]
    assert len(skipped) == 2 * len(raw_logs(chain))
    assert_mirror_equals_chain(chain.board, indexer.deployment)
    assert_live_consumer_is_current(indexer.deployment)
