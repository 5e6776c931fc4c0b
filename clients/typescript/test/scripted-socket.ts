// A scripted stand-in for a WebSocket, shared by test/events.test.ts and test/vectors.test.ts: it
// records the URL it was opened with, and the test delivers messages and the close itself.
import type { WebSocketLike } from "../src/index.js";

export class ScriptedSocket implements WebSocketLike {
  static opened: ScriptedSocket[] = [];
  onopen: ((event: unknown) => void) | null = null;
  onmessage: ((event: { data: unknown }) => void) | null = null;
  onclose: ((event: { code: number }) => void) | null = null;
  onerror: ((event: unknown) => void) | null = null;
  constructor(readonly url: string) {
    ScriptedSocket.opened.push(this);
  }
  /** Delivers each message as a text frame of its JSON. */
  send(...messages: object[]): void {
    for (const message of messages) this.onmessage?.({ data: JSON.stringify(message) });
  }
  close(): void {}
}

/** Resolves after `ms` milliseconds (a reconnect's timer has run by then). */
export const later = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
