// What the shared vectors do not hold: the builder's own configuration.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { createTransactionBuilder, ValidationError } from "../src/index.js";

const addresses = { contractAddress: "0xe7f1725e7734ce288f8367e1bb143e90bb3f0512", usdcAddress: "0x5FbDB2315678afecb367f032d93F642f64180aa3" };

describe("createTransactionBuilder", () => {
  it("checksums the addresses it is given and keeps the chain ID a number", () => {
    const builder = createTransactionBuilder({ chainId: 91342, ...addresses });
    assert.deepEqual(builder.config, { chainId: 91342, contractAddress: "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512",
      usdcAddress: "0x5FbDB2315678afecb367f032d93F642f64180aa3" });
    assert.equal(builder.withdraw().chainId, 91342);
  });

  it("refuses a chain ID a number cannot hold and a bad address", () => {
    assert.throws(() => createTransactionBuilder({ chainId: 2 ** 53 as number, ...addresses }), new ValidationError("number must be a safe uint"));
    assert.throws(() => createTransactionBuilder({ chainId: "9007199254740992" as unknown as number, ...addresses }),
      new ValidationError("number must be a safe uint"));
    assert.throws(() => createTransactionBuilder({ chainId: 1, ...addresses, usdcAddress: "0x12" }), new ValidationError("invalid address"));
  });
});
