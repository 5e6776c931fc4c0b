/**
 * Posting a bounty and submitting work through the user's wallet. Each form shows what the wallet
 * will be asked to approve before anything is sent (the quote: reward, post fee and total; or the
 * bond), then runs the steps: approve that exact amount of USDC, send the contract call, and wait
 * until the websocket brings the new record.
 */
import {
  type Bounty,
  type CreateQuote,
  metadataHash,
  metadataToDataUri,
  quoteCreateAmount,
  type Submission,
  type TransactionBuilder,
  type Wallet,
} from "bounty-client";

import { h, show } from "./dom.js";
import { parseUsdc, usdc } from "./format.js";
import { runSteps } from "./steps.js";

/** What the forms need from the page. */
export interface Flows {
  builder: TransactionBuilder;
  /** The connected wallet, asked for first if need be. */
  wallet(): Promise<Wallet>;
  /** The record a transaction created, once the service has indexed it. */
  indexedBounty(txHash: string): Promise<Bounty>;
  indexedSubmission(txHash: string): Promise<Submission>;
}

const DURATIONS: [string, number][] = [["1 day", 1], ["3 days", 3], ["1 week", 7], ["2 weeks", 14], ["30 days", 30]];
const DAY = 86_400;

function field(label: string, control: HTMLElement, hint?: string): HTMLElement {
  return h("label", { class: "field" }, h("span", { class: "field-label" }, label), control,
    hint ? h("span", { class: "field-hint" }, hint) : null);
}

function amounts(...rows: [string, string, boolean?][]): HTMLElement {
  return h("dl", { class: "amounts" }, ...rows.flatMap(([label, value, total]) =>
    [h("dt", { class: total ? "total" : null }, label), h("dd", { class: total ? "total" : null }, value)]));
}

/** The parts every form has: its fields in a fieldset that is disabled while the steps run. */
function formShell(className: string, heading: HTMLElement, fields: HTMLElement[], button: HTMLButtonElement) {
  const problem = h("p", { class: "alert", role: "alert", hidden: true });
  const progress = h("div", { class: "progress" });
  const fieldset = h("fieldset", {}, ...fields, problem, button);
  const form = h("form", { class: `card form ${className}`, novalidate: true }, heading, fieldset, progress);
  return {
    form, progress,
    /** Shows a problem with what was typed; null hides it. */
    problem(message: string | null): void {
      problem.textContent = message ?? "";
      problem.hidden = message === null;
    },
    busy(on: boolean): void {
      fieldset.disabled = on;
    },
  };
}

