// The browser bundle as an application's bundler makes it (scripts/bundle.mjs, esbuild through
// package.json's "exports" into dist/): importing only the transaction builder must leave the read
// client, the websocket helper and the wallet out, or `npm run size`'s first figure is a lie.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

interface Bundled {
  code: string;
  minified: number;
  gzipped: number;
  inputs: string[];
}
type Bundle = (source: string, options?: { external?: string[] }) => Promise<Bundled>;

// From build/test/ (where tsc puts this file) to the package's scripts/.
const script = new URL("../../scripts/bundle.mjs", import.meta.url).href;
const { bundle } = (await import(script)) as { bundle: Bundle };

const BUILDER_ONLY = 'export { createTransactionBuilder } from "bounty-client/transactions";';
const EVERYTHING = 'export * from "bounty-client";';
const OWN = (bundled: Bundled) => bundled.inputs.filter((input) => input.startsWith("dist/")).sort();

describe("the browser bundle", () => {
  it("of the transaction builder alone holds no read client, websocket helper or wallet", async () => {
    const builderOnly = await bundle(BUILDER_ONLY);
    assert.deepEqual(OWN(builderOnly), ["dist/transactions.js", "dist/validation.js"]);
    for (const text of ["request failed", "WebSocket", "eth_sendTransaction"]) {
      assert.ok(!builderOnly.code.includes(text), `the builder-only bundle contains ${text}`);
    }

    const everything = await bundle(EVERYTHING);
    assert.ok(OWN(everything).includes("dist/read.js") && OWN(everything).includes("dist/events.js"));
    for (const text of ["request failed", "WebSocket", "eth_sendTransaction"]) assert.ok(everything.code.includes(text), text);
    assert.ok(builderOnly.gzipped < everything.gzipped);
  });

  it("leaves viem out when told to, for the library's own figure", async () => {
    const alone = await bundle(EVERYTHING, { external: ["viem"] });
    assert.ok(alone.inputs.every((input) => !input.includes("node_modules/")), alone.inputs.join(", "));
    assert.match(alone.code, /from\s*"viem"/);
  });
});
