// watchEvents' bookkeeping for what the dev chain cannot easily produce on cue: a `resync` (a bulk
// re-index) in the middle of a connection, a message the service repeats, and a resume the service
// answers with a snapshot (a position of another history). The socket is a scripted stand-in;
// test/vectors.test.ts holds it to the shared `events` vectors, test/service.test.ts runs it
// against the real service. The reconnect's waits are checked here, the last one on the wire
// against a `ws` server on loopback.
import assert from "node:assert/strict";
import { once } from "node:events";
import type { AddressInfo } from "node:net";
import { describe, it } from "node:test";

import WebSocket, { WebSocketServer } from "ws";

import {
  eventsUrl, type LiveEvent, type Snapshot, watchEvents, type WebSocketConstructor,
} from "../src/index.js";
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

  it("comes back within the restart window after a 1012 or 1001, once until a message arrives, without growing the wait", async () => {
    ScriptedSocket.opened = [];
    const delays: [number, number][] = [];
    const watch = watchEvents("https://bounties.example.org/", { onDisconnect: (code, delayMs) => delays.push([code, delayMs]) },
      { WebSocket: ScriptedSocket, reconnectDelayMs: 4, maxReconnectDelayMs: 40, restartWindowMs: 10, random: () => 0.5 });
    const dropNext = async (code: number): Promise<void> => {
      ScriptedSocket.opened.at(-1)!.onclose?.({ code });
      await later(60);
    };
    const deliver = (): void =>
      ScriptedSocket.opened.at(-1)!.send({ type: "snapshot.complete", payload: { bounties: 0, submissions: 0, disputes: 0 }, seq: 1, position: "1.p" });
    await dropNext(1006); // 4: 3
    await dropNext(1006); // 8: 6
    await dropNext(1012); // the restart window, drawn at its half: 5
    await dropNext(1006); // 16, not 32: the restart was no failure; 12
    deliver();
    await dropNext(1001); // 5
    await dropNext(1012); // a second restart without a message in between: the doubling wait, 4: 3
    await dropNext(1001); // 8: 6
    deliver();
    await dropNext(1012); // 5
    watch.close();
    assert.deepEqual(delays, [[1006, 3], [1006, 6], [1012, 5], [1006, 12], [1001, 5], [1012, 3], [1001, 6], [1012, 5]]);

    delays.length = 0;
    const short = watchEvents("https://bounties.example.org/", { onDisconnect: (code, delayMs) => delays.push([code, delayMs]) },
      { WebSocket: ScriptedSocket, maxReconnectDelayMs: 20, random: () => 0.5 });
    await dropNext(1012); // the default window, 1000 ms, within the ceiling of 20, drawn at its half: 10
    short.close();
    assert.deepEqual(delays, [[1012, 10]]);
  });

  it("on the wire: comes back within the restart window after a 1012, and after the doubling wait after a 1011", async () => {
    const server = new WebSocketServer({ host: "127.0.0.1", port: 0 });
    await once(server, "listening");
    const paths: string[] = [];
    const openedAt: number[] = [];
    // Each connection's part: a message or none, then a close; the fourth stays open.
    const script: [boolean, number][] = [[true, 1012], [false, 1012], [true, 1011]];
    server.on("connection", (socket, request) => {
      paths.push(request.url ?? "");
      openedAt.push(performance.now());
      const [message, code] = script[paths.length - 1] ?? [false, 0];
      const seq = paths.length;
      if (message) socket.send(JSON.stringify({ type: "bounty.created", payload: bounty(seq), seq, position: `${seq}.p` }));
      if (code !== 0) socket.close(code);
    });
    const delays: [number, number][] = [];
    const watch = watchEvents(`http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      { onDisconnect: (code, delayMs) => delays.push([code, delayMs]) },
      { WebSocket: WebSocket as unknown as WebSocketConstructor, reconnectDelayMs: 1000, maxReconnectDelayMs: 1000,
        restartWindowMs: 50, random: () => 0.5 });
    try {
      for (const deadline = performance.now() + 10_000; openedAt.length < 4 && performance.now() < deadline;) await later(10);
    } finally {
      watch.close();
      for (const client of server.clients) client.terminate();
      server.close();
    }
    assert.deepEqual(delays, [[1012, 25], [1012, 750], [1011, 750]]);
    assert.deepEqual(paths, ["/ws/events", "/ws/events?since=1.p", "/ws/events?since=1.p", "/ws/events?since=3.p"]);
    const [first, second, third, fourth] = openedAt as [number, number, number, number];
    assert.ok(second - first < 500, `back ${second - first} ms after the first 1012`);
    assert.ok(third - second >= 745, `back ${third - second} ms after the second 1012`);
    assert.ok(fourth - third >= 745, `back ${fourth - third} ms after the 1011`);
  });

  it("makes the websocket address from the service's", () => {
    assert.equal(eventsUrl("http://127.0.0.1:8000"), "ws://127.0.0.1:8000/ws/events");
    assert.equal(eventsUrl("wss://example.org/api/"), "wss://example.org/api/ws/events");
  });
});
