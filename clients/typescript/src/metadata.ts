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

/**
 * The most UTF-8 bytes of JSON text an inline metadata URI is read for, once decoded (percent
 * escapes or base64 undone): past it, `parseMetadataUri` reads the URI as not inline JSON.
 */
export const MAX_INLINE_JSON_BYTES = 64 * 1024;

/**
 * The deepest nesting of arrays and objects read as inline metadata (`[]` is 1 deep). Metadata is
 * a flat document; 64 keeps every recursive reader of the value (`canonicalJson`,
 * `JSON.stringify`, and the Python client's, bound by a recursion limit of 1,000 frames) far from
 * its stack's end.
 */
export const MAX_INLINE_JSON_DEPTH = 64;

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

/**
 * Whether arrays and objects in `text` nest deeper than MAX_INLINE_JSON_DEPTH, found in one pass
 * without parsing (brackets inside strings do not count; a string left open runs to the end):
 * exact for JSON, and the Python client counts alike.
 */
function tooDeep(text: string): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // a backslash: the next character is escaped
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) {
      inString = true;
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > MAX_INLINE_JSON_DEPTH) return true;
    } else if (c === 0x5d || c === 0x7d) {
      depth--;
    }
  }
  return false;
}

function utf8Length(text: string): number {
  return new TextEncoder().encode(text).length; // a lone surrogate is U+FFFD, 3 bytes, as in Python
}

function parseJson(text: string): JsonValue | undefined {
  if (text.length > MAX_INLINE_JSON_BYTES || utf8Length(text) > MAX_INLINE_JSON_BYTES || tooDeep(text)) {
    return undefined;
  }
  try {
    return JSON.parse(text) as JsonValue;
  } catch {
    return undefined;
  }
}

/** `decodeURIComponent`, or undefined where it throws (a stray `%`, escapes that are not UTF-8). */
function decodeUriComponent(text: string): string | undefined {
  try {
    return decodeURIComponent(text);
  } catch {
    return undefined;
  }
}

/** The longest base64 of MAX_INLINE_JSON_BYTES, padded. */
const MAX_BASE64_CHARS = 4 * Math.ceil(MAX_INLINE_JSON_BYTES / 3);
/**
 * A percent escape is three characters for one byte: a payload more than three times as long as a
 * bound cannot be within it once decoded, and is not decoded at all.
 */
const ESCAPE_CHARS = 3;

/**
 * The UTF-8 text held by a base64 payload (percent escapes and surrounding whitespace allowed), or
 * undefined: not base64, not UTF-8 (a byte order mark is kept, and is not JSON), or more than
 * MAX_INLINE_JSON_BYTES, which is known from the lengths before anything is decoded.
 */
function base64Text(payload: string): string | undefined {
  if (payload.length > ESCAPE_CHARS * MAX_BASE64_CHARS) return undefined;
  const encoded = decodeUriComponent(payload)?.trim();
  if (encoded === undefined) return undefined;
  const padded = encoded + "=".repeat((4 - (encoded.length % 4)) % 4);
  if (padded.length > MAX_BASE64_CHARS || !/^[A-Za-z0-9+/]*={0,2}$/.test(padded)) return undefined;
  const padding = padded.endsWith("==") ? 2 : padded.endsWith("=") ? 1 : 0;
  if ((padded.length / 4) * 3 - padding > MAX_INLINE_JSON_BYTES) return undefined;
  try {
    const binary = atob(padded);
    const bytes = Uint8Array.from(binary, (c) => c.charCodeAt(0));
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    return undefined;
  }
}

/** The texts a raw or percent-encoded payload may hold. */
function inlineTexts(payload: string): string[] {
  const texts = [payload];
  if (payload.includes("%") && payload.length <= ESCAPE_CHARS * MAX_INLINE_JSON_BYTES) {
    const decoded = decodeUriComponent(payload);
    if (decoded !== undefined) texts.push(decoded);
  }
  return texts;
}

/**
 * The JSON value held inline by a `data:application/json` URI, or null; never throws: the raw form
 * `metadataToDataUri` makes, the percent-encoded form and the base64 form (media type parameters
 * such as `;charset=utf-8` allowed). Anything else gives null: an `ipfs://` URI, a payload that is
 * not JSON, JSON text of more than `MAX_INLINE_JSON_BYTES` (64 KiB, in UTF-8, once decoded) or
 * nested deeper than `MAX_INLINE_JSON_DEPTH` (64), a non-string. A payload too long to hold 64 KiB
 * once decoded is not decoded at all. The Python client's `parse_metadata_uri` gives the same
 * answers (clients/test-vectors.json holds both to them).
 */
export function parseMetadataUri(uri: unknown): JsonValue | null {
  if (typeof uri !== "string" || uri.slice(0, 5).toLowerCase() !== "data:") return null;
  const comma = uri.indexOf(",", 5);
  if (comma < 0) return null;
  const parameters = uri.slice(5, comma).split(";").map((part) => part.trim().toLowerCase());
  if (parameters[0] !== "application/json") return null;
  const payload = uri.slice(comma + 1);
  let texts: string[];
  if (parameters.length > 1 && parameters[parameters.length - 1] === "base64") {
    const text = base64Text(payload);
    texts = text === undefined ? [] : [text];
  } else {
    texts = inlineTexts(payload);
  }
  for (const text of texts) {
    const parsed = parseJson(text);
    if (parsed !== undefined) return parsed;
  }
  return null;
}
