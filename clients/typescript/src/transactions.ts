/**
 * Unsigned transactions for the bounty contract and its USDC token.
 *
 * Every method validates its input, encodes the call with viem and returns
 * `{chainId, to, data, value: "0x0"}`: hand it with a `from` to a wallet's
 * `eth_sendTransaction` (EIP-1193), or to viem's `sendTransaction`.
 */
import { encodeFunctionData, parseAbi } from "viem";

import {
  type Bytes32Input,
  type Hex,
  toAddress,
  toBool,
  toBytes32,
  toText,
  toUint,
  type UintInput,
  UNSAFE_UINT,
  ValidationError,
} from "./validation.js";

/** An unsigned transaction in the spec's shape (the member names are JSON-RPC's). */
export interface UnsignedTransaction {
  chainId: number;
  to: Hex;
  data: Hex;
  value: "0x0";
}

/** The deployment a builder makes transactions for. */
export interface TransactionBuilderConfig {
  chainId: number;
  contractAddress: string;
  usdcAddress: string;
}

export interface CreateBountyInput {
  metadataUri: string;
  metadataHash: Bytes32Input;
  rewardAmount: UintInput;
  duration: UintInput;
}

export interface SubmitInput {
  bountyId: UintInput;
  metadataUri: string;
  metadataHash: Bytes32Input;
}

export interface DisputeInput {
  submissionId: UintInput;
  metadataUri: string;
  metadataHash: Bytes32Input;
}

export const BOUNTY_ABI = parseAbi([
  "function createBounty(string metadataUri, bytes32 metadataHash, uint256 rewardAmount, uint64 duration)",
  "function submit(uint256 bountyId, string metadataUri, bytes32 metadataHash)",
  "function dispute(uint256 submissionId, string metadataUri, bytes32 metadataHash)",
  "function resolveDispute(uint256 disputeId, bool upheld)",
  "function finalize(uint256 bountyId)",
  "function advanceReviewCursor(uint256 bountyId)",
  "function refundExpired(uint256 bountyId)",
  "function refundSubmissionBond(uint256 submissionId)",
  "function cancelResolvedDispute(uint256 disputeId)",
  "function withdraw()",
  "function withdrawTo(address recipient)",
]);
export const USDC_ABI = parseAbi(["function approve(address spender, uint256 amount) returns (bool)"]);

/** The builder's methods: the spec's helpers, by their spec names, and the arbiter's `resolveDispute`. */
export interface TransactionBuilder {
  readonly config: Readonly<{ chainId: number; contractAddress: Hex; usdcAddress: Hex }>;
  /** USDC `approve(contract, amount)`: send it before `createBounty` (see quoteCreateAmount), `submit` or `dispute`. */
  approveUsdc(amount: UintInput): UnsignedTransaction;
  /** `createBounty(string,bytes32,uint256,uint64)`: the contract pulls reward plus post fee. */
  createBounty(input: CreateBountyInput): UnsignedTransaction;
  /** `submit(uint256,string,bytes32)`: the contract pulls the bounty's submission bond. */
  submit(input: SubmitInput): UnsignedTransaction;
  /** `dispute(uint256,string,bytes32)`: whitelisted grouts only; the contract pulls the dispute bond. */
  dispute(input: DisputeInput): UnsignedTransaction;
  finalize(bountyId: UintInput): UnsignedTransaction;
  advanceReviewCursor(bountyId: UintInput): UnsignedTransaction;
  refundExpired(bountyId: UintInput): UnsignedTransaction;
  refundSubmissionBond(submissionId: UintInput): UnsignedTransaction;
  cancelResolvedDispute(challengeId: UintInput): UnsignedTransaction;
  withdraw(): UnsignedTransaction;
  withdrawTo(recipient: string): UnsignedTransaction;
  /** `resolveDispute(uint256,bool)`: the arbiter's decision on a pending dispute. */
  resolveDispute(disputeId: UintInput, upheld: boolean): UnsignedTransaction;
}

/** A builder for one deployment; the addresses are checked (`invalid address`) and checksummed. */
export function createTransactionBuilder(config: TransactionBuilderConfig): TransactionBuilder {
  const id = toUint(config.chainId, 64);
  if (id > BigInt(Number.MAX_SAFE_INTEGER)) throw new ValidationError(UNSAFE_UINT); // chainId is a number
  const chainId = Number(id);
  const contractAddress = toAddress(config.contractAddress);
  const usdcAddress = toAddress(config.usdcAddress);
  const call = (data: Hex): UnsignedTransaction => ({ chainId, to: contractAddress, data, value: "0x0" });
  const bounty = (functionName: (typeof BOUNTY_ABI)[number]["name"], args: readonly unknown[]): UnsignedTransaction =>
    call(encodeFunctionData({ abi: BOUNTY_ABI, functionName, args } as Parameters<typeof encodeFunctionData>[0]));
  return {
    config: Object.freeze({ chainId, contractAddress, usdcAddress }),
    approveUsdc: (amount) => ({
      chainId,
      to: usdcAddress,
      data: encodeFunctionData({ abi: USDC_ABI, functionName: "approve", args: [contractAddress, toUint(amount)] }),
      value: "0x0",
    }),
    createBounty: (input) =>
      bounty("createBounty", [
        toText(input.metadataUri, "metadataUri"),
        toBytes32(input.metadataHash),
        toUint(input.rewardAmount),
        toUint(input.duration, 64),
      ]),
    submit: (input) =>
      bounty("submit", [toUint(input.bountyId), toText(input.metadataUri, "metadataUri"), toBytes32(input.metadataHash)]),
    dispute: (input) =>
      bounty("dispute", [
        toUint(input.submissionId),
        toText(input.metadataUri, "metadataUri"),
        toBytes32(input.metadataHash),
      ]),
    finalize: (bountyId) => bounty("finalize", [toUint(bountyId)]),
    advanceReviewCursor: (bountyId) => bounty("advanceReviewCursor", [toUint(bountyId)]),
    refundExpired: (bountyId) => bounty("refundExpired", [toUint(bountyId)]),
    refundSubmissionBond: (submissionId) => bounty("refundSubmissionBond", [toUint(submissionId)]),
    cancelResolvedDispute: (challengeId) => bounty("cancelResolvedDispute", [toUint(challengeId)]),
    withdraw: () => bounty("withdraw", []),
    withdrawTo: (recipient) => bounty("withdrawTo", [toAddress(recipient)]),
    resolveDispute: (disputeId, upheld) => bounty("resolveDispute", [toUint(disputeId), toBool(upheld, "upheld")]),
  };
}
