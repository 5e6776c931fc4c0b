/** The board's records as DOM: a bounty's row in the list and its overview. */
import type { Bounty, BountyOverview, Dispute, Submission } from "bounty-client";

import { h } from "./dom.js";
import { describe, duration, fromNow, isPast, shortAddress, usdc } from "./format.js";

const STATUS_LABELS: Record<string, string> = {
  open: "Open",
  resolved: "Resolved",
  refunded: "Refunded",
  submitted: "In review",
  disputed: "Disputed",
  accepted: "Accepted",
  rejected: "Rejected",
  pending_human_review: "Awaiting moderator",
  upheld: "Upheld",
  cancelled: "Cancelled",
};

export function statusPill(status: string): HTMLElement {
  return h("span", { class: `pill pill-${status}` }, STATUS_LABELS[status] ?? status);
}

export function bountyTitle(bounty: Bounty): string {
  return describe(bounty.metadata_uri).title ?? `Bounty #${bounty.id}`;
}

function deadline(bounty: Bounty): string {
  if (bounty.status !== "open") return `posted ${fromNow(bounty.created_at)}`;
  return isPast(bounty.deadline) ? `closed ${fromNow(bounty.deadline)}` : `closes ${fromNow(bounty.deadline)}`;
}

function plural(count: number, noun: string): string {
  return `${count} ${noun}${count === 1 ? "" : "s"}`;
}

/** A bounty in the list: a link to its overview; `highlightedFor` ms into its arrival's highlight, if new. */
export function bountyRow(bounty: Bounty, submissionCount: number, selected: boolean,
  highlightedFor: number | null): HTMLElement {
  const row = h("li", { class: highlightedFor === null ? null : "fresh" },
    h("a", { class: "bounty", href: `#/bounty/${bounty.id}`, "aria-current": selected ? "page" : null,
      "data-bounty-id": bounty.id },
      h("span", { class: "bounty-title" }, bountyTitle(bounty)),
      h("span", { class: "bounty-reward" }, usdc(bounty.bounty_amount)),
      h("span", { class: "bounty-meta" },
        statusPill(bounty.status),
        h("span", {}, plural(submissionCount, "submission")),
        h("span", {}, deadline(bounty)))));
  if (highlightedFor !== null) row.style.setProperty("--arrived", `-${highlightedFor}ms`);
  return row;
}

function fact(label: string, ...value: (Node | string)[]): HTMLElement[] {
  return [h("dt", {}, label), h("dd", {}, ...value)];
}

function address(value: string): HTMLElement {
  return h("code", { title: value }, shortAddress(value));
}

function disputeItem(dispute: Dispute): HTMLElement {
  const { text } = describe(dispute.metadata_uri);
  return h("li", { class: "dispute" },
    h("div", { class: "record-head" },
      h("strong", {}, `Dispute #${dispute.id}`), statusPill(dispute.status),
      h("span", { class: "muted" }, "by ", address(dispute.challenger_id), ` · ${fromNow(dispute.created_at)}`)),
    text ? h("p", {}, text) : null);
}

function submissionItem(submission: Submission, disputes: Dispute[]): HTMLElement {
  const { text, link } = describe(submission.metadata_uri);
  const reviewing = submission.status === "submitted" && !isPast(submission.review_deadline);
  return h("li", { class: "submission", "data-submission-id": submission.id },
    h("div", { class: "record-head" },
      h("strong", {}, `#${submission.id}`), statusPill(submission.status),
      h("span", { class: "muted" }, "by ", address(submission.claimant), ` · ${fromNow(submission.created_at)}`)),
    text ? h("p", {}, text) : null,
    link ? h("p", {}, h("a", { href: link, rel: "noopener noreferrer nofollow", target: "_blank" }, link)) : null,
    reviewing ? h("p", { class: "muted small" }, `Its review window closes ${fromNow(submission.review_deadline)}`) : null,
    disputes.length ? h("ul", { class: "disputes" }, ...disputes.map(disputeItem)) : null);
}

/** A bounty's page: what it offers, and its submissions with their disputes. */
export function overviewView({ bounty, submissions, disputes }: BountyOverview, serviceUrl: string): HTMLElement {
  const { title, text } = describe(bounty.metadata_uri);
  const closes = bounty.status === "open" && !isPast(bounty.deadline);
  return h("article", { class: "card overview", "data-bounty-id": bounty.id },
    h("div", { class: "overview-head" },
      h("p", { class: "eyebrow" }, `Bounty #${bounty.id}`, statusPill(bounty.status)),
      h("h2", {}, title ?? `Bounty #${bounty.id}`),
      text ? h("p", { class: "description" }, text) : null),
    h("dl", { class: "facts" },
      ...fact("Reward", h("strong", {}, usdc(bounty.bounty_amount))),
      ...fact("Submission bond", usdc(bounty.bond_amount)),
      ...fact(closes ? "Closes" : "Deadline", h("time", { datetime: bounty.deadline,
        title: new Date(bounty.deadline).toLocaleString() }, fromNow(bounty.deadline))),
      ...fact("Review window", duration(bounty.challenge_window)),
      ...fact("Posted by", address(bounty.poster), ` · ${fromNow(bounty.created_at)}`)),
    h("section", { class: "submissions" },
      h("h3", {}, `Submissions `, h("span", { class: "count" }, submissions.length)),
      submissions.length
        ? h("ul", { class: "records" }, ...submissions.map((submission) =>
            submissionItem(submission, disputes.filter((dispute) => dispute.submission_id === submission.id))))
        : h("p", { class: "muted" }, "No submissions yet.")),
    h("p", { class: "small muted raw" },
      h("a", { href: `${serviceUrl}/bounties/${bounty.id}/overview`, target: "_blank" }, "This overview in the API")));
}
