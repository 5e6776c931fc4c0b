// watchEvents' bookkeeping for what the dev chain cannot easily produce on cue: a `resync` (a bulk
// re-index) in the middle of a connection, and a message the service repeats. The socket is a
// scripted stand-in; test/service.test.ts runs the helper against the real service.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { eventsUrl, type LiveEvent, type Snapshot, watchEvents, type WebSocketLike } from "../src/index.js";

class ScriptedSocket implements WebSocketLike {
  static opened: ScriptedSocket[] = [];
  onopen: ((event: unknown) => void) | null = null;
  onmessage: ((event: { data: unknown }) => void) | null = null;
  onclose: ((event: { code: number }) => void) | null = null;
  onerror: ((event: unknown) => void) | null = null;
  constructor(readonly url: string) {
    ScriptedSocket.opened.push(this);
  }
  send(...messages: object[]): void {
    for (const message of messages) this.onmessage?.({ data: JSON.stringify(message) });
  }
  close(): void {}
}

const bounty = (id: number) => ({ id, status: "open" });

describe("watchEvents", () => {
  it("replaces the state at a resync, drops repeats, and resumes from the last seq applied", async () => {
    ScriptedSocket.opened = [];
    const snapshots: Snapshot[] = [];
    const events: LiveEvent[] = [];
    const watch = watchEvents("https://bounties.example.org/", { onSnapshot: (s) => snapshots.push(s), onEvent: (e) => events.push(e) },
      { WebSocket: ScriptedSocket, reconnectDelayMs: 1 });
    const first = ScriptedSocket.opened[0]!;
    assert.equal(first.url, "wss://bounties.example.org/ws/events");
    first.send(
      { type: "bounty.created", payload: bounty(1), snapshot: true, seq: 10 },
      { type: "snapshot.complete", payload: { bounties: 1, submissions: 0, disputes: 0 }, seq: 10 },
      { type: "bounty.created", payload: bounty(2), seq: 11 },
      { type: "bounty.created", payload: bounty(2), seq: 11 }, // a repeat
      { type: "resync", payload: { from_block: 5, to_block: 90 }, seq: 12 },
    );
    assert.equal(watch.resumeFrom, null); // until the new snapshot is complete
    first.send(
      { type: "bounty.created", payload: bounty(1), snapshot: true, seq: 12 },
      { type: "bounty.created", payload: bounty(3), snapshot: true, seq: 12 },
      { type: "snapshot.complete", payload: { bounties: 2, submissions: 0, disputes: 0 }, seq: 12 },
      { type: "bounty.finalized", payload: { ...bounty(3), status: "resolved" }, seq: 13 },
    );
    assert.deepEqual(snapshots.map((s) => [s.seq, s.bounties.map((b) => b.id)]), [[10, [1]], [12, [1, 3]]]);
    assert.deepEqual(events.map((e) => [e.seq, e.type]), [[11, "bounty.created"], [13, "bounty.finalized"]]);

    first.onclose?.({ code: 1006 });
    await new Promise((resolve) => setTimeout(resolve, 20));
    assert.equal(ScriptedSocket.opened[1]?.url, "wss://bounties.example.org/ws/events?since=13");
    watch.close();
  });

  it("waits five times as long before reconnecting after a 1013 (no snapshot slot free) as after a drop", async () => {
    ScriptedSocket.opened = [];
    const watch = watchEvents("https://bounties.example.org/", {}, { WebSocket: ScriptedSocket, reconnectDelayMs: 40 });
    ScriptedSocket.opened[0]!.onclose?.({ code: 1013 });
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.equal(ScriptedSocket.opened.length, 1); // not yet: 200 ms
    await new Promise((resolve) => setTimeout(resolve, 250));
    assert.equal(ScriptedSocket.opened.length, 2);
    ScriptedSocket.opened[1]!.onclose?.({ code: 1006 });
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.equal(ScriptedSocket.opened.length, 3); // 40 ms
    watch.close();
  });

  it("makes the websocket address from the service's", () => {
    assert.equal(eventsUrl("http://127.0.0.1:8000"), "ws://127.0.0.1:8000/ws/events");
    assert.equal(eventsUrl("wss://example.org/api/"), "wss://example.org/api/ws/events");
  });
});
