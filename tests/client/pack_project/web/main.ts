// A browser app's entry: it shows the USDC approval that tests/client/test_npm_pack.py expects
// (its AMOUNT, for the deployment of tests/client/conftest.py).
import { createTransactionBuilder } from "bounty-client/transactions";

const builder = createTransactionBuilder({
  chainId: 91342,
  contractAddress: "0x5FbDB2315678afecb367f032d93F642f64180aa3",
  usdcAddress: "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512",
});
document.querySelector("#approval")!.textContent = JSON.stringify(builder.approveUsdc(25_625_000n));
