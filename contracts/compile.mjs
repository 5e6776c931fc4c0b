// Compiles contracts/src/*.sol with the pinned solcjs and writes one artifact per contract
// (ABI, creation bytecode, runtime bytecode, compiler version) to contracts/artifacts/, or to
// the folder given with --out. The artifacts are committed so the service never needs a
// compiler; tests/contracts/test_artifacts.py recompiles and fails when they differ.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import solc from "solc";

const here = path.dirname(fileURLToPath(import.meta.url));
const srcDir = path.join(here, "src");
const outFlag = process.argv.indexOf("--out");
const outDir = outFlag === -1 ? path.join(here, "artifacts") : path.resolve(process.argv[outFlag + 1]);

const sources = {};
for (const file of fs.readdirSync(srcDir).filter((f) => f.endsWith(".sol")).sort()) {
  sources[file] = { content: fs.readFileSync(path.join(srcDir, file), "utf8") };
}

const input = {
  language: "Solidity",
  sources,
  settings: {
    optimizer: { enabled: true, runs: 200 },
    evmVersion: "cancun",
    viaIR: true,
    metadata: { bytecodeHash: "none" },
    outputSelection: { "*": { "*": ["abi", "evm.bytecode.object", "evm.deployedBytecode.object"] } },
  },
};

const output = JSON.parse(solc.compile(JSON.stringify(input)));
const errors = (output.errors || []).filter((e) => e.severity === "error");
for (const message of output.errors || []) console.error(message.formattedMessage);
if (errors.length > 0) process.exit(1);

fs.mkdirSync(outDir, { recursive: true });
for (const [file, contracts] of Object.entries(output.contracts)) {
  for (const [name, contract] of Object.entries(contracts)) {
    if (contract.evm.bytecode.object === "") continue; // interfaces
    const artifact = {
      contractName: name,
      sourceName: file,
      compiler: `solc ${solc.version()}`,
      abi: contract.abi,
      bytecode: "0x" + contract.evm.bytecode.object,
      deployedBytecode: "0x" + contract.evm.deployedBytecode.object,
    };
    fs.writeFileSync(path.join(outDir, `${name}.json`), JSON.stringify(artifact, null, 2) + "\n");
    console.log(`wrote ${path.relative(process.cwd(), path.join(outDir, name + ".json"))}`);
  }
}
