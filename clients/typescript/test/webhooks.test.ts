// verifyWebhook on deliveries signed here as the service signs them (node:crypto's HMAC, not the
// Standard Webhooks library the client verifies with): the header shapes of Fetch and Node, a
// secret's rotation, and every refusal with its message. tests/client/test_webhook_verification.py
// verifies deliveries signed by the service's own code with this module and the Python client alike.
import assert from "node:assert/strict";
import { createHmac, randomBytes } from "node:crypto";
import { describe, it } from "node:test";

import type { Bounty } from "../src/records.js";
import { ResponseError } from "../src/read.js";
import { verifyWebhook, type WebhookEvent, WebhookVerificationError } from "../src/webhooks.js";

const newSecret = (): string => `whsec_${randomBytes(32).toString("base64")}`;
const now = (): number => Math.floor(Date.now() / 1000);

/** `webhook-signature` of the delivery with each of `secrets`, space-separated (webhooks/signing.py). */
function signature(secrets: string[], id: string, timestamp: number, body: string | Uint8Array): string {
  return secrets
    .map((secret) => {
      const key = Buffer.from(secret.slice("whsec_".length), "base64");
      const mac = createHmac("sha256", key).update(`${id}.${timestamp}.`).update(body).digest("base64");
      return `v1,${mac}`;
    })
    .join(" ");
}

function delivery(secrets: string[], body: string, { id = "msg_3_42_00ff00ff00ff00ff", timestamp = now() } = {}) {
  return {
    headers: {
      "content-type": "application/json",
      "webhook-id": id,
      "webhook-timestamp": String(timestamp),
      "webhook-signature": signature(secrets, id, timestamp, body),
    } as Record<string, string>,
    body,
  };
}

