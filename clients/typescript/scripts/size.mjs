// Prints what the library adds to an application's browser bundle, minified and gzipped: for an
// application that imports only the transaction builder (tree-shaken), and for one that imports
// everything, each with viem's share apart (the library alone is the bundle with viem left out).
// dist/ must be current: `npm run size` builds it first.
import { readFileSync } from "node:fs";

import { version as esbuildVersion } from "esbuild";

import { bundle } from "./bundle.mjs";

const ENTRIES = {
  "the transaction builder only": 'export { createTransactionBuilder } from "bounty-client/transactions";',
  "everything": 'export * from "bounty-client";',
};

const viem = JSON.parse(readFileSync(new URL("../node_modules/viem/package.json", import.meta.url), "utf8")).version;
const kB = (bytes) => `${(bytes / 1000).toFixed(1)} kB`.padStart(10);

console.log(`esbuild ${esbuildVersion} (ES2022, minified), gzip -9; viem ${viem}`);
console.log(`${"".padEnd(34)}${"minified".padStart(10)}${"gzipped".padStart(10)}`);
for (const [name, source] of Object.entries(ENTRIES)) {
  const all = await bundle(source);
  const alone = await bundle(source, { external: ["viem"] });
  console.log(name);
  console.log(`  ${"the library alone".padEnd(32)}${kB(alone.minified)}${kB(alone.gzipped)}`);
  console.log(`  ${"viem's share".padEnd(32)}${kB(all.minified - alone.minified)}${kB(all.gzipped - alone.gzipped)}`);
  console.log(`  ${"in all".padEnd(32)}${kB(all.minified)}${kB(all.gzipped)}`);
}
