// The TypeScript client against clients/test-vectors.json, the vectors the Python client is held
// to as well (tests/client/test_vectors.py): a change in one client that the other does not
// follow fails one of the two. The read client runs against a fake service (its `fetch` option),
// the websocket helper against scripted sockets.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";

import {
  canonicalJson,
  ConfigurationError,
  createReadClient,
  createTransactionBuilder,
  metadataHash,
  metadataToDataUri,
  parseMetadataUri,
  quoteCreateAmount,
  type LiveEvent,
  type ReadClient,
  type ReadClientOptions,
  RequestError,
  ResponseError,
  type Snapshot,
  type TransactionBuilder,
  type UnsignedTransaction,
  ValidationError,
  watchEvents,
} from "../src/index.js";
import { later, ScriptedSocket } from "./scripted-socket.js";

interface Answer {
  status?: number;
  body?: unknown;
  text?: string;
  contentType?: string;
}

interface ReadVector {
  name: string;
  client: Pick<ReadClientOptions, "deployment" | "qualify">;
  call: string;
  args: Record<string, unknown>;
  responses?: Answer[];
  urls: string[];
  result?: unknown;
  error?: { kind: "request" | "response" | "configuration"; message: string; status?: number; detail?: string | null; url?: string };
}

interface EventsVector {
  name: string;
  since: string | null;
  connections: { messages: object[]; close: number }[];
  urls: string[];
  snapshots: { seq: number; position: string; bounties: number[]; submissions: number[]; disputes: number[] }[];
  events: { type: string; id: number; seq: number; position: string }[];
  records: Record<string, Record<string, unknown>>;
  resumeFrom: string | null;
}

