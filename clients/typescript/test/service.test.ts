// The read client and the websocket helper against a real service: `scripts/dev` started by the
// test (anvil with the reference contracts and demo data, the indexer, the web server, on ports
// of their own), and transactions built by this library sent to the dev chain from an unlocked
// dev account with `eth_sendTransaction`, as a browser wallet sends them.
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";

import WebSocket from "ws";

import {
  type Bounty,
  createReadClient,
  createTransactionBuilder,
  type LiveEvent,
  metadataHash,
  metadataToDataUri,
  quoteCreateAmount,
  RequestError,
  type Snapshot,
  type UnsignedTransaction,
  watchEvents,
  type WebSocketConstructor,
} from "../src/index.js";

const REPOSITORY = fileURLToPath(new URL("../../../../", import.meta.url));

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => (typeof address === "object" && address ? resolve(address.port) : reject(new Error("no port"))));
    });
  });
}

async function until<T>(what: string, check: () => Promise<T | undefined> | T | undefined, seconds = 60): Promise<T> {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    try {
      const found = await check();
      if (found !== undefined) return found;
    } catch {
      // not yet
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

let dev: ChildProcess;
let output = "";
let stateDir: string;
let baseUrl: string;
let rpcUrl: string;

async function rpc(method: string, params: unknown[]): Promise<unknown> {
  const response = await fetch(rpcUrl, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
  });
  const body = (await response.json()) as { result?: unknown; error?: { message: string } };
  if (body.error) throw new Error(body.error.message);
  return body.result;
}

/** Sends a transaction as a wallet does (EIP-1193 `eth_sendTransaction`) and waits for its receipt. */
async function send(transaction: UnsignedTransaction, from: string): Promise<void> {
  const hash = (await rpc("eth_sendTransaction", [{ ...transaction, from }])) as string;
  const receipt = await until("the receipt", async () => ((await rpc("eth_getTransactionReceipt", [hash])) ?? undefined) as
    | { status: string }
    | undefined);
  assert.equal(receipt.status, "0x1");
}

before(async () => {
  const [port, chainPort] = [await freePort(), await freePort()];
  stateDir = mkdtempSync(join(tmpdir(), "bounty-client-ts-"));
  const env = { ...process.env };
  for (const name of ["DATABASE_URL", "REDIS_URL", "DEV_PORT", "DEV_CHAIN_PORT", "DEV_STATE_DIR"]) delete env[name];
  dev = spawn(join(REPOSITORY, "scripts/dev"), ["--port", String(port), "--chain-port", String(chainPort),
    "--state-dir", stateDir, "--fresh"], { cwd: REPOSITORY, env, detached: true, stdio: ["ignore", "pipe", "pipe"] });
  dev.stdout?.on("data", (chunk: Buffer) => (output += chunk.toString()));
  dev.stderr?.on("data", (chunk: Buffer) => (output += chunk.toString()));
  baseUrl = `http://127.0.0.1:${port}`;
  rpcUrl = `http://127.0.0.1:${chainPort}`;
  try {
    await until("the service", () => (output.includes(`dev: serving ${baseUrl}/`) ? true : undefined), 240);
    await until("the indexer to catch up", async () => {
      const health = (await (await fetch(`${baseUrl}/health`)).json()) as { status: string };
      return health.status === "ok" ? true : undefined;
    });
  } catch (error) {
    throw new Error(`${String(error)}\n${output}`);
  }
});

after(async () => {
  // scripts/dev stops its children and waits for them, and anvil writes its state file as it
  // stops: the state folder is removed once the script has exited (killed after 30 s).
  if (dev.pid !== undefined && dev.exitCode === null && dev.signalCode === null) {
    const group = -dev.pid;
    const exited = once(dev, "exit");
    process.kill(group, "SIGTERM");
    const hung = setTimeout(() => {
      try {
        process.kill(group, "SIGKILL");
      } catch {
        // it stopped just then
      }
    }, 30_000);
    await exited;
    clearTimeout(hung);
  }
  rmSync(stateDir, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 });
});

