/** bounty-client: the client of the bounty read service, for browsers and Node 20. */
export { createTransactionBuilder, BOUNTY_ABI, USDC_ABI } from "./transactions.js";
export type {
  CreateBountyInput,
  DisputeInput,
  SubmitInput,
  TransactionBuilder,
  TransactionBuilderConfig,
  UnsignedTransaction,
} from "./transactions.js";
export {
  canonicalJson,
  metadataHash,
  metadataToDataUri,
  parseMetadataUri,
  DATA_URI_PREFIX,
  MAX_INLINE_JSON_BYTES,
  MAX_INLINE_JSON_DEPTH,
} from "./metadata.js";
export type { JsonValue } from "./metadata.js";
export { quoteCreateAmount, BPS_DENOMINATOR } from "./quote.js";
export type { CreateQuote, QuoteConfig } from "./quote.js";
export {
  ConfigurationError,
  createReadClient,
  deploymentFromHealth,
  MAX_CHAIN_ID,
  MAX_PAGE_SIZE,
  RequestError,
  ResponseError,
} from "./read.js";
export type { ActiveDeployment, ByBounty, ListOptions, PageOptions, ReadClient, ReadClientOptions } from "./read.js";
export { connectWallet, WalletError } from "./wallet.js";
export type { Eip1193Provider, TransactionReceipt, Wallet, WalletErrorReason, WalletOptions } from "./wallet.js";
export { eventsUrl, watchEvents } from "./events.js";
export type { LiveEvent, LiveType, Snapshot, Watch, WatchHandlers, WatchOptions, WebSocketConstructor, WebSocketLike } from "./events.js";
export type * from "./records.js";
export {
  INVALID_ADDRESS,
  INVALID_BYTES32,
  UNSAFE_UINT,
  ValidationError,
  toAddress,
  toBytes32,
  toUint,
  uintOutOfRange,
} from "./validation.js";
export type { Bytes32Input, Hex, UintInput } from "./validation.js";
/** This package's version; test/version.test.ts holds it equal to package.json's. */
export const VERSION = "0.2.0";
