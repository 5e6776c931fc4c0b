/**
 * Metadata documents: canonical JSON, inline `data:` URIs and their keccak256 hashes.
 *
 * Canonical JSON is `JSON.stringify` of the value with every object's keys sorted (by UTF-16
 * code units, as `Array.prototype.sort` does; keys that are array indices come first, in
 * numeric order, as a JavaScript object always lists them) and no whitespace. Non-ASCII
 * characters are kept; an `undefined` member is left out, and `undefined` in an array is `null`.
 * The Python client gives byte for byte the same text (clients/test-vectors.json holds both to it).
 */
import { keccak256, stringToBytes } from "viem";

import type { Hex } from "./validation.js";

export const DATA_URI_PREFIX = "data:application/json,";

/** A JSON value, as `JSON.parse` gives it. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

function sorted(value: unknown): unknown {
  if (value !== null && typeof value === "object" && typeof (value as { toJSON?: unknown }).toJSON === "function") {
    value = (value as { toJSON: () => unknown }).toJSON();
  }
  if (typeof value === "bigint") {
    throw new TypeError(`bigint ${value} has no JSON form: pass it as a decimal string`);
  }
  if (Array.isArray(value)) return value.map(sorted);
  if (value === null || typeof value !== "object") return value;
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value).sort()) out[key] = sorted((value as Record<string, unknown>)[key]);
  return out;
}

/** The canonical JSON text of `value`; TypeError for a value with none (a bigint, `undefined`). */
export function canonicalJson(value: unknown): string {
  const text: string | undefined = JSON.stringify(sorted(value));
  if (text === undefined) throw new TypeError(`${typeof value} has no canonical JSON form`);
  return text;
}

/** `data:application/json,` followed by the canonical JSON of `metadata`, unencoded. */
export function metadataToDataUri(metadata: unknown): string {
  return DATA_URI_PREFIX + canonicalJson(metadata);
}

/** keccak256 of the UTF-8 bytes of the canonical JSON of `metadata` (the contract's `bytes32 metadataHash`). */
export function metadataHash(metadata: unknown): Hex {
  return keccak256(stringToBytes(canonicalJson(metadata)));
}

function parseJson(text: string): JsonValue | undefined {
  try {
    return JSON.parse(text) as JsonValue;
  } catch {
    return undefined;
  }
}

function base64ToText(encoded: string): string | undefined {
  const padded = encoded + "=".repeat((4 - (encoded.length % 4)) % 4);
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(padded)) return undefined;
  try {
    const binary = atob(padded);
    return new TextDecoder("utf-8", { fatal: true }).decode(Uint8Array.from(binary, (c) => c.charCodeAt(0)));
  } catch {
    return undefined;
  }
}

/**
 * The JSON value held inline by a `data:application/json` URI, or null: the raw form
 * `metadataToDataUri` makes, the percent-encoded form and the base64 form (media type
 * parameters such as `;charset=utf-8` allowed). Anything else (an `ipfs://` URI, a payload that
 * is not JSON, a non-string) gives null.
 */
export function parseMetadataUri(uri: unknown): JsonValue | null {
  if (typeof uri !== "string" || uri.slice(0, 5).toLowerCase() !== "data:") return null;
  const comma = uri.indexOf(",", 5);
  if (comma < 0) return null;
  const parameters = uri.slice(5, comma).split(";").map((part) => part.trim().toLowerCase());
  if (parameters[0] !== "application/json") return null;
  const payload = uri.slice(comma + 1);
  const texts: string[] = [];
  if (parameters.length > 1 && parameters[parameters.length - 1] === "base64") {
    let encoded: string;
    try {
      encoded = decodeURIComponent(payload).trim();
    } catch {
      return null;
    }
    const text = base64ToText(encoded);
    if (text === undefined) return null;
    texts.push(text);
  } else {
    texts.push(payload);
    try {
      texts.push(decodeURIComponent(payload));
    } catch {
      // not percent-encoded: the raw text only
    }
  }
  for (const text of texts) {
    const parsed = parseJson(text);
    if (parsed !== undefined) return parsed;
  }
  return null;
}