describe("the read client", () => {
  it("qualifies every request with the active deployment from /health", async () => {
    const urls: string[] = [];
    const client = createReadClient({ baseUrl, fetch: (url, init) => (urls.push(String(url)), fetch(url, init)) });
    const bounties = await client.listBounties();
    assert.ok(bounties.length >= 4, `the demo bounties: ${bounties.length}`);
    const { chainId, contractAddress } = await client.deployment();
    assert.deepEqual(urls, [`${baseUrl}/health`, `${baseUrl}/bounties?chain_id=${chainId}&contract_address=${contractAddress}`]);
    assert.ok(bounties.every((bounty) => bounty.chain_id === chainId && bounty.contract_address === contractAddress));

    const other = createReadClient({ baseUrl, deployment: { chainId, contractAddress: `0x${"00".repeat(20)}` } });
    assert.deepEqual(await other.listBounties(), []); // another deployment's records: none
  });

  it("reads single records, overviews and filtered lists", async () => {
    const client = createReadClient({ baseUrl });
    const [first] = await client.listBounties({ sort: "id", dir: "asc" });
    assert.ok(first);
    assert.deepEqual(await client.getBounty(first.id), first);
    const overview = await client.bountyOverview(first.id);
    assert.equal(overview.bounty.id, first.id);
    const submissions = await client.listSubmissions(first.id);
    assert.deepEqual(overview.submissions.map((s) => s.id).sort(), submissions.map((s) => s.id).sort());
    assert.ok(submissions.every((submission) => submission.bounty_id === first.id));
    const disputes = await client.listDisputes();
    assert.ok(disputes.length > 0);
    for (const dispute of disputes) {
      assert.ok((await client.listDisputes(dispute.submission_id)).some((d) => d.id === dispute.id));
      assert.ok((await client.listDisputes(null, { bountyId: dispute.bounty_id })).every((d) => d.bounty_id === dispute.bounty_id));
    }
    const page = await client.disputePage(null, { bountyId: disputes[0]?.bounty_id, limit: undefined });
    assert.equal(page.limit, 50);
  });

  it("pages with cursors and iterates every page lazily", async () => {
    const client = createReadClient({ baseUrl });
    const all = await client.listBounties();
    const page = await client.bountyPage({ limit: 2 });
    assert.equal(page.items.length, 2);
    assert.equal(page.total, all.length);
    assert.equal(page.next_cursor, "2");
    const iterated: Bounty[] = [];
    for await (const bounty of client.bounties({ pageSize: 2 })) iterated.push(bounty);
    assert.deepEqual(iterated.map((b) => b.id), all.map((b) => b.id));
    assert.ok(iterated.every((b) => typeof b.submission_count === "number"));
  });

  it("throws `request failed: <status>` with the status and the service's detail", async () => {
    const client = createReadClient({ baseUrl });
    await assert.rejects(client.getBounty(999_999), (error: unknown) => {
      assert.ok(error instanceof RequestError);
      assert.equal(error.message, "request failed: 404");
      assert.equal(error.status, 404);
      assert.equal(error.detail, "bounty 999999 not found");
      return true;
    });
  });
});

describe("transactions and the websocket", () => {
  it("a bounty built here and sent by a wallet arrives live, and again after a reconnect without a gap or a repeat", async () => {
    const client = createReadClient({ baseUrl });
    const builder = createTransactionBuilder(await client.deployment());
    const [, , , , , , , , poster] = (await rpc("eth_accounts", [])) as string[];
    assert.ok(poster);

    const sockets: WebSocket[] = [];
    const urls: string[] = [];
    class Recorded extends WebSocket {
      constructor(url: string) {
        super(url);
        urls.push(url);
        sockets.push(this);
      }
    }
    const snapshots: Snapshot[] = [];
    const events: LiveEvent[] = [];
    const watch = watchEvents(baseUrl, { onSnapshot: (s) => snapshots.push(s), onEvent: (e) => events.push(e) },
      { WebSocket: Recorded as unknown as WebSocketConstructor, reconnectDelayMs: 100 });
    try {
      const snapshot = await until("the snapshot", () => snapshots[0]);
      assert.deepEqual(snapshot.bounties.map((b) => b.id).sort(), (await client.listBounties()).map((b) => b.id).sort());
      assert.equal(watch.resumeFrom, snapshot.position);

      const post = async (title: string): Promise<Bounty> => {
        const metadata = { title, tags: ["typescript", "✍️"] };
        const quote = quoteCreateAmount("25000000");
        await send(builder.approveUsdc(quote.totalAmount), poster);
        await send(builder.createBounty({ metadataUri: metadataToDataUri(metadata), metadataHash: metadataHash(metadata),
          rewardAmount: quote.rewardAmount, duration: 86_400 }), poster);
        const created = await until(`${title} on the websocket`, () =>
          events.find((e): e is LiveEvent & { payload: Bounty } => e.type === "bounty.created" && e.payload.metadata_uri === metadataToDataUri(metadata)));
        assert.equal(created.payload.bounty_amount, "25000000");
        assert.equal(created.payload.fee_amount, quote.feeAmount.toString());
        assert.equal(created.payload.metadata_hash, metadataHash(metadata));
        assert.deepEqual(await client.getBounty(created.payload.id), created.payload);
        return created.payload;
      };

      const first = await post("Live, first connection");
      sockets[0]?.terminate(); // the connection drops
      const resumeFrom = watch.resumeFrom;
      assert.equal(resumeFrom, events.at(-1)?.position, "the position of the last message applied");
      const second = await post("Live, after the reconnect");
      await until("the reconnect", () => (sockets.length === 2 ? true : undefined));
      assert.equal(second.id, first.id + 1);
      assert.equal(urls[1], `${urls[0]}?since=${encodeURIComponent(resumeFrom ?? "")}`);
      assert.equal(snapshots.length, 1, "a resume sends no snapshot");
      const seqs = events.map((e) => e.seq);
      assert.deepEqual(seqs, seqs.map((_, i) => snapshot.seq + 1 + i), "every seq once, in order");
    } finally {
      watch.close();
    }
  });
});
