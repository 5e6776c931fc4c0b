// Builds the library for browsers: one ES module, minified, with viem inside, written to
// build/browser/bounty-client.js (and its source map). It bundles the package as an application
// imports it, through package.json's "exports" (so dist/, from `npm run build`, must be current:
// `npm run bundle` builds it first). scripts/size.mjs measures with the same settings.
import { mkdirSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";

import { build } from "esbuild";

const PACKAGE_DIR = fileURLToPath(new URL("..", import.meta.url));
const BUNDLE = fileURLToPath(new URL("../build/browser/bounty-client.js", import.meta.url));

/**
 * Bundles `source` (the text of an ES module importing from "bounty-client") for browsers, as a
 * bundler building an application for production does: tree-shaken and minified. `external`
 * leaves those packages out (["viem"]: the library alone). Returns the code, its size minified
 * and gzipped, and the bundled files (paths relative to the package).
 */
export async function bundle(source, { external = [], sourcemap = false } = {}) {
  const result = await build({
    stdin: { contents: source, resolveDir: PACKAGE_DIR, sourcefile: "entry.js", loader: "js" },
    bundle: true,
    format: "esm",
    platform: "browser",
    target: "es2022",
    minify: true,
    external: external.flatMap((name) => [name, `${name}/*`]),
    sourcemap: sourcemap ? "linked" : false,
    outfile: BUNDLE,
    metafile: true,
    write: false,
    logLevel: "warning",
  });
  const code = result.outputFiles.find((file) => file.path.endsWith(".js"));
  const map = result.outputFiles.find((file) => file.path.endsWith(".js.map"));
  return {
    code: code.text,
    map: map?.text,
    minified: code.contents.byteLength,
    gzipped: gzipSync(code.contents, { level: 9 }).byteLength,
    inputs: Object.keys(result.metafile.inputs),
  };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { code, map, minified, gzipped } = await bundle('export * from "bounty-client";', { sourcemap: true });
  mkdirSync(fileURLToPath(new URL("../build/browser/", import.meta.url)), { recursive: true });
  writeFileSync(BUNDLE, code);
  writeFileSync(`${BUNDLE}.map`, map);
  console.log(`${BUNDLE}: ${minified} bytes minified, ${gzipped} gzipped`);
}
