/**
 * The bounty board: an example front end on bounty-client, in plain TypeScript and DOM.
 *
 * - The list is the active deployment's bounties as the websocket gives them (`watchEvents`):
 *   its snapshot, then every change as the service indexes it, resumed after a dropped
 *   connection; a `resync` brings a new snapshot, which replaces everything held.
 * - A bounty's page is its overview from the read API (`bountyOverview`), read again whenever
 *   the websocket says the bounty, its submissions or its disputes changed.
 * - Posting a bounty and submitting work go through the user's wallet (`window.ethereum`,
 *   EIP-1193) with `connectWallet` (see forms.ts).
 *
 * Pages are addressed by the URL's fragment: `#/` the board, `#/bounty/3` a bounty, `#/post`.
 */
import {
  type ActiveDeployment,
  type Bounty,
  connectWallet,
  createReadClient,
  createTransactionBuilder,
  type Eip1193Provider,
  type LiveEvent,
  RequestError,
  type Snapshot,
  type Submission,
  type Wallet,
  watchEvents,
  type WebSocketLike,
} from "bounty-client";

import { type Child, h, show } from "./dom.js";
import { type Flows, postForm, submitForm } from "./forms.js";
import { isPast, shortAddress } from "./format.js";
import { explain, NoWalletError } from "./steps.js";
import { bountyRow, overviewView } from "./views.js";

/** The read service: the page's `<meta name="bounty-service">`, or the server that serves the page. */
const SERVICE_URL = document.querySelector<HTMLMetaElement>('meta[name="bounty-service"]')?.content
  || location.origin;
const client = createReadClient({ baseUrl: SERVICE_URL });

function element(id: string): HTMLElement {
  const found = document.getElementById(id);
  if (found === null) throw new Error(`index.html has no #${id}`);
  return found;
}

const page = {
  network: element("network"),
  wallet: element("wallet") as HTMLButtonElement,
  notice: element("notice"),
  count: element("bounty-count"),
  connection: element("connection"),
  list: element("bounty-list"),
  detail: element("detail"),
};

// ---------------------------------------------------------------- the records, from the websocket

const bounties = new Map<number, Bounty>();
const submissions = new Map<number, Submission>(); // to count each bounty's
let snapshotReceived = false;
/** Bounties created since the page opened, by the time they arrived: highlighted for a moment. */
const fresh = new Map<number, number>();
const HIGHLIGHT_MS = 4000;
/** Checks run after every change: each resolves a promise waiting for a record, and is then dropped. */
const waiting = new Set<() => boolean>();

/** Resolves with what `find` finds, now or after a later change. */
function whenFound<T>(find: () => T | undefined): Promise<T> {
  return new Promise((resolve) => {
    const check = (): boolean => {
      const found = find();
      if (found !== undefined) resolve(found);
      return found !== undefined;
    };
    if (!check()) waiting.add(check);
  });
}

function byTransaction<T extends { tx_hash: string }>(records: Map<number, T>, txHash: string): T | undefined {
  return [...records.values()].find((record) => record.tx_hash.toLowerCase() === txHash.toLowerCase());
}

function applySnapshot(snapshot: Snapshot): void {
  bounties.clear();
  submissions.clear();
  for (const bounty of snapshot.bounties) bounties.set(bounty.id, bounty);
  for (const submission of snapshot.submissions) submissions.set(submission.id, submission);
  snapshotReceived = true;
  changed(null);
}

function applyEvent(event: LiveEvent): void {
  const removed = event.type.endsWith(".removed");
  if (event.type.startsWith("bounty.")) {
    const bounty = event.payload as Bounty;
    if (removed) bounties.delete(bounty.id);
    else bounties.set(bounty.id, bounty);
    if (event.type === "bounty.created") {
      fresh.set(bounty.id, Date.now());
      setTimeout(() => fresh.delete(bounty.id), HIGHLIGHT_MS);
    }
  } else if (event.type.startsWith("submission.")) {
    const submission = event.payload as Submission;
    if (removed) submissions.delete(submission.id);
    else submissions.set(submission.id, submission);
  }
  changed(event);
}

