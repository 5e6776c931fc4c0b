/**
 * Sending the builder's transactions through the user's wallet: any EIP-1193 provider, such as
 * the `window.ethereum` a browser wallet injects.
 *
 * `connectWallet` asks for an account and checks that the wallet is on the deployment's chain;
 * `wallet.send(tx)` checks the chain again, sends with `eth_sendTransaction` and waits for the
 * receipt. Whatever goes wrong is a `WalletError` whose `reason` says what the page should do:
 * `rejected` (the user said no: EIP-1193 code 4001), `wrong-chain` (ask the user to switch),
 * `no-account`, `reverted` (mined, but the contract refused it), or `wallet` (any other error the
 * wallet raised, its message kept).
 */
import type { UnsignedTransaction } from "./transactions.js";
import type { Hex } from "./validation.js";

/** An EIP-1193 provider: all the library asks of a wallet. */
export interface Eip1193Provider {
  request(args: { method: string; params?: readonly unknown[] }): Promise<unknown>;
}

export type WalletErrorReason = "rejected" | "wrong-chain" | "no-account" | "reverted" | "wallet";

export class WalletError extends Error {
  override name = "WalletError";
  constructor(
    message: string,
    readonly reason: WalletErrorReason,
    /** The wallet's EIP-1193 error code, when it gave one. */
    readonly code?: number,
  ) {
    super(message);
  }
}

/** The part of a transaction receipt the library reads (the wallet's object, as it gave it). */
export interface TransactionReceipt {
  transactionHash: Hex;
  blockNumber: Hex;
  status: Hex;
  [member: string]: unknown;
}

export interface WalletOptions {
  /** The chain the transactions are for: the deployment's (`client.deployment()`'s `chainId`). */
  chainId: number;
  /** How often to ask for the receipt while a transaction is being mined, in ms (default 1000). */
  pollMs?: number;
}

export interface Wallet {
  readonly account: Hex;
  readonly chainId: number;
  /** Sends the transaction from `account`; resolves with the receipt once it is mined. */
  send(transaction: UnsignedTransaction): Promise<TransactionReceipt>;
}

const USER_REJECTED = 4001;

function walletError(error: unknown, method: string): WalletError {
  if (error instanceof WalletError) return error;
  // EIP-1193 errors are objects with a numeric `code` and a `message`; wallets throw them as Error
  // instances or as plain objects, and some throw strings.
  const fields = typeof error === "object" && error !== null ? (error as { code?: unknown; message?: unknown }) : {};
  const code = Number.isInteger(fields.code) ? (fields.code as number) : undefined;
  const detail = typeof fields.message === "string" ? fields.message : String(error);
  if (code === USER_REJECTED) return new WalletError(`the user rejected the request (${method})`, "rejected", code);
  return new WalletError(`the wallet refused ${method}: ${detail}`, "wallet", code);
}

async function ask(provider: Eip1193Provider, method: string, params?: readonly unknown[]): Promise<unknown> {
  try {
    return await provider.request(params === undefined ? { method } : { method, params });
  } catch (error) {
    throw walletError(error, method);
  }
}

async function walletChain(provider: Eip1193Provider, wanted: number): Promise<void> {
  const answer = await ask(provider, "eth_chainId");
  const chainId = typeof answer === "string" || typeof answer === "number" ? Number(answer) : NaN;
  if (chainId !== wanted) {
    throw new WalletError(
      `the wallet is on chain ${Number.isNaN(chainId) ? String(answer) : chainId}; switch it to chain ${wanted}`,
      "wrong-chain",
    );
  }
}

/** Asks the wallet for an account (`eth_requestAccounts`) and checks it is on `options.chainId`. */
export async function connectWallet(provider: Eip1193Provider, options: WalletOptions): Promise<Wallet> {
  const { chainId } = options;
  const pollMs = options.pollMs ?? 1000;
  const accounts = await ask(provider, "eth_requestAccounts");
  const account = Array.isArray(accounts) && typeof accounts[0] === "string" ? (accounts[0] as Hex) : undefined;
  if (account === undefined) throw new WalletError("the wallet gave no account", "no-account");
  await walletChain(provider, chainId);
  return {
    account,
    chainId,
    async send(transaction) {
      if (transaction.chainId !== chainId) {
        throw new WalletError(`the transaction is for chain ${transaction.chainId}, the wallet's for ${chainId}`,
          "wrong-chain");
      }
      await walletChain(provider, chainId); // the user may have switched since
      const hash = await ask(provider, "eth_sendTransaction", [
        { from: account, to: transaction.to, data: transaction.data, value: transaction.value,
          chainId: `0x${chainId.toString(16)}` },
      ]);
      if (typeof hash !== "string") throw new WalletError(`the wallet answered ${String(hash)} for a hash`, "wallet");
      for (;;) {
        const receipt = (await ask(provider, "eth_getTransactionReceipt", [hash])) as TransactionReceipt | null;
        if (receipt) {
          if (receipt.status !== "0x1") throw new WalletError(`transaction ${hash} reverted`, "reverted");
          return receipt;
        }
        await new Promise((resolve) => setTimeout(resolve, pollMs));
      }
    },
  };
}
