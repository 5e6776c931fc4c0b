/**
 * The websocket `/ws/events`: a snapshot of every record, then every change, resumed after a
 * dropped connection without a gap or a repeat (docs/api.md, The websocket).
 *
 * `watchEvents` connects, collects the snapshot and hands it over whole, then hands over each
 * live message in order. When the connection drops it connects again with `?since=<the position
 * of the last message applied>`, so it gets exactly the messages it missed; when the service
 * cannot vouch for that position (pruned, or of another history: a restored backup, a promoted
 * standby, a re-index), or sends `resync`, a new snapshot comes and is handed over as such.
 *
 * A position is opaque: it is only ever stored and sent back, never built or parsed. `seq` still
 * orders the messages of one history, so repeats are dropped by seq, kept apart from the position.
 */
import type { Bounty, Dispute, Submission } from "./records.js";

export type LiveType =
  | "bounty.created" | "submission.created" | "dispute.created"
  | "dispute.resolved" | "dispute.cancelled" | "bounty.finalized" | "bounty.refunded" | "submission.refunded"
  | "bounty.updated" | "submission.updated" | "dispute.updated"
  | "bounty.removed" | "submission.removed" | "dispute.removed";

/**
 * A live message: a record as it was right after the change numbered `seq`. `position` names that
 * place in the service's history: store it to resume from (`WatchOptions.since`).
 */
export type LiveEvent =
  | {
      type: "bounty.created" | "bounty.finalized" | "bounty.refunded" | "bounty.updated" | "bounty.removed";
      payload: Bounty;
      seq: number;
      position: string;
    }
  | {
      type: "submission.created" | "submission.refunded" | "submission.updated" | "submission.removed";
      payload: Submission;
      seq: number;
      position: string;
    }
  | {
      type: "dispute.created" | "dispute.resolved" | "dispute.cancelled" | "dispute.updated" | "dispute.removed";
      payload: Dispute;
      seq: number;
      position: string;
    };

/** Every record of the active deployment, current at change `seq`; resume from `position`. */
export interface Snapshot {
  bounties: Bounty[];
  submissions: Submission[];
  disputes: Dispute[];
  seq: number;
  position: string;
}

/** A record of a snapshot: no position of its own (the snapshot's comes with `snapshot.complete`). */
type SnapshotRecord =
  | { type: "bounty.created"; payload: Bounty; snapshot: true; seq: number }
  | { type: "submission.created"; payload: Submission; snapshot: true; seq: number }
  | { type: "dispute.created"; payload: Dispute; snapshot: true; seq: number };

type Message =
  | SnapshotRecord
  | LiveEvent
  | {
      type: "snapshot.complete";
      payload: { bounties: number; submissions: number; disputes: number };
      seq: number;
      position: string;
    }
  | { type: "resync"; payload: { from_block: number; to_block: number }; seq: number; position: string };

function isSnapshotRecord(message: Message): message is SnapshotRecord {
  return "snapshot" in message && message.snapshot === true;
}

/** What a WebSocket constructor must offer: the browser's, or for Node 20 the `ws` package's. */
export interface WebSocketLike {
  onopen: ((event: unknown) => void) | null;
  onmessage: ((event: { data: unknown }) => void) | null;
  onclose: ((event: { code: number }) => void) | null;
  onerror: ((event: unknown) => void) | null;
  close(code?: number): void;
}
export type WebSocketConstructor = new (url: string) => WebSocketLike;

export interface WatchHandlers {
  /** A whole snapshot: replace every record held with these. */
  onSnapshot?(snapshot: Snapshot): void;
  /** A live message, in seq order: `*.removed` deletes the record, every other type replaces it. */
  onEvent?(event: LiveEvent): void;
  /** The connection dropped (`code`); it is opened again after `delayMs` (see `reconnectDelayMs`, `restartWindowMs`, `restartTries`). */
  onDisconnect?(code: number, delayMs: number): void;
  /** A message that does not parse (the connection is then opened again, resuming), or a handler's exception. */
  onError?(error: unknown): void;
}