/** After a snapshot (`event` null) or a live change: the list, the open bounty, the waiting flows. */
function changed(event: LiveEvent | null): void {
  renderList();
  if (opened !== null) {
    const id = opened.id;
    const touched = event === null
      || ("bounty_id" in event.payload ? event.payload.bounty_id === id : event.payload.id === id);
    if (touched) void readOverview();
  }
  for (const check of waiting) if (check()) waiting.delete(check);
}

/** The browser's WebSocket, telling the page when a connection opens (the library's handlers say when one drops). */
class ObservedWebSocket implements WebSocketLike {
  onopen: WebSocketLike["onopen"] = null;
  onmessage: WebSocketLike["onmessage"] = null;
  onclose: WebSocketLike["onclose"] = null;
  onerror: WebSocketLike["onerror"] = null;
  readonly #socket: WebSocket;

  constructor(url: string) {
    this.#socket = new WebSocket(url);
    this.#socket.onopen = (event) => {
      setConnection("live");
      this.onopen?.(event);
    };
    this.#socket.onmessage = (event) => this.onmessage?.(event);
    this.#socket.onclose = (event) => this.onclose?.(event);
    this.#socket.onerror = (event) => this.onerror?.(event);
  }

  close(code?: number): void {
    this.#socket.close(code);
  }
}

function setConnection(state: "live" | "reconnecting"): void {
  page.connection.dataset.state = state;
  page.connection.textContent = state === "live" ? "Live" : "Reconnecting…";
}

// ---------------------------------------------------------------- pages

type Route = { view: "board" } | { view: "post" } | { view: "bounty"; id: number };

function route(): Route {
  const bounty = /^#\/bounty\/(\d+)$/.exec(location.hash);
  if (bounty) return { view: "bounty", id: Number(bounty[1]) };
  return location.hash === "#/post" ? { view: "post" } : { view: "board" };
}

function renderList(): void {
  if (!snapshotReceived) {
    show(page.list, h("li", { class: "empty" }, "Loading bounties…"));
    return;
  }
  const counts = new Map<number, number>();
  for (const { bounty_id } of submissions.values()) counts.set(bounty_id, (counts.get(bounty_id) ?? 0) + 1);
  const current = route();
  const selected = current.view === "bounty" ? current.id : null;
  const rows = [...bounties.values()].sort((a, b) => b.id - a.id);
  page.count.textContent = String(rows.length);
  show(page.list, ...(rows.length
    ? rows.map((bounty) => {
        const arrived = fresh.get(bounty.id);
        // A row made again goes on with its highlight rather than starting it over.
        const highlight = arrived === undefined ? null : Date.now() - arrived;
        return bountyRow(bounty, counts.get(bounty.id) ?? 0, bounty.id === selected, highlight);
      })
    : [h("li", { class: "empty" }, "No bounties yet: post the first one.")]));
}

/** The bounty page on show: its overview is read again on changes, its form made once. */
let opened: { id: number; overview: HTMLElement; form: HTMLElement; reads: number; formMade: boolean } | null = null;

async function readOverview(): Promise<void> {
  const current = opened;
  if (current === null) return;
  const read = ++current.reads;
  const stale = (): boolean => opened !== current || read !== current.reads; // another page, or a newer read
  try {
    const overview = await client.bountyOverview(current.id);
    if (stale()) return;
    show(current.overview, overviewView(overview, SERVICE_URL));
    if (!current.formMade) {
      current.formMade = true;
      show(current.form, submitSection(overview.bounty));
    }
  } catch (error) {
    if (stale()) return;
    show(current.overview, h("div", { class: "card" }, h("p", { class: "alert", role: "alert" },
      error instanceof RequestError && error.status === 404
        ? `There is no bounty #${current.id} in this deployment.`
        : `The bounty could not be read: ${explain(error)}`)));
  }
}

function submitSection(bounty: Bounty): Child {
  if (bounty.status !== "open") return h("p", { class: "card note" }, `This bounty is ${bounty.status}: it takes no more submissions.`);
  if (isPast(bounty.deadline)) return h("p", { class: "card note" }, "This bounty's deadline has passed: it takes no more submissions.");
  return submitForm(flows, bounty);
}

