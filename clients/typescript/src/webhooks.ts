/**
 * Webhooks: verifying a delivery of the read service and reading its envelope (docs/api.md,
 * Webhooks).
 *
 * The service POSTs every change to the endpoints registered in its admin, in the Standard
 * Webhooks format (standardwebhooks.com): the body is the websocket's live message (`type`,
 * `payload`, `seq`, `position`), signed in the `webhook-signature` header with the endpoint's
 * secret. `verifyWebhook` checks the signature and the timestamp with the Standard Webhooks library
 * (the `standardwebhooks` package), then reads the envelope. The Python client's `verify_webhook`
 * does the same, with the same messages.
 *
 * The envelopes' types are those of the service's OpenAPI schema (its `webhooks`, generated into
 * `./generated/openapi.ts`): one per `type`, so a `switch (event.type)` narrows `payload`.
 */
import { Webhook, WebhookVerificationError as Refused } from "standardwebhooks";

import type { components, webhooks } from "./generated/openapi.js";
import { ResponseError } from "./read.js";

type Schemas = components["schemas"];

/** Every type of delivery: the websocket's live types, `resync`, and the admin's `webhook.test`. */
export type WebhookType = keyof webhooks;

/** The body of a delivery of `type` T (of any type by default), as JSON. */
export type WebhookBody<T extends WebhookType = WebhookType> = {
  [K in T]: webhooks[K]["post"]["requestBody"]["content"]["application/json"];
}[T];

/** `resync` after a bulk backfill of blocks `from_block` to `to_block`. */
export type ResyncAfterBackfill = Schemas["ResyncAfterBackfill"];
/** `resync` of an endpoint whose position this history does not hold: `position` is the newest. */
export type ResyncOfEndpoint = Schemas["ResyncOfEndpoint"];
/** The payload of the test event staff send from the admin. */
export type WebhookTest = Schemas["WebhookTest"];

/**
 * A verified delivery: its envelope, and its headers' ID and time.
 *
 * - A record's change (`bounty.created`, `dispute.resolved`, `submission.removed`, …): `payload`
 *   is the record as it was right after the change; `*.removed` deletes it, every other type
 *   replaces it. `seq` numbers the change and `position` is the place after it.
 * - `resync`: read the records anew (the read client); the changes after `position` follow.
 * - `webhook.test`: sent from the admin; `seq` and `position` are null.
 *
 * `webhookId` is the same on every retry of one change to one endpoint: keep the IDs already
 * handled and skip a repeat. `timestamp` is this attempt's time.
 */
export type WebhookEvent = {
  [K in WebhookType]: WebhookBody<K> & { webhookId: string; timestamp: Date };
}[WebhookType];

/**
 * A delivery that cannot be trusted: a header missing, a timestamp too far from now, no signature
 * that matches, a body that is not UTF-8, or a secret that is not `whsec_` and base64. The message
 * says which.
 */
export class WebhookVerificationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "WebhookVerificationError";
  }
}

/**
 * The request's headers: a Fetch `Headers` (or anything with its `get`), Node's
 * `IncomingHttpHeaders`, or a plain object in any letter case.
 */
export type WebhookHeaders =
  | { get(name: string): string | null }
  | Readonly<Record<string, string | readonly string[] | undefined>>;

const HEADERS = ["webhook-id", "webhook-timestamp", "webhook-signature"] as const;
/** How far `webhook-timestamp` may be from now: the Standard Webhooks libraries' 5 minutes. */
export const TOLERANCE_SECONDS = 300;

// The Standard Webhooks library's refusals (standardwebhooks 1.x), said as this client says them;
// test/webhooks.test.ts fails if an upgrade changes one of its texts.
const MINUTES = TOLERANCE_SECONDS / 60;
const LIBRARY_REFUSALS: Record<string, string> = {
  "Message timestamp too old": `webhook-timestamp is more than ${MINUTES} minutes old: a replayed delivery, or this machine's clock is wrong`,
  "Message timestamp too new": `webhook-timestamp is more than ${MINUTES} minutes ahead: this machine's clock is wrong`,
  "Invalid Signature Headers": "webhook-timestamp is not a number of seconds",
  "No matching signature found":
    "no signature matches: the body or its headers were changed, or the secret is not this endpoint's",
};

/**
 * The delivery's event, once its signature and timestamp are verified.
 *
 * `secret` is the endpoint's (`whsec_…`, shown in the admin); `headers` the request's; `body` the
 * request's body exactly as received (a string, or its bytes: a `Uint8Array` or Node `Buffer`),
 * before any JSON parsing (`await request.text()`, or Express's `express.raw()`).
 *
 * Throws `WebhookVerificationError` when the delivery cannot be trusted (a header missing, a
 * timestamp more than 5 minutes from this machine's clock, no signature that matches, a body that
 * is not UTF-8, a secret that is not `whsec_` and base64): answer it with a 4xx. Throws
 * `ResponseError` when the signed body is not the documented envelope.
 */
export function verifyWebhook(secret: string, headers: WebhookHeaders, body: string | Uint8Array): WebhookEvent {
  const found: Record<string, string> = {};
  for (const name of HEADERS) {
    const value = headerValue(headers, name);
    if (value) found[name] = value;
  }
  const missing = HEADERS.filter((name) => !found[name]);
  if (missing.length > 0) throw new WebhookVerificationError(`missing header: ${missing.join(", ")}`);
  const text = typeof body === "string" ? body : utf8(body);
  let webhook: Webhook;
  try {
    webhook = new Webhook(secret);
  } catch {
    throw new WebhookVerificationError("the secret is not a Standard Webhooks secret (whsec_ and base64)");
  }
  try {
    webhook.verify(text, found, { jsonParse: false });
  } catch (error) {
    if (error instanceof Refused) throw new WebhookVerificationError(LIBRARY_REFUSALS[error.message] ?? error.message);
    throw error;
  }
  return envelope(text, found["webhook-id"] as string, Number.parseInt(found["webhook-timestamp"] as string, 10));
}

function headerValue(headers: WebhookHeaders, name: string): string | undefined {
  if (typeof headers.get === "function") return (headers as { get(name: string): string | null }).get(name) ?? undefined;
  for (const [key, value] of Object.entries(headers as Readonly<Record<string, unknown>>)) {
    if (key.toLowerCase() !== name) continue;
    if (typeof value === "string") return value;
    if (Array.isArray(value) && typeof value[0] === "string") return value.join(", ");
  }
  return undefined;
}

function utf8(bytes: Uint8Array): string {
  try {
    // ignoreBOM: the text signed is the bytes as they are, a leading BOM included.
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    throw new WebhookVerificationError("the body is not UTF-8");
  }
}

function envelope(text: string, webhookId: string, seconds: number): WebhookEvent {
  let message: unknown;
  try {
    message = JSON.parse(text);
  } catch {
    throw new ResponseError("webhook: the body is not JSON");
  }
  if (typeof message !== "object" || message === null || Array.isArray(message)) {
    throw new ResponseError("webhook: the body is not a JSON object");
  }
  const { type, payload, seq, position } = message as Record<string, unknown>;
  if (typeof type !== "string" || typeof payload !== "object" || payload === null || Array.isArray(payload)) {
    throw new ResponseError("webhook: the body has no string type and object payload");
  }
  if (!(seq === null || Number.isSafeInteger(seq)) || !(position === null || typeof position === "string")) {
    throw new ResponseError(
      `webhook: a ${type} body's seq is not an integer or null, or its position not a string or null`,
    );
  }
  return { ...(message as WebhookBody), webhookId, timestamp: new Date(seconds * 1000) } as WebhookEvent;
}