export interface WatchOptions {
  /** The WebSocket constructor (the global one by default: browsers; pass `ws`'s in Node 20). */
  WebSocket?: WebSocketConstructor;
  /**
   * Resume from this position (a `position` this watch or an earlier one handed over: of a
   * `Snapshot` or a `LiveEvent`) instead of starting with a snapshot. If the service cannot vouch
   * for it, a snapshot comes all the same.
   */
  since?: string;
  /**
   * The first wait before reconnecting (default 1000 ms). It doubles with every connection in a
   * row that ends before a message arrived, up to `maxReconnectDelayMs`, and is five times as long
   * after a 1008 or 1013 close (a limit, or no snapshot slot free); each wait is drawn between half
   * of that and all of it, so that clients dropped together do not come back together. A
   * connection that delivers a message starts again from the first. After a 1012 or 1001 close,
   * see `restartWindowMs`.
   */
  reconnectDelayMs?: number;
  /** The longest wait before reconnecting (default 60000 ms). */
  maxReconnectDelayMs?: number;
  /**
   * The window of the wait after a 1012 or 1001 close, the server restarting or going away
   * (default 1000 ms): not a failure, so the wait is drawn uniformly between 0 and this (within
   * `maxReconnectDelayMs`) and the doubling wait does not grow for it; the clients of a restarted
   * server come back at once, spread over the window. That quick return is taken once until a
   * message arrives again: a second 1012 or 1001 without one in between waits the doubling wait,
   * as any other close, so a server that keeps restarting is not hammered. See `restartTries` for
   * the connections that fail while the new server starts.
   */
  restartWindowMs?: number;
  /**
   * After the quick return of a 1012 or 1001, while the new server does not listen yet (it may
   * take seconds): how many connections in a row that fail without a close frame from the server
   * (code 1006: refused, reset, timed out, a failed handshake) are retried after a wait drawn
   * uniformly between half of `restartWindowMs` and all of it (within `maxReconnectDelayMs`),
   * without growing the doubling wait (default 30: about half a minute of a server restarting),
   * so that its clients are back within a second of its listening. After these tries, after a
   * close the server sent with any other code (it is up again), or once a message arrives, the
   * doubling wait applies as before.
   */
  restartTries?: number;
  /** A number in [0, 1), for the jitter and the restart waits (default `Math.random`). */
  random?: () => number;
}

export interface Watch {
  /** The position of the last message fully applied (the resume point), or null while a snapshot is incomplete. */
  readonly resumeFrom: string | null;
  /** Stops: closes the connection and does not reconnect. */
  close(): void;
}

/** The `/ws/events` URL of a service given by its `http(s)://` or `ws(s)://` base address. */
export function eventsUrl(baseUrl: string): string {
  const url = new URL(baseUrl.replace(/\/+$/, "") + "/ws/events");
  if (url.protocol === "http:") url.protocol = "ws:";
  if (url.protocol === "https:") url.protocol = "wss:";
  return url.toString();
}

/**
 * Follows `/ws/events` of the service at `baseUrl` (`http(s)://` or `ws(s)://`) until `close()`:
 * `onSnapshot` gets every complete snapshot, `onEvent` every live message after it, once each, in
 * order. After a drop it connects again, resuming, after a wait: a growing one after a failure
 * (`reconnectDelayMs`), a short random one after the server restarts (`restartWindowMs`) and while
 * it starts again (`restartTries`).
 */