export function postForm(flows: Flows): HTMLElement {
  const title = h("input", { name: "title", required: true, maxlength: 120, autocomplete: "off",
    placeholder: "Port the parser to Rust" });
  const description = h("textarea", { name: "description", rows: 4,
    placeholder: "What needs doing, and how the work will be judged" });
  const reward = h("input", { name: "reward", inputmode: "decimal", autocomplete: "off", value: "100" });
  const days = h("select", { name: "duration" },
    ...DURATIONS.map(([label, count]) => h("option", { value: count, selected: count === 7 }, label)));
  const quoteBox = h("div", { class: "quote", id: "quote", "aria-live": "polite" });
  const button = h("button", { class: "button primary wide", type: "submit" });
  const shell = formShell("post-form", h("div", {},
    h("h2", {}, "Post a bounty"),
    h("p", { class: "muted" }, "The contract holds the reward until a submission is accepted; "
      + "if none is by the deadline, it goes back to you.")), [
    field("Title", title),
    field("Description", description),
    h("div", { class: "field-row" },
      field("Reward", h("div", { class: "with-unit" }, reward, h("span", {}, "USDC"))),
      field("Open for", days)),
    quoteBox,
  ], button);

  const quote = (): CreateQuote | null => {
    const amount = parseUsdc(reward.value);
    return amount !== null && amount > 0n ? quoteCreateAmount(amount) : null;
  };
  const update = (): void => {
    const q = quote();
    if (q === null) {
      show(quoteBox, h("p", { class: "muted" }, "Enter the reward in USDC, such as 100 or 25.50."));
      button.textContent = "Post the bounty";
      return;
    }
    show(quoteBox,
      amounts(["Reward", usdc(q.rewardAmount)], ["Post fee", usdc(q.feeAmount)],
        ["Total to approve", usdc(q.totalAmount), true]),
      h("p", { class: "muted small" }, `Each submission will post a bond of ${usdc(q.bondAmount)}.`));
    button.textContent = `Approve ${usdc(q.totalAmount)} and post`;
  };
  reward.addEventListener("input", update);
  update();

  shell.form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const q = quote();
    const name = title.value.trim();
    shell.problem(!name ? "Give the bounty a title." : q === null ? "Enter the reward in USDC, such as 100 or 25.50." : null);
    if (!name || q === null) return;
    const metadata = { title: name, ...(description.value.trim() ? { description: description.value.trim() } : {}) };
    let txHash = "";
    const result: { bounty?: Bounty } = {};
    shell.busy(true);
    const done = await runSteps(shell.progress, [
      {
        label: `Approve ${usdc(q.totalAmount)}`,
        doing: "confirm in your wallet…",
        run: async () => {
          await (await flows.wallet()).send(flows.builder.approveUsdc(q.totalAmount));
          return "approved";
        },
      },
      {
        label: "Post the bounty",
        doing: "confirm in your wallet…",
        run: async () => {
          const receipt = await (await flows.wallet()).send(flows.builder.createBounty({
            metadataUri: metadataToDataUri(metadata), metadataHash: metadataHash(metadata),
            rewardAmount: q.rewardAmount, duration: Number(days.value) * DAY,
          }));
          txHash = receipt.transactionHash;
          return `in block ${Number(receipt.blockNumber)}`;
        },
      },
      {
        label: "Listed on the board",
        doing: "waiting for the service to index it…",
        run: async () => {
          result.bounty = await flows.indexedBounty(txHash);
          return `bounty #${result.bounty.id}`;
        },
      },
    ]);
    shell.busy(false);
    if (done && result.bounty) {
      const { id } = result.bounty;
      shell.form.replaceWith(h("div", { class: "card success", role: "status" },
        h("h2", {}, `Bounty #${id} is live`),
        h("p", {}, `“${name}” is on the board with a reward of ${usdc(q.rewardAmount)}.`),
        h("div", { class: "actions" },
          h("a", { class: "button primary", href: `#/bounty/${id}` }, "Open it"),
          h("a", { class: "button", href: "#/" }, "Back to the board"))));
    }
  });
  return shell.form;
}

export function submitForm(flows: Flows, bounty: Bounty): HTMLElement {
  const summary = h("textarea", { name: "summary", rows: 3, required: true,
    placeholder: "What you did, and where the reviewer can check it" });
  const link = h("input", { name: "link", type: "url", autocomplete: "off", placeholder: "https://" });
  const bond = BigInt(bounty.bond_amount);
  const button = h("button", { class: "button primary wide", type: "submit" }, `Approve ${usdc(bond)} and submit`);
  const shell = formShell("submit-form", h("h3", {}, "Submit your work"), [
    field("Summary", summary),
    field("Link", link, "Optional: a pull request, a document, a demo"),
    h("div", { class: "quote" },
      amounts(["Submission bond", usdc(bond), true]),
      h("p", { class: "muted small" }, "You get the bond back with the reward if your work is accepted, or when the "
        + "bounty closes; a dispute that a moderator upholds forfeits it.")),
  ], button);

  shell.form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const text = summary.value.trim();
    const url = link.value.trim();
    shell.problem(!text ? "Say what you did." : url && !/^https?:\/\/\S+$/i.test(url)
      ? "The link must start with http:// or https://." : null);
    if (!text || (url && !/^https?:\/\/\S+$/i.test(url))) return;
    const metadata = { bounty_id: bounty.id, summary: text, ...(url ? { link: url } : {}) };
    let txHash = "";
    shell.busy(true);
    const done = await runSteps(shell.progress, [
      {
        label: `Approve the ${usdc(bond)} bond`,
        doing: "confirm in your wallet…",
        run: async () => {
          await (await flows.wallet()).send(flows.builder.approveUsdc(bond));
          return "approved";
        },
      },
      {
        label: "Submit",
        doing: "confirm in your wallet…",
        run: async () => {
          const receipt = await (await flows.wallet()).send(flows.builder.submit({
            bountyId: bounty.id, metadataUri: metadataToDataUri(metadata), metadataHash: metadataHash(metadata),
          }));
          txHash = receipt.transactionHash;
          return `in block ${Number(receipt.blockNumber)}`;
        },
      },
      {
        label: "Listed on the bounty",
        doing: "waiting for the service to index it…",
        run: async () => {
          return `submission #${(await flows.indexedSubmission(txHash)).id}`;
        },
      },
    ]);
    shell.busy(false);
    if (done) {
      summary.value = "";
      link.value = "";
    }
  });
  return shell.form;
}
