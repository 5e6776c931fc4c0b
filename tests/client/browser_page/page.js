// The page of tests/client/test_typescript_in_a_browser.py: it imports the library's browser
// bundle (npm run bundle) as an ES module from its own origin, and reads the service and sends to
// the dev chain on other origins. Each step is a function of `window.bountyPage` that the test
// calls; what the websocket delivered piles up in `window.watched` for the test to look at.
import {
  connectWallet, createReadClient, createTransactionBuilder, metadataHash, metadataToDataUri, quoteCreateAmount,
  RequestError, WalletError, watchEvents,
} from "./bounty-client.js";

/**
 * An injected EIP-1193 wallet, as `window.ethereum`: the dev chain's unlocked account number
 * `accountIndex` behind it, every request forwarded to the chain's JSON-RPC (anvil answers CORS).
 * `calls` lists the methods the page asked for.
 */
function devChainWallet(rpcUrl, accountIndex) {
  const calls = [];
  const rpc = async (method, params = []) => {
    const response = await fetch(rpcUrl, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: calls.length, method, params }),
    });
    const body = await response.json();
    if (body.error) throw body.error; // {code, message}: already an EIP-1193 error
    return body.result;
  };
  return {
    calls,
    async request({ method, params }) {
      calls.push(method);
      if (method === "eth_requestAccounts") return [(await rpc("eth_accounts"))[accountIndex]];
      if (["eth_chainId", "eth_sendTransaction", "eth_getTransactionReceipt"].includes(method)) return rpc(method, params);
      throw { code: 4200, message: `this wallet does not support ${method}` };
    },
  };
}

/** The read client's qualified reads, its pages (cursors walked by hand and by the iterator) and a 404. */
async function readTheService(api) {
  const urls = [];
  const client = createReadClient({ baseUrl: api, fetch: (url, init) => (urls.push(String(url)), fetch(url, init)) });
  const deployment = await client.deployment();
  const listed = await client.listBounties({ sort: "id", dir: "asc" });
  const walked = [];
  const cursors = [];
  let cursor = null;
  do {
    const page = await client.bountyPage({ limit: 2, sort: "id", dir: "asc", cursor });
    walked.push(...page.items.map((bounty) => bounty.id));
    cursor = page.next_cursor;
    cursors.push(cursor);
  } while (cursor != null);
  const iterated = [];
  for await (const bounty of client.bounties({ pageSize: 2, sort: "id", dir: "asc" })) iterated.push(bounty.id);
  let missing = null;
  try {
    await client.getBounty(999_999);
  } catch (error) {
    missing = { isRequestError: error instanceof RequestError, name: error.name, message: error.message,
      status: error.status, detail: error.detail };
  }
  const deployments = listed.map((bounty) => ({ chainId: bounty.chain_id, contractAddress: bounty.contract_address }));
  return { origin: location.origin, deployment, urls, listed: listed.map((bounty) => bounty.id), deployments, walked,
    cursors, iterated, missing };
}

window.watched = { snapshots: [], events: [], urls: [], disconnects: [], errors: [] };
let online = true;
let socket = null;

/**
 * A WebSocket constructor for watchEvents that records every address it is asked for, and while
 * the page is "offline" gives a socket that fails at once (as one does with the network down),
 * so that the service publishes what the page then misses.
 */
function GatedWebSocket(url) {
  window.watched.urls.push(url);
  if (online) {
    socket = new WebSocket(url);
    return socket;
  }
  const failing = { onopen: null, onmessage: null, onclose: null, onerror: null, close() {} };
  setTimeout(() => failing.onclose?.({ code: 1006 }));
  return failing;
}

function startWatching(api) {
  const { watched } = window;
  watchEvents(api, {
    onSnapshot: (snapshot) => watched.snapshots.push({ seq: snapshot.seq, bounties: snapshot.bounties.map((b) => b.id) }),
    onEvent: (event) => watched.events.push(event),
    onDisconnect: (code) => watched.disconnects.push(code),
    onError: (error) => watched.errors.push(String(error)),
  }, { WebSocket: GatedWebSocket, reconnectDelayMs: 200 });
}

/** The page goes offline: the open connection is closed from the page, and every new one fails. */
function dropTheConnection() {
  online = false;
  socket.close();
}

function comeBackOnline() {
  online = true;
}

/** Posts a bounty as a front end does: metadata, quote, approval, createBounty, all through the wallet. */
async function postBounty(api, title) {
  const client = createReadClient({ baseUrl: api });
  const deployment = await client.deployment();
  const builder = createTransactionBuilder(deployment);
  const wallet = await connectWallet(window.ethereum, { chainId: deployment.chainId, pollMs: 100 });
  const metadata = { title, tags: ["browser", "✍️"] };
  const quote = quoteCreateAmount(25_000_000n);
  const approval = await wallet.send(builder.approveUsdc(quote.totalAmount));
  const receipt = await wallet.send(builder.createBounty({
    metadataUri: metadataToDataUri(metadata),
    metadataHash: metadataHash(metadata),
    rewardAmount: quote.rewardAmount,
    duration: 86_400,
  }));
  return { account: wallet.account, metadataUri: metadataToDataUri(metadata), metadataHash: metadataHash(metadata),
    feeAmount: String(quote.feeAmount), approval: approval.status, status: receipt.status, txHash: receipt.transactionHash };
}

/** The bounty as the read client gives it: found by its transaction in the list, then read alone. */
async function bountyOfTransaction(api, txHash) {
  const client = createReadClient({ baseUrl: api });
  const listed = (await client.listBounties({ sort: "id", dir: "desc" })).find((bounty) => bounty.tx_hash === txHash);
  return listed === undefined ? null : client.getBounty(listed.id);
}

/** What connectWallet and send throw for a wallet whose user says no, and for a wallet on another chain. */
async function walletErrors(api, rpcUrl) {
  const deployment = await createReadClient({ baseUrl: api }).deployment();
  const builder = createTransactionBuilder(deployment);
  const wallet = devChainWallet(rpcUrl, 8);
  const refusing = {
    request: (args) => (args.method === "eth_sendTransaction" ? Promise.reject({ code: 4001, message: "User rejected" }) : wallet.request(args)),
  };
  const elsewhere = { request: (args) => (args.method === "eth_chainId" ? Promise.resolve("0x1") : wallet.request(args)) };
  const failure = async (attempt) => {
    try {
      await attempt();
      return null;
    } catch (error) {
      return { isWalletError: error instanceof WalletError, name: error.name, reason: error.reason, message: error.message,
        code: error.code ?? null };
    }
  };
  return {
    rejected: await failure(async () => (await connectWallet(refusing, { chainId: deployment.chainId })).send(builder.approveUsdc(1n))),
    wrongChain: await failure(() => connectWallet(elsewhere, { chainId: deployment.chainId })),
    calls: wallet.calls,
  };
}

function installWallet(rpcUrl, accountIndex) {
  window.ethereum = devChainWallet(rpcUrl, accountIndex);
}

window.bountyPage = {
  readTheService, startWatching, dropTheConnection, comeBackOnline, postBounty, bountyOfTransaction, walletErrors, installWallet,
};
