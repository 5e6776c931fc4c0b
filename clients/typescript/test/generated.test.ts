// The record types come from the service's OpenAPI schema: `npm run generate` (openapi-typescript)
// turns clients/openapi.json into src/generated/openapi.ts. Run again into a temporary file, it must
// give the committed file byte for byte; when the schema changes, `npm run generate` and commit.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";

const CLIENT = fileURLToPath(new URL("../../", import.meta.url));

describe("src/generated/openapi.ts", () => {
  it("is what `npm run generate` makes of clients/openapi.json now", () => {
    const { scripts } = JSON.parse(readFileSync(join(CLIENT, "package.json"), "utf-8")) as { scripts: Record<string, string> };
    const [command, ...args] = (scripts.generate ?? "").split(" ");
    const output = args.indexOf("--output") + 1;
    assert.ok(command === "openapi-typescript" && output > 0, `the generate script: ${scripts.generate}`);
    const committed = args[output] as string;
    const scratch = mkdtempSync(join(tmpdir(), "bounty-client-generate-"));
    try {
      args[output] = join(scratch, "openapi.ts");
      execFileSync(join(CLIENT, "node_modules", ".bin", command), args, { cwd: CLIENT, stdio: "pipe" });
      assert.ok(
        readFileSync(join(scratch, "openapi.ts"), "utf-8") === readFileSync(join(CLIENT, committed), "utf-8"),
        `${committed} is stale against clients/openapi.json: run \`npm run generate\` in clients/typescript`,
      );
    } finally {
      rmSync(scratch, { recursive: true, force: true });
    }
  });
});
