// A Node user of the packed bounty-client: every export of its package.json imports, and the root
// and the transactions subpath build the approval of the deployment and amount given as JSON in
// argv[2]. Prints what it found as JSON.
import { readFile } from "node:fs/promises";
import * as root from "bounty-client";
import { createTransactionBuilder } from "bounty-client/transactions";

const { deployment, amount } = JSON.parse(process.argv[2]);
const manifest = JSON.parse(await readFile(new URL(import.meta.resolve("bounty-client/package.json")), "utf8"));
const exportsOf = {};
for (const subpath of Object.keys(manifest.exports).filter((key) => key !== "./package.json")) {
  exportsOf[subpath] = Object.keys(await import(subpath === "." ? "bounty-client" : `bounty-client/${subpath.slice(2)}`));
}
console.log(JSON.stringify({
  version: root.VERSION,
  exportsOf,
  sameModule: root.createTransactionBuilder === createTransactionBuilder,
  approval: createTransactionBuilder(deployment).approveUsdc(BigInt(amount)),
}));
