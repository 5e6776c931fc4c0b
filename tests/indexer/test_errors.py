"""indexer/errors.py: every exception the indexer raises survives the trip between processes (a
bulk backfill's reader raises them in the indexer, pickled), with its message and its fields."""

from __future__ import annotations

import pickle

import pytest

from indexer.errors import (
    BatchTooLarge,
    ChainChanged,
    InconsistentChain,
    IndexerError,
    NodeBehind,
    RangeTooLarge,
    ReorgTooDeep,
    RetriesExhausted,
    RpcError,
    Stopped,
    TransientRpcError,
    WaitTooLong,
)

EXAMPLES = [
    IndexerError("the node refuses eth_getLogs even for the single block 7"),
    ReorgTooDeep("the chain reorganised below the 1024 kept block hashes"),
    ChainChanged("blocks 5-9 changed while being read"),
    Stopped("stopped while waiting for the node's answer"),
    RpcError("JSON-RPC error -32602: invalid argument", code=-32602, data={"why": "hex"}),
    TransientRpcError("HTTP 429", retry_after=3.0, kind="rate_limited"),
    RangeTooLarge("eth_getLogs is limited to a 50 block range", refusal="cap", provider="QuickNode", cap=50,
                  code=-32600),
    RangeTooLarge("query returned more than 10000 results", refusal="try_range", provider="Infura", first=16, last=20,
                  code=-32005, data={"from": "0x10", "to": "0x14"}),
    NodeBehind("JSON-RPC error -32019: block is out of range"),
    InconsistentChain("submission 2 is not in the mirror"),
    BatchTooLarge("batch of 60 requests exceeds the limit of 10", max_size=10, code=-32600, data=None),
    RetriesExhausted("the node at http://node/v2/***: HTTP 503 (gave up after 8 attempts)"),
    WaitTooLong("http://explorer/api/eth-rpc asked to wait 999999999 s (Retry-After), more than "
                "BOUNTY_RPC_MAX_RETRY_AFTER_SECONDS (60 s): not waited for"),
]


@pytest.mark.parametrize("error", EXAMPLES, ids=lambda error: type(error).__name__)
def test_it_unpickles_as_it_was_raised(error: Exception) -> None:
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error)
    assert str(copy) == str(error)
    assert vars(copy) == vars(error)


def test_every_exception_of_the_module_is_tried() -> None:
    import indexer.errors as module

    defined = {value for value in vars(module).values()
               if isinstance(value, type) and issubclass(value, Exception) and value.__module__ == module.__name__
               and not value.__name__.startswith("_")}
    assert defined == {type(error) for error in EXAMPLES}
