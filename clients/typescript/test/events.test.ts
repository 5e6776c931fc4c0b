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

  it("backs off doubling with jitter up to a ceiling, longer after 1008 or 1013, and from the start after a message", async () => {
    ScriptedSocket.opened = [];
    const delays: [number, number][] = [];
    const draws = [0, 0.5, 0.999, 0.5, 0.5, 0.5, 0.5];
    const watch = watchEvents("https://bounties.example.org/", { onDisconnect: (code, delayMs) => delays.push([code, delayMs]) },
      { WebSocket: ScriptedSocket, reconnectDelayMs: 4, maxReconnectDelayMs: 40, random: () => draws.shift() ?? 0.5 });
    const dropNext = async (code: number): Promise<void> => {
      ScriptedSocket.opened.at(-1)!.onclose?.({ code });
      await later(60); // past the ceiling: the next connection is open
    };
    await dropNext(1006); // 4 ms at most, drawn at its half: 2
    await dropNext(1006); // 8: 6
    await dropNext(1013); // 16 x 5, within the ceiling: 40, drawn near its top
    await dropNext(1006); // 32: 24
    await dropNext(1006); // 64, within the ceiling: 30
    ScriptedSocket.opened.at(-1)!.send({ type: "snapshot.complete", payload: { bounties: 0, submissions: 0, disputes: 0 }, seq: 1, position: "1.p" });
    await dropNext(1006); // a healthy connection: from the start again, 3
    await dropNext(1008); // 8 x 5: 30
    watch.close();
    assert.deepEqual(delays.map(([code]) => code), [1006, 1006, 1013, 1006, 1006, 1006, 1008]);
    const expected = [2, 6, 39.98, 24, 30, 3, 30];
    delays.forEach(([, delay], i) => assert.ok(Math.abs(delay - expected[i]!) < 0.01, `${delay} != ${expected[i]}`));
    assert.equal(ScriptedSocket.opened.length, 8);
  });

  it("makes the websocket address from the service's", () => {
    assert.equal(eventsUrl("http://127.0.0.1:8000"), "ws://127.0.0.1:8000/ws/events");
    assert.equal(eventsUrl("wss://example.org/api/"), "wss://example.org/api/ws/events");
  });
});
