/** A wallet flow shown step by step (approve, then the call, then the record indexed), and its errors in words. */
import { RequestError, WalletError } from "bounty-client";

import { h, show } from "./dom.js";

export interface Step {
  label: string;
  /** Said while the step runs. */
  doing: string;
  /** Resolves with what to say once done ("in block 57"). */
  run(): Promise<string>;
}

/** No `window.ethereum`: the browser has no wallet. */
export class NoWalletError extends Error {
  override name = "NoWalletError";
}

/** What went wrong, for the person in front of the page. */
export function explain(error: unknown): string {
  if (error instanceof NoWalletError) {
    return "No wallet found. Install a browser wallet (an EIP-1193 one such as MetaMask) to post bounties and submit work.";
  }
  if (error instanceof WalletError) {
    switch (error.reason) {
      case "rejected":
        return "You rejected the request in your wallet, so nothing was sent.";
      case "wrong-chain":
        return `Wrong network: ${error.message}.`;
      case "no-account":
        return "Your wallet shared no account. Unlock it, allow this page, and try again.";
      case "reverted":
        return "The contract refused the transaction (it reverted): check your USDC balance and try again.";
      default:
        return `Your wallet reported an error: ${error.message}`;
    }
  }
  if (error instanceof RequestError) return `The service answered ${error.status}${error.detail ? `: ${error.detail}` : ""}.`;
  return error instanceof Error ? error.message : String(error);
}

/**
 * Runs the steps in order, showing each one's state in `container`. Resolves true when all are
 * done, false when one failed: its error is then shown, and the form can be sent again.
 */
export async function runSteps(container: HTMLElement, steps: Step[]): Promise<boolean> {
  const states = steps.map(() => h("span", { class: "step-state" }, "waiting"));
  const items = steps.map((step, index) =>
    h("li", { class: "step" }, h("span", { class: "step-label" }, step.label), states[index]));
  const alert = h("p", { class: "alert", role: "alert", hidden: true });
  show(container, h("ol", { class: "steps" }, ...items), alert);
  for (const [index, step] of steps.entries()) {
    const [item, state] = [items[index], states[index]];
    if (item === undefined || state === undefined) continue;
    item.className = "step active";
    state.textContent = step.doing;
    try {
      state.textContent = await step.run();
    } catch (error) {
      item.className = "step failed";
      state.textContent = "failed";
      alert.textContent = explain(error);
      alert.hidden = false;
      return false;
    }
    item.className = "step done";
  }
  return true;
}
