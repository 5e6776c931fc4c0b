// The package's version has one place, package.json; VERSION and the README's title follow it.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";

import { VERSION } from "../src/index.js";

const read = (name: string): string => readFileSync(new URL(`../../${name}`, import.meta.url), "utf-8");

describe("VERSION", () => {
  it("is package.json's version, as the README's title says", () => {
    const { version } = JSON.parse(read("package.json")) as { version: string };
    assert.equal(VERSION, version);
    assert.equal(read("README.md").split("\n")[0], `# bounty-client (TypeScript) ${version}`);
  });
});
