/** How the board shows amounts, addresses, times and metadata, and how it reads an amount typed in. */
import { parseMetadataUri } from "bounty-client";

/** USDC has 6 decimals: amounts on chain and in the API are integers of 10^-6 USDC. */
const USDC_DECIMALS = 6;
const UNIT = 10n ** BigInt(USDC_DECIMALS);

/** "1,234.5 USDC" for 1234500000 base units (at least two decimals only when there is a fraction). */
export function usdc(amount: bigint | string): string {
  const value = BigInt(amount);
  const whole = (value / UNIT).toLocaleString("en-US");
  const fraction = (value % UNIT).toString().padStart(USDC_DECIMALS, "0").replace(/0+$/, "");
  return `${whole}${fraction ? `.${fraction.padEnd(2, "0")}` : ""} USDC`;
}

/** The base units of a USDC amount typed by a person ("100", "0.5", "1,000.25"); null if it is not one. */
export function parseUsdc(text: string): bigint | null {
  const match = /^(\d+)(?:\.(\d{0,6}))?$/.exec(text.trim().replaceAll(",", ""));
  if (match === null) return null;
  const [, whole = "0", fraction = ""] = match;
  return BigInt(whole) * UNIT + BigInt(fraction.padEnd(USDC_DECIMALS, "0"));
}

/** 0x7099…79C8 */
export function shortAddress(address: string): string {
  return `${address.slice(0, 6)}…${address.slice(-4)}`;
}

const relative = new Intl.RelativeTimeFormat("en", { numeric: "auto" });
const STEPS: [Intl.RelativeTimeFormatUnit, number][] = [
  ["year", 365 * 86_400], ["month", 30 * 86_400], ["day", 86_400], ["hour", 3_600], ["minute", 60],
];

/** "in 3 days", "2 hours ago", "now". */
export function fromNow(time: string, now = Date.now()): string {
  const seconds = (Date.parse(time) - now) / 1000;
  for (const [unit, size] of STEPS) {
    if (Math.abs(seconds) >= size) return relative.format(Math.trunc(seconds / size), unit);
  }
  return "now";
}

export function isPast(time: string, now = Date.now()): boolean {
  return Date.parse(time) < now;
}

/** "7 days", "1 day", "36 hours": a bounty's duration in seconds. */
export function duration(seconds: number): string {
  const [count, unit] = seconds % 86_400 === 0 ? [seconds / 86_400, "day"] : [Math.round(seconds / 3_600), "hour"];
  return `${count} ${unit}${count === 1 ? "" : "s"}`;
}

/** The fields of a record's inline metadata that the board shows. */
export interface Described {
  title: string | null;
  text: string | null;
  link: string | null;
}

/**
 * What a record's metadata says about it. Only inline `data:` metadata can be read here (an
 * `ipfs://` URI needs a gateway); anything else, or metadata of another shape, gives nulls, and
 * the board falls back to the record's ID. A link is kept only when it is http(s), so that
 * metadata, which anyone may write, cannot slip a `javascript:` URL into the page.
 */
export function describe(metadataUri: string): Described {
  const value = parseMetadataUri(metadataUri);
  const fields = typeof value === "object" && value !== null ? (value as Record<string, unknown>) : {};
  const text = (name: string): string | null => {
    const field = fields[name];
    return typeof field === "string" && field.trim() !== "" ? field : null;
  };
  const link = text("link");
  return {
    title: text("title"),
    text: text("description") ?? text("summary") ?? text("reason"),
    link: link !== null && /^https?:\/\//i.test(link) ? link : null,
  };
}
