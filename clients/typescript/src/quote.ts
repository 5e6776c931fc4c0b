/** What posting a bounty costs: the contract's post fee and submission bond, rounded as it does. */
import { toUint, uintOutOfRange, type UintInput, ValidationError } from "./validation.js";

export const BPS_DENOMINATOR = 10_000n;

/** The contract's rates in basis points; the defaults are the reference contract's (2.5 % fee, 10 % bond). */
export interface QuoteConfig {
  postFeeBps?: UintInput;
  submissionBondBps?: UintInput;
}

/** The amounts of a `createBounty`, in USDC base units. */
export interface CreateQuote {
  rewardAmount: bigint;
  /** The post fee: floor(reward × postFeeBps / 10000). */
  feeAmount: bigint;
  /** What each submitter approves: floor(reward × submissionBondBps / 10000). */
  bondAmount: bigint;
  /** reward + fee: what the poster approves and the contract pulls. */
  totalAmount: bigint;
}

function rate(value: UintInput | undefined, fallback: bigint, name: string): bigint {
  if (value === undefined) return fallback;
  const bps = toUint(value, 16);
  if (bps > BPS_DENOMINATOR) throw new ValidationError(`${name} must be at most ${BPS_DENOMINATOR}`);
  return bps;
}

/**
 * The post fee, submission bond and total funding of a bounty of `rewardAmount`, rounded down
 * as the contract rounds. The reward and the total are checked as uint256.
 */
export function quoteCreateAmount(rewardAmount: UintInput, config: QuoteConfig = {}): CreateQuote {
  const feeBps = rate(config.postFeeBps, 250n, "postFeeBps");
  const bondBps = rate(config.submissionBondBps, 1_000n, "submissionBondBps");
  const reward = toUint(rewardAmount);
  const fee = (reward * feeBps) / BPS_DENOMINATOR;
  const total = reward + fee;
  if (total >> 256n !== 0n) throw new ValidationError(uintOutOfRange(256));
  return { rewardAmount: reward, feeAmount: fee, bondAmount: (reward * bondBps) / BPS_DENOMINATOR, totalAmount: total };
}