const BOUNTY = { id: 7, status: "open", poster: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8" };
const CREATED = JSON.stringify({ type: "bounty.created", payload: BOUNTY, seq: 42, position: `42.${"ab".repeat(16)}` });

const refusal = (message: string) => (error: unknown) =>
  error instanceof WebhookVerificationError && error.name === "WebhookVerificationError" && error.message === message;
const NO_MATCH = "no signature matches: the body or its headers were changed, or the secret is not this endpoint's";

describe("verifyWebhook", () => {
  it("hands over the envelope, its type narrowing the payload, with the delivery's ID and time", () => {
    const secret = newSecret();
    const timestamp = now();
    const { headers, body } = delivery([secret], CREATED, { timestamp });
    const event: WebhookEvent = verifyWebhook(secret, headers, body);
    assert.deepEqual(event, {
      type: "bounty.created", payload: BOUNTY, seq: 42, position: `42.${"ab".repeat(16)}`,
      webhookId: "msg_3_42_00ff00ff00ff00ff", timestamp: new Date(timestamp * 1000),
    });
    if (event.type === "bounty.created") {
      const bounty: Bounty = event.payload; // narrowed by the type, from the OpenAPI schema's webhooks
      assert.equal(bounty.id, 7);
    } else {
      assert.fail(event.type);
    }
  });

  it("takes the headers of Fetch, of Node and in any letter case, and the body as text or bytes", () => {
    const secret = newSecret();
    const { headers, body } = delivery([secret], CREATED);
    const shouted = Object.fromEntries(Object.entries(headers).map(([name, value]) => [name.toUpperCase(), value]));
    const node = { ...headers, "webhook-id": [headers["webhook-id"] as string] };
    for (const given of [headers, shouted, node, new Headers(headers)]) {
      for (const bytes of [body, new TextEncoder().encode(body), Buffer.from(body)]) {
        assert.equal(verifyWebhook(secret, given, bytes).seq, 42);
      }
    }
  });

  it("refuses a changed body, a wrong secret and a changed ID", () => {
    const secret = newSecret();
    const { headers, body } = delivery([secret], CREATED);
    assert.throws(() => verifyWebhook(secret, headers, body.replace('"id":7', '"id":8')), refusal(NO_MATCH));
    assert.throws(() => verifyWebhook(newSecret(), headers, body), refusal(NO_MATCH));
    assert.throws(() => verifyWebhook(secret, { ...headers, "webhook-id": "msg_3_43_00ff00ff00ff00ff" }, body),
      refusal(NO_MATCH));
  });

  it("refuses a timestamp more than 5 minutes old or ahead, and one that is not a number", () => {
    const secret = newSecret();
    const old = delivery([secret], CREATED, { timestamp: now() - 400 });
    assert.throws(() => verifyWebhook(secret, old.headers, old.body), refusal(
      "webhook-timestamp is more than 5 minutes old: a replayed delivery, or this machine's clock is wrong"));
    const ahead = delivery([secret], CREATED, { timestamp: now() + 400 });
    assert.throws(() => verifyWebhook(secret, ahead.headers, ahead.body), refusal(
      "webhook-timestamp is more than 5 minutes ahead: this machine's clock is wrong"));
    const { headers, body } = delivery([secret], CREATED);
    assert.throws(() => verifyWebhook(secret, { ...headers, "webhook-timestamp": "soon" }, body),
      refusal("webhook-timestamp is not a number of seconds"));
  });

  it("verifies a rotation's two signatures with either secret, and neither with a third", () => {
    const [current, previous] = [newSecret(), newSecret()];
    const { headers, body } = delivery([current, previous], CREATED);
    assert.equal((headers["webhook-signature"] as string).split(" ").length, 2);
    assert.equal(verifyWebhook(current, headers, body).seq, 42);
    assert.equal(verifyWebhook(previous, headers, body).seq, 42);
    assert.throws(() => verifyWebhook(newSecret(), headers, body), refusal(NO_MATCH));
  });

  it("names the missing headers, and refuses a body that is not UTF-8 and a secret that is not one", () => {
    const secret = newSecret();
    const { headers, body } = delivery([secret], CREATED);
    assert.throws(() => verifyWebhook(secret, { "webhook-timestamp": headers["webhook-timestamp"] as string }, body),
      refusal("missing header: webhook-id, webhook-signature"));
    const bytes = new Uint8Array([0x7b, 0xff, 0x7d]);
    const signed = { ...headers, "webhook-signature": signature([secret], headers["webhook-id"] as string,
      Number(headers["webhook-timestamp"]), bytes) };
    assert.throws(() => verifyWebhook(secret, signed, bytes), refusal("the body is not UTF-8"));
    assert.throws(() => verifyWebhook("whsec_not*base64", headers, body),
      refusal("the secret is not a Standard Webhooks secret (whsec_ and base64)"));
  });

  it("hands over resync and the admin's test event, and refuses a signed body that is not an envelope", () => {
    const secret = newSecret();
    const resync = { type: "resync", payload: { reason: "pruned", position: "90.x" }, seq: 90, position: "90.x" };
    const resent = delivery([secret], JSON.stringify(resync));
    const event = verifyWebhook(secret, resent.headers, resent.body);
    assert.ok(event.type === "resync" && "reason" in event.payload && event.payload.reason === "pruned");
    const test = { type: "webhook.test", payload: { endpoint: 3, sent_at: "2026-01-02T03:04:05+00:00" },
                   seq: null, position: null };
    const sent = delivery([secret], JSON.stringify(test));
    const tested = verifyWebhook(secret, sent.headers, sent.body);
    assert.ok(tested.type === "webhook.test" && tested.seq === null && tested.payload.endpoint === 3);
    for (const [text, message] of [
      ["[1]", "webhook: the body is not a JSON object"],
      ["{", "webhook: the body is not JSON"],
      ['{"type": "bounty.created", "payload": [], "seq": 1, "position": "1.x"}',
       "webhook: the body has no string type and object payload"],
      ['{"type": "bounty.created", "payload": {}, "position": "1.x"}',
       "webhook: a bounty.created body's seq is not an integer or null, or its position not a string or null"],
    ] as const) {
      const { headers, body } = delivery([secret], text);
      assert.throws(() => verifyWebhook(secret, headers, body),
        (error) => error instanceof ResponseError && error.message === message);
    }
  });
});