interface Vectors {
  deployment: { chainId: number; contractAddress: string; usdcAddress: string };
  transactions: { call: string; args: unknown[]; expected: UnsignedTransaction }[];
  validation: { call: string; args: unknown[]; error: string }[];
  canonicalJson: { json: string; canonical: string; hash: string; dataUri: string }[];
  parseMetadataUri: { uri: string | (string | { repeat: string; times: number })[]; value: unknown }[];
  quotes: {
    rewardAmount: unknown;
    config?: { postFeeBps: number; submissionBondBps: number };
    expected?: Record<string, string>;
    error?: string;
  }[];
  read: {
    baseUrl: string;
    health: unknown;
    deployment: ReadVector[];
    urls: ReadVector[];
    pages: ReadVector[];
    errors: ReadVector[];
  };
  events: { baseUrl: string; cases: EventsVector[] };
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

/** A vector's metadata URI: a string, or parts joined (a string, or `{repeat: s, times: n}`). */
function vectorUri(uri: Vectors["parseMetadataUri"][number]["uri"]): string {
  if (typeof uri === "string") return uri;
  return uri.map((part) => (typeof part === "string" ? part : part.repeat.repeat(part.times))).join("");
}

describe("parseMetadataUri", () => {
  for (const vector of vectors.parseMetadataUri) {
    const name = (typeof vector.uri === "string" ? vector.uri : JSON.stringify(vector.uri)).slice(0, 60);
    it(name || "(empty)", () => assert.deepEqual(parseMetadataUri(vectorUri(vector.uri)), vector.value));
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

const READ_ERRORS = { request: RequestError, response: ResponseError, configuration: ConfigurationError };
/** The methods whose first argument is a parent ID; every other argument goes in their options. */
const PARENT_ARGUMENT: Record<string, string> = {
  listSubmissions: "bountyId", submissionPage: "bountyId", submissions: "bountyId",
  listDisputes: "submissionId", disputePage: "submissionId", disputes: "submissionId",
};
const EMPTY_PAGE = { items: [], total: 0, limit: 50, cursor: null, next_cursor: null };

/** A fetch that answers the vector's `responses` in order, or else the read section's default answers. */
function fakeService(vector: ReadVector, requested: string[]): typeof fetch {
  const answers = vector.responses ? [...vector.responses] : null;
  return async (input) => {
    const url = new URL(String(input));
    requested.push(String(input));
    let answer: Answer;
    if (answers !== null) {
      const next = answers.shift();
      assert.ok(next, `a request the vector does not expect: ${url}`);
      answer = next;
    } else if (url.pathname === "/health") {
      answer = { body: vectors.read.health };
    } else {
      answer = { body: url.pathname.split("/").length === 2 ? EMPTY_PAGE : {} };
    }
    const text = answer.text ?? JSON.stringify(answer.body);
    return new Response(text, { status: answer.status ?? 200, headers: { "Content-Type": answer.contentType ?? "application/json" } });
  };
}

/** The vector's call in TypeScript's terms (iterators collected). */
async function read(client: ReadClient, call: string, args: Record<string, unknown>): Promise<unknown> {
  const method = client[call as keyof ReadClient] as (...values: unknown[]) => unknown;
  const parent = PARENT_ARGUMENT[call];
  const { id, ...options } = args;
  let result: unknown;
  if (id !== undefined) result = method(id);
  else if (parent !== undefined) {
    const { [parent]: parentId, ...rest } = options;
    result = method(parentId ?? null, rest);
  } else result = method(options);
  if (typeof result === "object" && result !== null && Symbol.asyncIterator in result) {
    const items: unknown[] = [];
    for await (const item of result as AsyncIterable<unknown>) items.push(item);
    return items;
  }
  return result;
}

for (const group of ["deployment", "urls", "pages", "errors"] as const) {
  describe(`read client: ${group}`, () => {
    for (const vector of vectors.read[group]) {
      it(vector.name, async () => {
        const requested: string[] = [];
        const client = createReadClient({ baseUrl: vectors.read.baseUrl, fetch: fakeService(vector, requested), ...vector.client });
        const expected = vector.error;
        if (expected === undefined) {
          const result = await read(client, vector.call, vector.args);
          if ("result" in vector) assert.deepEqual(result, vector.result);
        } else {
          await assert.rejects(read(client, vector.call, vector.args), (error: unknown) => {
            assert.ok(error instanceof READ_ERRORS[expected.kind], `${String(error)} is not a ${READ_ERRORS[expected.kind].name}`);
            assert.equal(error.message, expected.message);
            if (error instanceof RequestError) {
              assert.deepEqual([error.status, error.detail, error.url], [expected.status, expected.detail, expected.url]);
            }
            return true;
          });
        }
        assert.deepEqual(requested, vector.urls);
      });
    }
  });
}

describe("watchEvents: events", () => {
  for (const vector of vectors.events.cases) {
    it(vector.name, async () => {
      ScriptedSocket.opened = [];
      const snapshots: Snapshot[] = [];
      const events: LiveEvent[] = [];
      // What an application keeps: by kind, by id (a snapshot replaces it all).
      let records: Record<string, Record<string, unknown>> = { bounty: {}, submission: {}, dispute: {} };
      const watch = watchEvents(vectors.events.baseUrl, {
        onSnapshot(snapshot) {
          snapshots.push(snapshot);
          records = {
            bounty: Object.fromEntries(snapshot.bounties.map((b) => [b.id, b])),
            submission: Object.fromEntries(snapshot.submissions.map((s) => [s.id, s])),
            dispute: Object.fromEntries(snapshot.disputes.map((d) => [d.id, d])),
          };
        },
        onEvent(event) {
          events.push(event);
          const held = records[event.type.split(".")[0] ?? ""] ?? {};
          if (event.type.endsWith(".removed")) delete held[event.payload.id];
          else held[event.payload.id] = event.payload;
        },
      }, { WebSocket: ScriptedSocket, reconnectDelayMs: 0, ...(vector.since === null ? {} : { since: vector.since }) });
      try {
        for (const [index, connection] of vector.connections.entries()) {
          const socket = ScriptedSocket.opened[index];
          assert.ok(socket, `connection ${index + 1} was not opened`);
          socket.send(...connection.messages);
          socket.onclose?.({ code: connection.close });
          await later(5);
        }
        assert.deepEqual(ScriptedSocket.opened.map((socket) => socket.url), vector.urls);
        assert.deepEqual(snapshots.map((s) => ({
          seq: s.seq, position: s.position,
          bounties: s.bounties.map((b) => b.id), submissions: s.submissions.map((b) => b.id), disputes: s.disputes.map((b) => b.id),
        })), vector.snapshots);
        assert.deepEqual(events.map((e) => ({ type: e.type, id: e.payload.id, seq: e.seq, position: e.position })), vector.events);
        assert.deepEqual(records, vector.records);
        assert.equal(watch.resumeFrom, vector.resumeFrom);
      } finally {
        watch.close();
      }
    });
  }
});
