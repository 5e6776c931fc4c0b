// A TypeScript user of the packed bounty-client: the root and the subpaths, with their real types
// (each @ts-expect-error fails the check if a declaration is missing and the import is `any`).
import { createTransactionBuilder, VERSION, type UnsignedTransaction } from "bounty-client";
import { createTransactionBuilder as builderFromSubpath, type TransactionBuilder } from "bounty-client/transactions";
import { connectWallet, WalletError, type Eip1193Provider, type Wallet } from "bounty-client/wallet";
import { quoteCreateAmount, type CreateQuote } from "bounty-client/quote";
import type { Bounty } from "bounty-client/records";

const builder: TransactionBuilder = builderFromSubpath({
  chainId: 91342,
  contractAddress: "0x5FbDB2315678afecb367f032d93F642f64180aa3",
  usdcAddress: "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512",
});
const approval: UnsignedTransaction = builder.approveUsdc(25_625_000n);
const data: `0x${string}` = approval.data;
const value: "0x0" = approval.value;
// @ts-expect-error: chainId is a number
createTransactionBuilder({ chainId: "91342", contractAddress: "0x0", usdcAddress: "0x0" });

const quote: CreateQuote = quoteCreateAmount(25_000_000n);
const total: bigint = quote.totalAmount;
// @ts-expect-error: a record's amount is a decimal string
const reward: bigint = ({} as Bounty).bounty_amount;

async function send(provider: Eip1193Provider): Promise<string> {
  try {
    const wallet: Wallet = await connectWallet(provider, { chainId: builder.config.chainId });
    return (await wallet.send(approval)).transactionHash;
  } catch (error) {
    if (error instanceof WalletError) return error.reason;
    throw error;
  }
}

export { VERSION, data, value, total, reward, send };
