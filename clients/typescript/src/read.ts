/**
 * The read client: every route of the service, qualified with the active deployment by default.
 *
 * Every request but `/health` carries `chain_id` and `contract_address`: those given, or else the
 * active deployment's, read once from `/health`. `qualify: false` sends none (lists then span
 * every indexed deployment). A non-OK answer throws RequestError (`request failed: <status>`), a
 * body of the wrong shape ResponseError, a `/health` that names no usable deployment
 * ConfigurationError. The Python client follows the same rules, with the same messages: both are
 * held to the `read` vectors of clients/test-vectors.json.
 */
import type {
  Bounty,
  BountyOverview,
  Dispute,
  DisputeOverview,
  Health,
  Page,
  Submission,
  SubmissionOverview,
} from "./records.js";
import { type Hex, toAddress, toUint, type UintInput, ValidationError } from "./validation.js";

export const MAX_PAGE_SIZE = 100;
/** The largest chain ID a `/health` body may name: the largest integer a number holds exactly. */
export const MAX_CHAIN_ID = Number.MAX_SAFE_INTEGER;

/** A non-OK answer: `status`, the service's `detail` (when its body has one) and the `url`. */
export class RequestError extends Error {
  constructor(
    readonly status: number,
    readonly detail: string | null,
    readonly url: string,
  ) {
    super(`request failed: ${status}`);
    this.name = "RequestError";
  }
}

/** The service answered OK with a body not of the shape its API gives (`GET <path>: expected …`). */
export class ResponseError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ResponseError";
  }
}

/** The service's `/health` names no deployment this client can use. */
export class ConfigurationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ConfigurationError";
  }
}

/** A deployment, as `deployment()` gives it and `createTransactionBuilder` takes it. */
export interface ActiveDeployment {
  chainId: number;
  contractAddress: Hex;
  usdcAddress: Hex;
}

const INVALID_DEPLOYMENT = "the /health body has an invalid deployment";

/**
 * The deployment in a `/health` body. Throws ConfigurationError when the body has no deployment
 * object, when either address is missing or null (the service has no active deployment), when
 * `chain_id` is not an integer from 1 to 2^53-1, or when an address is malformed.
 */
export function deploymentFromHealth(body: unknown): ActiveDeployment {
  const section = isObject(body) ? body.deployment : undefined;
  if (!isObject(section)) throw new ConfigurationError("the /health body has no deployment object");
  const { chain_id: chainId, contract_address: contractAddress, usdc_address: usdcAddress } = section;
  if (contractAddress == null || usdcAddress == null) {
    throw new ConfigurationError("the /health body names no active deployment (contract_address or usdc_address is null)");
  }
  if (typeof chainId !== "number" || !Number.isInteger(chainId) || chainId < 1 || chainId > MAX_CHAIN_ID) {
    throw new ConfigurationError(`${INVALID_DEPLOYMENT}: chain_id must be an integer from 1 to 2^53-1`);
  }
  try {
    return { chainId, contractAddress: toAddress(contractAddress), usdcAddress: toAddress(usdcAddress) };
  } catch (error) {
    if (error instanceof ValidationError) throw new ConfigurationError(`${INVALID_DEPLOYMENT}: ${error.message}`);
    throw error;
  }
}

export interface ReadClientOptions {
  /** The service, for example `https://bounties.example.org`. */
  baseUrl: string;
  /** The deployment to qualify with; by default the active one, from `/health`. */
  deployment?: { chainId: UintInput; contractAddress: string };
  /** false: send no deployment. */
  qualify?: boolean;
  /** The fetch to use (the global one by default). */
  fetch?: typeof fetch;
}

export interface ListOptions {
  q?: string;
  sort?: string;
  dir?: "asc" | "desc";
}

export interface PageOptions extends ListOptions {
  limit?: number;
  cursor?: string | null;
}

export interface ByBounty {
  bountyId?: UintInput;
}

