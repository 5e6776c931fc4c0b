// The TypeScript client against clients/test-vectors.json, the vectors the Python client is held
// to as well (tests/client/test_vectors.py): a change in one client that the other does not
// follow fails one of the two.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";

import {
  canonicalJson,
  createTransactionBuilder,
  metadataHash,
  metadataToDataUri,
  parseMetadataUri,
  quoteCreateAmount,
  type TransactionBuilder,
  type UnsignedTransaction,
  ValidationError,
} from "../src/index.js";

interface Vectors {
  deployment: { chainId: number; contractAddress: string; usdcAddress: string };
  transactions: { call: string; args: unknown[]; expected: UnsignedTransaction }[];
  validation: { call: string; args: unknown[]; error: string }[];
  canonicalJson: { json: string; canonical: string; hash: string; dataUri: string }[];
  parseMetadataUri: { uri: string; value: unknown }[];
  quotes: {
    rewardAmount: unknown;
    config?: { postFeeBps: number; submissionBondBps: number };
    expected?: Record<string, string>;
    error?: string;
  }[];
}

const vectors = JSON.parse(
  readFileSync(new URL("../../../test-vectors.json", import.meta.url), "utf-8"),
) as Vectors;
const builder = createTransactionBuilder(vectors.deployment);

/** A vector's argument as TypeScript takes it: {"bigint": "..."} is a bigint. */
function value(arg: unknown): unknown {
  if (arg !== null && typeof arg === "object" && !Array.isArray(arg)) {
    const entries = Object.entries(arg);
    if (entries.length === 1 && entries[0]?.[0] === "bigint") return BigInt(entries[0][1] as string);
    return Object.fromEntries(entries.map(([key, member]) => [key, value(member)]));
  }
  return arg;
}

function call(name: string, args: unknown[]): UnsignedTransaction {
  const method = builder[name as keyof TransactionBuilder] as unknown as (...values: unknown[]) => UnsignedTransaction;
  return method(...args.map(value));
}

const label = (name: string, args: unknown[]): string => `${name}(${JSON.stringify(args).slice(1, -1).slice(0, 60)})`;

describe("transactions", () => {
  for (const vector of vectors.transactions) {
    it(label(vector.call, vector.args), () => assert.deepEqual(call(vector.call, vector.args), vector.expected));
  }
});

describe("validation messages", () => {
  for (const vector of vectors.validation) {
    it(`${label(vector.call, vector.args)}: ${vector.error}`, () =>
      assert.throws(() => call(vector.call, vector.args), (error: unknown) => {
        assert.ok(error instanceof ValidationError);
        assert.equal(error.message, vector.error);
        return true;
      }));
  }
});

describe("canonical JSON, hash and data URI", () => {
  for (const vector of vectors.canonicalJson) {
    it(vector.json.slice(0, 50), () => {
      const parsed: unknown = JSON.parse(vector.json);
      assert.equal(canonicalJson(parsed), vector.canonical);
      assert.equal(metadataHash(parsed), vector.hash);
      assert.equal(metadataToDataUri(parsed), vector.dataUri);
    });
  }
});

describe("parseMetadataUri", () => {
  for (const vector of vectors.parseMetadataUri) {
    it(vector.uri.slice(0, 50) || "(empty)", () => assert.deepEqual(parseMetadataUri(vector.uri), vector.value));
  }
});

describe("quoteCreateAmount", () => {
  for (const vector of vectors.quotes) {
    it(String(vector.rewardAmount).slice(0, 30), () => {
      if (vector.error !== undefined) {
        assert.throws(() => quoteCreateAmount(vector.rewardAmount as string, vector.config), {
          name: "ValidationError",
          message: vector.error,
        });
        return;
      }
      const quote = quoteCreateAmount(vector.rewardAmount as string, vector.config);
      const asStrings = Object.fromEntries(Object.entries(quote).map(([key, amount]) => [key, String(amount)]));
      assert.deepEqual(asStrings, vector.expected);
    });
  }
});
