// connectWallet and Wallet.send against scripted EIP-1193 providers: what each wallet answer or
// error becomes. The browser test (tests/client/test_typescript_in_a_browser.py) sends through a
// wallet backed by the dev chain.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { connectWallet, type Eip1193Provider, type UnsignedTransaction, WalletError, type WalletErrorReason } from "../src/index.js";

const CHAIN_ID = 91342;
const ACCOUNT = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";
const HASH = `0x${"ab".repeat(32)}`;
const TX: UnsignedTransaction = { chainId: CHAIN_ID, to: "0x5FbDB2315678afecb367f032d93F642f64180aa3", data: "0x05261aea", value: "0x0" };

type Answers = Record<string, (params: readonly unknown[] | undefined) => unknown>;

/** A wallet on the dev chain that mines at once; `answers` replaces what it does for some methods. */
function scripted(answers: Answers = {}): Eip1193Provider & { calls: { method: string; params?: readonly unknown[] }[] } {
  const calls: { method: string; params?: readonly unknown[] }[] = [];
  const defaults: Answers = {
    eth_requestAccounts: () => [ACCOUNT],
    eth_chainId: () => `0x${CHAIN_ID.toString(16)}`,
    eth_sendTransaction: () => HASH,
    eth_getTransactionReceipt: () => ({ transactionHash: HASH, blockNumber: "0x10", status: "0x1" }),
  };
  return {
    calls,
    async request({ method, params }) {
      calls.push(params === undefined ? { method } : { method, params });
      const answer = answers[method] ?? defaults[method];
      if (answer === undefined) throw new Error(`unexpected ${method}`);
      return answer(params);
    },
  };
}

function fails(reason: WalletErrorReason, message: string, code?: number) {
  return (error: unknown) => {
    assert.ok(error instanceof WalletError, String(error));
    assert.equal(error.name, "WalletError");
    assert.equal(error.reason, reason);
    assert.equal(error.message, message);
    assert.equal(error.code, code);
    return true;
  };
}

const rejection = { code: 4001, message: "User rejected the request." };
class ProviderRpcError extends Error {
  constructor(message: string, readonly code: number) {
    super(message);
  }
}

describe("connectWallet", () => {
  it("takes the wallet's first account and sends from it, waiting for the receipt", async () => {
    let polls = 0;
    const provider = scripted({ eth_getTransactionReceipt: () => (++polls < 3 ? null : { transactionHash: HASH, blockNumber: "0x10", status: "0x1" }) });
    const wallet = await connectWallet(provider, { chainId: CHAIN_ID, pollMs: 1 });
    assert.equal(wallet.account, ACCOUNT);
    assert.equal(wallet.chainId, CHAIN_ID);
    const receipt = await wallet.send(TX);
    assert.equal(receipt.transactionHash, HASH);
    assert.equal(polls, 3);
    assert.deepEqual(provider.calls.slice(0, 4), [
      { method: "eth_requestAccounts" },
      { method: "eth_chainId" },
      { method: "eth_chainId" }, // again at send: the user may have switched
      { method: "eth_sendTransaction", params: [{ from: ACCOUNT, to: TX.to, data: TX.data, value: "0x0", chainId: "0x164ce" }] },
    ]);
  });

  it("accepts a chain ID the wallet gives as a number", async () => {
    await connectWallet(scripted({ eth_chainId: () => CHAIN_ID }), { chainId: CHAIN_ID });
  });

  for (const [thrown, what] of [[rejection, "a plain object"], [new ProviderRpcError("User denied", 4001), "an Error"]] as const) {
    it(`maps code 4001 thrown as ${what} to reason "rejected"`, async () => {
      await assert.rejects(connectWallet(scripted({ eth_requestAccounts: () => { throw thrown; } }), { chainId: CHAIN_ID }),
        fails("rejected", "the user rejected the request (eth_requestAccounts)", 4001));
      const wallet = await connectWallet(scripted({ eth_sendTransaction: () => { throw thrown; } }), { chainId: CHAIN_ID });
      await assert.rejects(wallet.send(TX), fails("rejected", "the user rejected the request (eth_sendTransaction)", 4001));
    });
  }

  it('refuses a wallet on another chain with reason "wrong-chain", naming both chains', async () => {
    await assert.rejects(connectWallet(scripted({ eth_chainId: () => "0x1" }), { chainId: CHAIN_ID }),
      fails("wrong-chain", "the wallet is on chain 1; switch it to chain 91342"));
    await assert.rejects(connectWallet(scripted({ eth_chainId: () => "mainnet" }), { chainId: CHAIN_ID }),
      fails("wrong-chain", "the wallet is on chain mainnet; switch it to chain 91342"));
  });

  it("sends nothing when the user switched chains since connecting, or the transaction is for another chain", async () => {
    let chain = CHAIN_ID;
    const provider = scripted({ eth_chainId: () => `0x${chain.toString(16)}` });
    const wallet = await connectWallet(provider, { chainId: CHAIN_ID });
    await assert.rejects(wallet.send({ ...TX, chainId: 1 }), fails("wrong-chain", "the transaction is for chain 1, the wallet's for 91342"));
    chain = 10;
    await assert.rejects(wallet.send(TX), fails("wrong-chain", "the wallet is on chain 10; switch it to chain 91342"));
    assert.ok(provider.calls.every((call) => call.method !== "eth_sendTransaction"));
  });

  it('gives reason "no-account" when the wallet gives no account', async () => {
    await assert.rejects(connectWallet(scripted({ eth_requestAccounts: () => [] }), { chainId: CHAIN_ID }),
      fails("no-account", "the wallet gave no account"));
  });

  it('gives reason "reverted" for a mined transaction the contract refused', async () => {
    const wallet = await connectWallet(scripted({ eth_getTransactionReceipt: () => ({ transactionHash: HASH, blockNumber: "0x10", status: "0x0" }) }),
      { chainId: CHAIN_ID });
    await assert.rejects(wallet.send(TX), fails("reverted", `transaction ${HASH} reverted`));
  });

  it('keeps any other error\'s message and code, with reason "wallet"', async () => {
    const broke = (thrown: unknown) => scripted({ eth_sendTransaction: () => { throw thrown; } });
    const cases: [unknown, string, number | undefined][] = [
      [{ code: -32000, message: "insufficient funds for gas" }, "insufficient funds for gas", -32000],
      [new ProviderRpcError("Disconnected", 4900), "Disconnected", 4900],
      [new Error("no code"), "no code", undefined],
      [{ code: "ACTION_REJECTED", message: "not an EIP-1193 code" }, "not an EIP-1193 code", undefined],
      ["a string", "a string", undefined],
    ];
    for (const [thrown, detail, code] of cases) {
      const wallet = await connectWallet(broke(thrown), { chainId: CHAIN_ID });
      await assert.rejects(wallet.send(TX), fails("wallet", `the wallet refused eth_sendTransaction: ${detail}`, code));
    }
    const odd = await connectWallet(scripted({ eth_sendTransaction: () => 42 }), { chainId: CHAIN_ID });
    await assert.rejects(odd.send(TX), fails("wallet", "the wallet answered 42 for a hash"));
  });
});
