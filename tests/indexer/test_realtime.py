"""The realtime phase's parts (indexer.realtime): the bloom test against real headers of the dev
chain, and the headers kept linked by parent hash."""

from __future__ import annotations

from indexer.realtime import BloomFilter, HeaderChain
from tests.chain import USDC, Chain


def test_the_bloom_admits_the_contracts_record_blocks_and_rules_out_the_others(chain: Chain) -> None:
    chain.send(chain.usdc.functions.approve(chain.board.address, 2**256 - 1), chain.account(1))
    approval = chain.w3.eth.block_number
    chain.send(chain.board.functions.createBounty("ipfs://bloom", b"\x05" * 32, 3 * USDC, 3600), chain.account(1))
    created = chain.w3.eth.block_number
    bloom = BloomFilter(chain.deployment.contract_address.lower())

    def logs_bloom(number: int) -> str:
        return "0x" + bytes(chain.w3.eth.get_block(number)["logsBloom"]).hex()

    assert bloom.may_hold(logs_bloom(created))
    assert not bloom.may_hold(logs_bloom(approval))  # the token's log: another address and topic
    assert not bloom.may_hold("0x" + "00" * 256)
    assert not BloomFilter("0x" + "12" * 20).may_hold(logs_bloom(created))  # another contract
    assert bloom.may_hold(None)  # a node that sends no bloom: the block is read


def _header(number: int, parent: str) -> dict[str, str]:
    return {"number": hex(number), "hash": f"0x{number:064x}", "parentHash": parent}


def test_headers_hang_together_from_the_indexed_tip_and_a_broken_link_drops_them_all() -> None:
    chain = HeaderChain()
    for number in range(11, 16):
        chain.add(_header(number, f"0x{number - 1:064x}"))
    assert chain.linked(11, 15, f"0x{10:064x}") == (15, False)
    assert chain.linked(11, 17, f"0x{10:064x}") == (15, False)  # 16 not here yet
    assert chain.missing(11, 17) == [16, 17]
    chain.add(_header(14, "0x" + "ee" * 32))  # 14 replaced by a block of another branch: 13 may be stale too
    assert chain.linked(11, 15, f"0x{10:064x}") == (10, True)
    assert chain.missing(11, 15) == [11, 12, 13, 14, 15]
    chain.add(_header(11, f"0x{10:064x}"))
    assert chain.linked(11, 13, "0x" + "aa" * 32) == (10, True)  # the tip is not 11's parent