function backLink(): HTMLElement {
  return h("a", { class: "back", href: "#/" }, "← All bounties");
}

function welcome(): HTMLElement {
  return h("div", { class: "card welcome" },
    h("h2", {}, "Pick a bounty"),
    h("p", { class: "muted" }, "Open a bounty to see its submissions and disputes, and to submit your work. "
      + "The list stays current by itself: new bounties appear as soon as the service indexes them."),
    h("a", { class: "button primary", href: "#/post" }, "Post a bounty"));
}

function openRoute(): void {
  const current = route();
  document.body.dataset.view = current.view;
  opened = null;
  if (current.view === "bounty") {
    opened = { id: current.id, overview: h("div", {}, h("div", { class: "card muted" }, "Loading…")),
      form: h("div"), reads: 0, formMade: false };
    show(page.detail, backLink(), opened.overview, opened.form);
    void readOverview();
  } else if (current.view === "post") {
    show(page.detail, backLink(), postForm(flows));
  } else {
    show(page.detail, welcome());
  }
  renderList();
  if (current.view !== "board" && matchMedia("(max-width: 759px)").matches) window.scrollTo(0, 0);
}

// ---------------------------------------------------------------- the wallet

let deployment: ActiveDeployment;
let wallet: Wallet | null = null;

/** The browser wallet's EIP-1193 provider; most wallets also tell when the user switches account or network. */
type InjectedProvider = Eip1193Provider & { on?(event: string, listener: () => void): void };

function injected(): InjectedProvider | undefined {
  return (window as { ethereum?: InjectedProvider }).ethereum;
}

async function connectedWallet(): Promise<Wallet> {
  notify(null); // an earlier attempt's error: this one's is shown where it was made
  const provider = injected();
  if (provider === undefined) throw new NoWalletError("no window.ethereum");
  wallet ??= await connectWallet(provider, { chainId: deployment.chainId });
  renderWallet();
  return wallet;
}

/** The user switched account or network: the wallet is asked again at the next send. */
function forgetWallet(): void {
  wallet = null;
  renderWallet();
}

function renderWallet(): void {
  page.wallet.textContent = wallet ? shortAddress(wallet.account) : "Connect wallet";
  page.wallet.title = wallet ? wallet.account : "";
  page.wallet.classList.toggle("connected", wallet !== null);
}

function notify(message: string | null): void {
  page.notice.textContent = message ?? "";
  page.notice.hidden = message === null;
}

page.wallet.addEventListener("click", async () => {
  try {
    await connectedWallet();
  } catch (error) {
    notify(explain(error));
  }
});

/** What the forms need, once the deployment is known. */
let flows: Flows;

// ---------------------------------------------------------------- start

async function start(): Promise<void> {
  renderList();
  try {
    deployment = await client.deployment();
  } catch (error) {
    show(page.list, h("li", { class: "empty" }, "The board is not available."));
    notify(`The service at ${SERVICE_URL} could not be read: ${explain(error)}`);
    return;
  }
  flows = {
    builder: createTransactionBuilder(deployment),
    wallet: connectedWallet,
    indexedBounty: (txHash) => whenFound(() => byTransaction(bounties, txHash)),
    indexedSubmission: (txHash) => whenFound(() => byTransaction(submissions, txHash)),
  };
  page.wallet.disabled = false;
  page.network.textContent = `Chain ${deployment.chainId} · ${shortAddress(deployment.contractAddress)}`;
  page.network.title = `contract ${deployment.contractAddress}, USDC ${deployment.usdcAddress}`;
  injected()?.on?.("accountsChanged", forgetWallet);
  injected()?.on?.("chainChanged", forgetWallet);
  watchEvents(SERVICE_URL, {
    onSnapshot: applySnapshot,
    onEvent: applyEvent,
    onDisconnect: () => setConnection("reconnecting"),
    onError: (error) => console.error("bounty board:", error),
  }, { WebSocket: ObservedWebSocket });
  addEventListener("hashchange", openRoute);
  openRoute();
}

void start();