export interface ReadClient {
  health(): Promise<Health>;
  /** The active deployment (from `/health`, read once). */
  deployment(): Promise<ActiveDeployment>;
  listBounties(options?: ListOptions): Promise<Bounty[]>;
  bountyPage(options?: PageOptions): Promise<Page<Bounty>>;
  bounties(options?: ListOptions & { pageSize?: number }): AsyncIterableIterator<Bounty>;
  getBounty(bountyId: UintInput): Promise<Bounty>;
  bountyOverview(bountyId: UintInput): Promise<BountyOverview>;
  listSubmissions(bountyId?: UintInput | null, options?: ListOptions): Promise<Submission[]>;
  submissionPage(bountyId?: UintInput | null, options?: PageOptions): Promise<Page<Submission>>;
  submissions(bountyId?: UintInput | null, options?: ListOptions & { pageSize?: number }): AsyncIterableIterator<Submission>;
  getSubmission(submissionId: UintInput): Promise<Submission>;
  submissionOverview(submissionId: UintInput): Promise<SubmissionOverview>;
  /** The disputes of one submission (`submissionId`), of one bounty (`options.bountyId`), or all. */
  listDisputes(submissionId?: UintInput | null, options?: ListOptions & ByBounty): Promise<Dispute[]>;
  disputePage(submissionId?: UintInput | null, options?: PageOptions & ByBounty): Promise<Page<Dispute>>;
  disputes(submissionId?: UintInput | null, options?: ListOptions & ByBounty & { pageSize?: number }): AsyncIterableIterator<Dispute>;
  getDispute(disputeId: UintInput): Promise<Dispute>;
  disputeOverview(disputeId: UintInput): Promise<DisputeOverview>;
}

type Params = Record<string, string>;

function isObject(body: unknown): body is Record<string, unknown> {
  return typeof body === "object" && body !== null && !Array.isArray(body);
}

/** A page object: `items` an array, `next_cursor` a string or null. */
function isPage(body: unknown): body is Page<unknown> {
  return isObject(body) && Array.isArray(body.items) && (body.next_cursor == null || typeof body.next_cursor === "string");
}

