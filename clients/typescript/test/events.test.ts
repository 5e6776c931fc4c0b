// watchEvents' bookkeeping for what the dev chain cannot easily produce on cue: a `resync` (a bulk
// re-index) in the middle of a connection, a message the service repeats, and a resume the service
// answers with a snapshot (a position of another history). The socket is a scripted stand-in;
// test/vectors.test.ts holds it to the shared `events` vectors, test/service.test.ts runs it
// against the real service. The reconnect's waits are checked here, the last two on the wire
// against a `ws` server on loopback (one of them restarting on the same port).
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

/** Resolves once `condition()` holds, or after 10 s (the test's assertions then say what is missing). */
const until = async (condition: () => boolean): Promise<void> => {
  for (const deadline = performance.now() + 10_000; !condition() && performance.now() < deadline;) await later(10);
};

/** Closes the newest scripted socket with `code`, and waits `ms`, past the wait: the next one is open. */
const dropNext = async (code: number, ms = 60): Promise<void> => {
  ScriptedSocket.opened.at(-1)!.onclose?.({ code });
  await later(ms);
};

const deliver = (): void =>
  ScriptedSocket.opened.at(-1)!.send({ type: "snapshot.complete", payload: { bounties: 0, submissions: 0, disputes: 0 }, seq: 1, position: "1.p" });

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
    await dropNext(1006); // 4 ms at most, drawn at its half: 2
    await dropNext(1006); // 8: 6
    await dropNext(1013); // 16 x 5, within the ceiling: 40, drawn near its top
    await dropNext(1006); // 32: 24
    await dropNext(1006); // 64, within the ceiling: 30
    deliver();
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
    await dropNext(1006); // 4: 3
    await dropNext(1006); // 8: 6
    await dropNext(1012); // the restart window, drawn at its half: 5
    await dropNext(1011); // 16, not 32: the restart was no failure; 12
    deliver();
    await dropNext(1001); // 5
    await dropNext(1012); // a second restart without a message in between: the doubling wait, 4: 3
    await dropNext(1001); // 8: 6
    deliver();
    await dropNext(1012); // 5
    watch.close();
    assert.deepEqual(delays, [[1006, 3], [1006, 6], [1012, 5], [1011, 12], [1001, 5], [1012, 3], [1001, 6], [1012, 5]]);

    delays.length = 0;
    const short = watchEvents("https://bounties.example.org/", { onDisconnect: (code, delayMs) => delays.push([code, delayMs]) },
      { WebSocket: ScriptedSocket, maxReconnectDelayMs: 20, random: () => 0.5 });
    await dropNext(1012); // the default window, 1000 ms, within the ceiling of 20, drawn at its half: 10
    short.close();
    assert.deepEqual(delays, [[1012, 10]]);
  });

  it("retries a connection that fails while the server restarts within the window, without growing the wait, restartTries times", async () => {
    ScriptedSocket.opened = [];
    const delays: [number, number][] = [];
    const draws = [0, 0.5, 0.999];
    let draw = 0;
    const watch = watchEvents("https://bounties.example.org/", { onDisconnect: (code, delayMs) => delays.push([code, delayMs]) },
      { WebSocket: ScriptedSocket, reconnectDelayMs: 4, maxReconnectDelayMs: 40, restartWindowMs: 10, restartTries: 4,
        random: () => draws[draw++ % draws.length]! });
    await dropNext(1006); // 4, drawn at 0: 2
    await dropNext(1012); // the restart window, drawn at its half: 5
    for (let i = 0; i < 4; i += 1) await dropNext(1006); // refused while the new server starts: between 5 and 10
    await dropNext(1006); // the tries are used up: 8 (one failure before the restart), drawn at 0: 4
    await dropNext(1006); // 16, drawn at its half: 12
    watch.close();
    assert.deepEqual(delays.map(([code]) => code), [1006, 1012, 1006, 1006, 1006, 1006, 1006, 1006]);
    const retries = delays.slice(2, 6).map(([, delay]) => delay);
    assert.ok(retries.every((delay) => delay >= 5 && delay <= 10), `${retries}`);
    const expected = [2, 5, 9.995, 5, 7.5, 9.995, 4, 12];
    delays.forEach(([, delay], i) => assert.ok(Math.abs(delay - expected[i]!) < 1e-9, `${delay} != ${expected[i]}`));

    delays.length = 0;
    const defaults = watchEvents("https://bounties.example.org/", { onDisconnect: (code, delayMs) => delays.push([code, delayMs]) },
      { WebSocket: ScriptedSocket, reconnectDelayMs: 8, maxReconnectDelayMs: 20, random: () => 0 });
    await dropNext(1012, 30); // the default window, 1000 ms, within the ceiling of 20, drawn at 0
    for (let i = 0; i < 30; i += 1) await dropNext(1006, 30); // 30 tries by default, each at half the window: 10
    await dropNext(1006, 30); // then the doubling wait from the first: 4
    await dropNext(1006, 30); // 8
    defaults.close();
    assert.deepEqual(delays, [[1012, 0], ...Array<[number, number]>(30).fill([1006, 10]), [1006, 4], [1006, 8]]);
  });

  for (const [code, delay] of [[1011, 3], [1008, 15], [1013, 15], [4000, 3], [1012, 3], [1001, 3]] as const) {
    it(`ends the restart's retries at a ${code} close, which waits the doubling wait (${delay} ms)`, async () => {
      ScriptedSocket.opened = [];
      const delays: [number, number][] = [];
      const watch = watchEvents("https://bounties.example.org/", { onDisconnect: (c, delayMs) => delays.push([c, delayMs]) },
        { WebSocket: ScriptedSocket, reconnectDelayMs: 4, maxReconnectDelayMs: 40, restartWindowMs: 10, random: () => 0.5 });
      for (const c of [1012, 1006, code, 1006, 1006]) await dropNext(c);
      watch.close();
      assert.deepEqual(delays, [[1012, 5], [1006, 7.5], [code, delay], [1006, 6], [1006, 12]]);
    });
  }

  it("ends the restart's retries when a message arrives; the next restart has them all again", async () => {
    ScriptedSocket.opened = [];
    const delays: [number, number][] = [];
    const watch = watchEvents("https://bounties.example.org/", { onDisconnect: (code, delayMs) => delays.push([code, delayMs]) },
      { WebSocket: ScriptedSocket, reconnectDelayMs: 4, maxReconnectDelayMs: 40, restartWindowMs: 10, restartTries: 2,
        random: () => 0.5 });
    await dropNext(1012); // 5
    await dropNext(1006); // 7.5
    deliver();
    await dropNext(1006); // the doubling wait from the first: 3
    await dropNext(1006); // 6
    deliver();
    for (const code of [1001, 1006, 1006, 1006]) await dropNext(code); // 5, two tries of 7.5, then 3
    watch.close();
    assert.deepEqual(delays, [[1012, 5], [1006, 7.5], [1006, 3], [1006, 6], [1001, 5], [1006, 7.5], [1006, 7.5], [1006, 3]]);
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
      await until(() => openedAt.length >= 4);
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

  it("on the wire: while the server restarts, retries a refused connection within the window and is back soon after it listens", async () => {
    const old = new WebSocketServer({ host: "127.0.0.1", port: 0 });
    await once(old, "listening");
    const port = (old.address() as AddressInfo).port;
    old.on("connection", (socket) => {
      socket.send(JSON.stringify({ type: "bounty.created", payload: bounty(1), seq: 1, position: "1.p" }));
      old.close(); // the old process stops listening; this connection stays open
      socket.close(1012);
    });
    const delays: [number, number][] = [];
    const watch = watchEvents(`http://127.0.0.1:${port}`, { onDisconnect: (code, delayMs) => delays.push([code, delayMs]) },
      { WebSocket: WebSocket as unknown as WebSocketConstructor, reconnectDelayMs: 1000, maxReconnectDelayMs: 1000,
        restartWindowMs: 100, random: () => 0.5 });
    const servers = [old];
    const paths: string[] = [];
    let listeningAt = 0;
    let openedAt = 0;
    try {
      await until(() => delays.length >= 4); // the 1012, then three refused connections
      const fresh = new WebSocketServer({ host: "127.0.0.1", port });
      servers.push(fresh);
      fresh.on("connection", (_socket, request) => {
        paths.push(request.url ?? "");
        openedAt = performance.now();
      });
      await once(fresh, "listening");
      listeningAt = performance.now();
      await until(() => paths.length >= 1);
    } finally {
      watch.close();
      for (const server of servers) {
        for (const client of server.clients) client.terminate();
        server.close();
      }
    }
    assert.deepEqual(delays, [[1012, 50], ...Array<[number, number]>(delays.length - 1).fill([1006, 75])]);
    assert.deepEqual(paths, ["/ws/events?since=1.p"]);
    // within a wait of the window, not the doubling wait of 500 ms or more
    assert.ok(openedAt - listeningAt < 500, `back ${openedAt - listeningAt} ms after the new server listened`);
  });

  it("makes the websocket address from the service's", () => {
    assert.equal(eventsUrl("http://127.0.0.1:8000"), "ws://127.0.0.1:8000/ws/events");
    assert.equal(eventsUrl("wss://example.org/api/"), "wss://example.org/api/ws/events");
  });
});