export function watchEvents(baseUrl: string, handlers: WatchHandlers, options: WatchOptions = {}): Watch {
  const Socket = options.WebSocket ?? (globalThis as unknown as { WebSocket?: WebSocketConstructor }).WebSocket;
  if (Socket === undefined) throw new Error("no WebSocket: pass one in options.WebSocket (the `ws` package in Node 20)");
  const url = eventsUrl(baseUrl);
  const firstDelay = options.reconnectDelayMs ?? 1000;
  const maxDelay = options.maxReconnectDelayMs ?? 60_000;
  const restartWindow = Math.min(options.restartWindowMs ?? 1000, maxDelay);
  const restartTries = options.restartTries ?? 30;
  const random = options.random ?? Math.random;
  let failures = 0; // connections in a row that ended before a message arrived
  let restartTaken = false; // a quick return after a 1012 or 1001 since the last message
  let restartTriesLeft = 0; // quick retries left while the server restarts
  let resumeFrom: string | null = options.since ?? null;
  let lastSeq: number | null = null; // of the last message applied: a repeat has no greater one
  let building: Omit<Snapshot, "position"> | null = null;
  let socket: WebSocketLike | null = null;
  let closed = false;
  let timer: ReturnType<typeof setTimeout> | null = null;

  const handle = (message: Message): void => {
    if (isSnapshotRecord(message)) {
      building ??= { bounties: [], submissions: [], disputes: [], seq: message.seq };
      if (message.type === "bounty.created") building.bounties.push(message.payload);
      else if (message.type === "submission.created") building.submissions.push(message.payload);
      else if (message.type === "dispute.created") building.disputes.push(message.payload);
      resumeFrom = null; // incomplete until snapshot.complete
      lastSeq = null;
    } else if (message.type === "snapshot.complete") {
      const snapshot = building ?? { bounties: [], submissions: [], disputes: [], seq: message.seq };
      building = null;
      // The snapshot may be of another history, whose seqs run lower: what it says replaces all.
      resumeFrom = message.position;
      lastSeq = message.seq;
      handlers.onSnapshot?.({ ...snapshot, seq: message.seq, position: message.position });
    } else if (message.type === "resync") {
      building = null; // a new snapshot follows on this connection
      resumeFrom = null;
      lastSeq = null;
    } else if (lastSeq === null || message.seq > lastSeq) {
      resumeFrom = message.position;
      lastSeq = message.seq;
      handlers.onEvent?.(message);
    }
  };

  const connect = (): void => {
    timer = null;
    building = null;
    const ws = new Socket(resumeFrom === null ? url : `${url}?since=${encodeURIComponent(resumeFrom)}`);
    socket = ws;
    ws.onmessage = (event) => {
      failures = 0;
      restartTaken = false;
      restartTriesLeft = 0;
      let message: Message;
      try {
        message = JSON.parse(String(event.data)) as Message;
      } catch (error) {
        handlers.onError?.(error);
        ws.close(4000); // resume from the last message applied, on a new connection
        return;
      }
      try {
        handle(message);
      } catch (error) {
        // A handler's failure must not end the watch; the message counts as delivered.
        if (handlers.onError) handlers.onError(error);
        else setTimeout(() => { throw error; });
      }
    };
    ws.onerror = () => undefined; // a close follows
    ws.onclose = (event) => {
      if (socket !== ws) return;
      socket = null;
      if (closed) return;
      let delayMs: number;
      if ((event.code === 1012 || event.code === 1001) && !restartTaken) {
        restartTaken = true;
        restartTriesLeft = restartTries;
        delayMs = random() * restartWindow;
      } else if (event.code === 1006 && restartTriesLeft > 0) {
        restartTriesLeft -= 1;
        delayMs = restartWindow / 2 + random() * (restartWindow / 2);
      } else {
        restartTriesLeft = 0; // the tries are used up, or a close frame says the server is up
        const limited = event.code === 1008 || event.code === 1013;
        const ceiling = Math.min(firstDelay * 2 ** Math.min(failures, 30) * (limited ? 5 : 1), maxDelay);
        delayMs = ceiling / 2 + random() * (ceiling / 2);
        failures += 1;
      }
      handlers.onDisconnect?.(event.code, delayMs);
      timer = setTimeout(connect, delayMs);
    };
  };
  connect();

  return {
    get resumeFrom() {
      return resumeFrom;
    },
    close() {
      closed = true;
      if (timer !== null) clearTimeout(timer);
      socket?.close(1000);
      socket = null;
    },
  };
}