export function createReadClient(options: ReadClientOptions): ReadClient {
  const base = options.baseUrl.replace(/\/+$/, "");
  const fetcher = options.fetch ?? globalThis.fetch.bind(globalThis);
  const qualify = options.qualify ?? true;
  let qualifier: Params | null = options.deployment
    ? {
        chain_id: toUint(options.deployment.chainId, 64).toString(),
        contract_address: toAddress(options.deployment.contractAddress),
      }
    : null;
  let active: ActiveDeployment | null = null;

  async function get(path: string, params: Params): Promise<unknown> {
    const query = new URLSearchParams(params).toString();
    const url = `${base}${path}${query ? `?${query}` : ""}`;
    const response = await fetcher(url, { headers: { Accept: "application/json" } });
    const text = await response.text();
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      if (response.ok) throw new ResponseError(`GET ${path}: the body is not JSON`);
      body = undefined; // an error page (a proxy's HTML, say): no detail
    }
    if (!response.ok) {
      const detail = isObject(body) && typeof body.detail === "string" ? body.detail : null;
      throw new RequestError(response.status, detail, url);
    }
    return body;
  }

  /** A body that must be a JSON object (a record, an overview, `/health`). */
  async function object<T>(path: string, params: Params): Promise<T> {
    const body = await get(path, params);
    if (!isObject(body)) throw new ResponseError(`GET ${path}: expected a JSON object`);
    return body as T;
  }

  async function deployment(): Promise<ActiveDeployment> {
    active ??= deploymentFromHealth(await object<Health>("/health", {}));
    return active;
  }

  async function qualified(params: Params = {}): Promise<Params> {
    if (!qualify) return params;
    if (qualifier === null) {
      const d = await deployment();
      qualifier = { chain_id: String(d.chainId), contract_address: d.contractAddress };
    }
    return { ...qualifier, ...params };
  }

  function listParams(options: PageOptions = {}, parents: Params = {}): Params {
    const params: Params = { ...parents };
    if (options.limit !== undefined) {
      if (!Number.isInteger(options.limit) || options.limit < 1 || options.limit > MAX_PAGE_SIZE) {
        throw new ValidationError(`limit must be an integer from 1 to ${MAX_PAGE_SIZE}`);
      }
      params.limit = String(options.limit);
    }
    if (options.cursor != null) params.cursor = options.cursor;
    if (options.q !== undefined) params.q = options.q;
    if (options.sort !== undefined) params.sort = options.sort;
    if (options.dir !== undefined) params.dir = options.dir;
    return params;
  }

  function parent(name: string, value: UintInput | null | undefined): Params {
    return value === null || value === undefined ? {} : { [name]: toUint(value).toString() };
  }

  function disputeParents(submissionId: UintInput | null | undefined, options: { bountyId?: UintInput }): Params {
    return { ...parent("submission_id", submissionId), ...parent("bounty_id", options.bountyId) };
  }

  async function* walk<T>(path: string, params: Params): AsyncIterableIterator<T> {
    let body = await get(path, params);
    while (isObject(body)) {
      if (!isPage(body)) throw new ResponseError(`GET ${path}: expected an array or a page object`);
      yield* body.items as T[];
      const next = body.next_cursor;
      if (next == null) return;
      // The same cursor again would read the same page forever.
      if (next === params.cursor) throw new ResponseError(`GET ${path}: a page's next_cursor repeats the cursor it was read from`);
      params = { ...params, cursor: next };
      body = await get(path, params);
    }
    if (!Array.isArray(body)) throw new ResponseError(`GET ${path}: expected an array or a page object`);
    yield* body as T[];
  }

  async function page<T>(path: string, params: Params): Promise<Page<T>> {
    const body = await get(path, params);
    if (!isPage(body)) throw new ResponseError(`GET ${path}: expected a page object`);
    return body as Page<T>;
  }

  async function all<T>(iterator: AsyncIterableIterator<T>): Promise<T[]> {
    const items: T[] = [];
    for await (const item of iterator) items.push(item);
    return items;
  }

  const record = async <T>(path: string, id: UintInput, suffix = ""): Promise<T> =>
    object<T>(`${path}/${toUint(id).toString()}${suffix}`, await qualified());

  return {
    health: () => object<Health>("/health", {}),
    deployment,
    listBounties: async (o = {}) => all(walk<Bounty>("/bounties", await qualified(listParams(o)))),
    bountyPage: async (o = {}) => page<Bounty>("/bounties", await qualified(listParams({ ...o, limit: o.limit ?? 50 }))),
    bounties: (o = {}) => lazy(async () => walk<Bounty>("/bounties", await qualified(listParams({ limit: o.pageSize ?? MAX_PAGE_SIZE, ...o })))),
    getBounty: (id) => record<Bounty>("/bounties", id),
    bountyOverview: (id) => record<BountyOverview>("/bounties", id, "/overview"),
    listSubmissions: async (bountyId, o = {}) =>
      all(walk<Submission>("/submissions", await qualified(listParams(o, parent("bounty_id", bountyId))))),
    submissionPage: async (bountyId, o = {}) =>
      page<Submission>("/submissions", await qualified(listParams({ ...o, limit: o.limit ?? 50 }, parent("bounty_id", bountyId)))),
    submissions: (bountyId, o = {}) =>
      lazy(async () =>
        walk<Submission>("/submissions", await qualified(listParams({ limit: o.pageSize ?? MAX_PAGE_SIZE, ...o }, parent("bounty_id", bountyId)))),
      ),
    getSubmission: (id) => record<Submission>("/submissions", id),
    submissionOverview: (id) => record<SubmissionOverview>("/submissions", id, "/overview"),
    listDisputes: async (submissionId, o = {}) =>
      all(walk<Dispute>("/disputes", await qualified(listParams(o, disputeParents(submissionId, o))))),
    disputePage: async (submissionId, o = {}) =>
      page<Dispute>("/disputes", await qualified(listParams({ ...o, limit: o.limit ?? 50 }, disputeParents(submissionId, o)))),
    disputes: (submissionId, o = {}) =>
      lazy(async () =>
        walk<Dispute>("/disputes", await qualified(listParams({ limit: o.pageSize ?? MAX_PAGE_SIZE, ...o }, disputeParents(submissionId, o)))),
      ),
    getDispute: (id) => record<Dispute>("/disputes", id),
    disputeOverview: (id) => record<DisputeOverview>("/disputes", id, "/overview"),
  };
}

/** An async iterator that starts its work on the first `next()`. */
function lazy<T>(start: () => Promise<AsyncIterableIterator<T>>): AsyncIterableIterator<T> {
  let inner: Promise<AsyncIterableIterator<T>> | null = null;
  const iterator: AsyncIterableIterator<T> = {
    next: async () => (await (inner ??= start())).next(),
    return: async (value?: unknown) => {
      if (inner === null) return { done: true, value: undefined };
      const started = await inner;
      return started.return ? started.return(value) : { done: true, value: undefined };
    },
    [Symbol.asyncIterator]: () => iterator,
  };
  return iterator;
}
