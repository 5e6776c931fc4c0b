// Runs the Vite build's entry chunk (argv[2]) in Node against a stand-in for its page, and prints
// what it wrote into the page's #approval.
import { pathToFileURL } from "node:url";

const approval = { textContent: "" };
globalThis.document = {
  querySelector: (selector) => (selector === "#approval" ? approval : null),
  // Vite's modulepreload polyfill asks this first, and stops when the "browser" has the feature.
  createElement: () => ({ relList: { supports: () => true } }),
};
await import(pathToFileURL(process.argv[2]).href);
console.log(approval.textContent);
