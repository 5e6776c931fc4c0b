/**
 * Checks that turn caller input into ABI values, with the spec's exact messages.
 *
 * Unsigned integers are accepted as a `bigint`, a string of decimal digits, or a safe integer
 * `number` (0 to 2^53-1), then range-checked against the ABI width. A `number` above 2^53-1
 * may already have lost digits, so it is refused (`number must be a safe uint`): pass a bigint
 * or a decimal string.
 */
import { getAddress } from "viem";

export const INVALID_ADDRESS = "invalid address";
export const INVALID_BYTES32 = "bytes32 value must be 32 bytes";
export const UNSAFE_UINT = "number must be a safe uint";

/** A uint input: a bigint, a safe integer number, or a string of decimal digits. */
export type UintInput = bigint | number | string;
/** A bytes32 input: `0x` and 64 hex digits (any case), or 32 bytes. */
export type Bytes32Input = `0x${string}` | string | Uint8Array;
/** A `0x` hex string. */
export type Hex = `0x${string}`;

/** Invalid input to a client helper; `message` is one of the spec's validation messages. */
export class ValidationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ValidationError";
  }
}

/** The message for a uint that does not fit `uint{bits}`. */
export function uintOutOfRange(bits: number): string {
  return `uint${bits} value out of range`;
}

const DECIMAL = /^[0-9]+$/;
const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
const BYTES32 = /^0x[0-9a-fA-F]{64}$/;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** `value` as a bigint in `0 .. 2^bits - 1`, or ValidationError. */
export function toUint(value: unknown, bits = 256): bigint {
  let number: bigint;
  if (typeof value === "bigint") {
    if (value < 0n) throw new ValidationError(UNSAFE_UINT);
    number = value;
  } else if (typeof value === "number") {
    if (!Number.isSafeInteger(value) || value < 0) throw new ValidationError(UNSAFE_UINT);
    number = BigInt(value);
  } else if (typeof value === "string") {
    if (!DECIMAL.test(value)) throw new ValidationError(UNSAFE_UINT);
    // Checked before BigInt() so that a huge string costs nothing.
    if (value.replace(/^0+/, "").length > (1n << BigInt(bits)).toString().length) {
      throw new ValidationError(uintOutOfRange(bits));
    }
    number = BigInt(value);
  } else {
    throw new ValidationError(UNSAFE_UINT);
  }
  if (number >> BigInt(bits) !== 0n) throw new ValidationError(uintOutOfRange(bits));
  return number;
}

/** `value` as an EIP-55 checksummed address; any letter case is accepted. */
export function toAddress(value: unknown): Hex {
  if (typeof value !== "string" || !ADDRESS.test(value)) throw new ValidationError(INVALID_ADDRESS);
  return getAddress(value.toLowerCase());
}

/** `value` as `0x` and 64 lowercase hex digits. */
export function toBytes32(value: unknown): Hex {
  if (value instanceof Uint8Array && value.length === 32) {
    return `0x${Array.from(value, (byte) => byte.toString(16).padStart(2, "0")).join("")}`;
  }
  if (typeof value === "string" && BYTES32.test(value)) return value.toLowerCase() as Hex;
  throw new ValidationError(INVALID_BYTES32);
}

/** `value` if it is a string UTF-8 can encode (no lone surrogate). */
export function toText(value: unknown, name: string): string {
  if (typeof value !== "string" || LONE_SURROGATE.test(value)) throw new ValidationError(`${name} must be a string`);
  return value;
}

export function toBool(value: unknown, name: string): boolean {
  if (typeof value !== "boolean") throw new ValidationError(`${name} must be a bool`);
  return value;
}
