// watchEvents' bookkeeping for what the dev chain cannot easily produce on cue: a `resync` (a bulk
// re-index) in the middle of a connection, a message the service repeats, and a resume the service
// answers with a snapshot (a position of another history). The socket is a scripted stand-in;
// test/vectors.test.ts holds it to the shared `events` vectors, test/service.test.ts runs it
// against the real service.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { eventsUrl, type LiveEvent, type Snapshot, watchEvents } from "../src/index.js";
import { later, ScriptedSocket } from "./scripted-socket.js";

const bounty = (id: number) => ({ id, status: "open" });

const position = (seq: number): string => `${seq}.${seq.toString(16).padStart(32, "0")}`;

describe("watchEvents", () => {
  it("replaces the state at a resync, drops repeats by seq, and resumes from the last position applied", async () => {
    ScriptedSocket.opened = [];
    const snapshots: Snapshot[] = [];
    const events: LiveEvent[] = [];
    const watch = watchEvents("https://bounties.example.org/", { onSnapshot: (s) => snapshots.push(s), onEvent: (e) => events.push(e) },
      { WebSocket: ScriptedSocket, reconnectDelayMs: 1 });
    const first = ScriptedSocket.opened[0]!;
    assert.equal(first.url, "wss://bounties.example.org/ws/events");
    first.send(
      { type: "bounty.created", payload: bounty(1), snapshot: true, seq: 10 },
      { type: "snapshot.complete", payload: { bounties: 1, submissions: 0, disputes: 0 }, seq: 10, position: position(10) },
      { type: "bounty.created", payload: bounty(2), seq: 11, position: position(11) },
      { type: "bounty.created", payload: bounty(2), seq: 11, position: position(11) }, // a repeat
      { type: "resync", payload: { from_block: 5, to_block: 90 }, seq: 12, position: position(12) },
    );
    assert.equal(watch.resumeFrom, null); // until the new snapshot is complete
    first.send(
      { type: "bounty.created", payload: bounty(1), snapshot: true, seq: 12 },
      { type: "bounty.created", payload: bounty(3), snapshot: true, seq: 12 },
      { type: "snapshot.complete", payload: { bounties: 2, submissions: 0, disputes: 0 }, seq: 12, position: position(12) },
      { type: "bounty.finalized", payload: { ...bounty(3), status: "resolved" }, seq: 13, position: position(13) },
    );
    assert.deepEqual(snapshots.map((s) => [s.seq, s.position, s.bounties.map((b) => b.id)]),
      [[10, position(10), [1]], [12, position(12), [1, 3]]]);
    assert.deepEqual(events.map((e) => [e.seq, e.type]), [[11, "bounty.created"], [13, "bounty.finalized"]]);
    assert.equal(watch.resumeFrom, position(13));

    first.onclose?.({ code: 1006 });
    await later(20);
    assert.equal(ScriptedSocket.opened[1]?.url, `wss://bounties.example.org/ws/events?since=${position(13)}`);
    watch.close();
  });

  it("resumes with the position percent-encoded, and replaces the state with a snapshot that answers the resume", async () => {
    ScriptedSocket.opened = [];
    const snapshots: Snapshot[] = [];
    const events: LiveEvent[] = [];
    const watch = watchEvents("https://bounties.example.org/", { onSnapshot: (s) => snapshots.push(s), onEvent: (e) => events.push(e) },
      { WebSocket: ScriptedSocket, since: "90.a+b/c=d&e f", reconnectDelayMs: 1 });
    const resumed = ScriptedSocket.opened[0]!;
    assert.equal(resumed.url, "wss://bounties.example.org/ws/events?since=90.a%2Bb%2Fc%3Dd%26e%20f");
    // The service cannot vouch for the position (another history, seqs lower than the client's):
    // a whole snapshot, then live messages numbered on from it.
    resumed.send(
      { type: "bounty.created", payload: bounty(4), snapshot: true, seq: 40 },
      { type: "snapshot.complete", payload: { bounties: 1, submissions: 0, disputes: 0 }, seq: 40, position: "40.x/y" },
      { type: "bounty.created", payload: bounty(5), seq: 41, position: "41.x+y" },
    );
    assert.deepEqual(snapshots.map((s) => [s.seq, s.position, s.bounties.map((b) => b.id)]), [[40, "40.x/y", [4]]]);
    assert.deepEqual(events.map((e) => [e.seq, e.position]), [[41, "41.x+y"]]);
    resumed.onclose?.({ code: 1011 }); // the history changed under the connection
    await later(20);
    assert.equal(ScriptedSocket.opened[1]?.url, "wss://bounties.example.org/ws/events?since=41.x%2By");
    watch.close();
  });

  it("waits five times as long before reconnecting after a 1013 (no snapshot slot free) as after a drop", async () => {
    ScriptedSocket.opened = [];
    const watch = watchEvents("https://bounties.example.org/", {}, { WebSocket: ScriptedSocket, reconnectDelayMs: 40 });
    ScriptedSocket.opened[0]!.onclose?.({ code: 1013 });
    await later(100);
    assert.equal(ScriptedSocket.opened.length, 1); // not yet: 200 ms
    await later(250);
    assert.equal(ScriptedSocket.opened.length, 2);
    ScriptedSocket.opened[1]!.onclose?.({ code: 1006 });
    await later(100);
    assert.equal(ScriptedSocket.opened.length, 3); // 40 ms
    watch.close();
  });

  it("makes the websocket address from the service's", () => {
    assert.equal(eventsUrl("http://127.0.0.1:8000"), "ws://127.0.0.1:8000/ws/events");
    assert.equal(eventsUrl("wss://example.org/api/"), "wss://example.org/api/ws/events");
  });
});
