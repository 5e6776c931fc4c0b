/**
 * The read client: every route of the service, qualified with the active deployment by default.
 *
 * Every request but `/health` carries `chain_id` and `contract_address`: those given, or else the
 * active deployment's, read once from `/health`. `qualify: false` sends none (lists then span
 * every indexed deployment). A non-OK answer throws RequestError (`request failed: <status>`).
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
import { toAddress, toUint, type UintInput, ValidationError } from "./validation.js";

export const MAX_PAGE_SIZE = 100;

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
  deployment(): Promise<{ chainId: number; contractAddress: string; usdcAddress: string }>;
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

function isPage(body: unknown): body is Page<unknown> {
  return typeof body === "object" && body !== null && Array.isArray((body as Page<unknown>).items);
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
  let active: { chainId: number; contractAddress: string; usdcAddress: string } | null = null;

  async function get<T>(path: string, params: Params): Promise<T> {
    const query = new URLSearchParams(params).toString();
    const url = `${base}${path}${query ? `?${query}` : ""}`;
    const response = await fetcher(url, { headers: { Accept: "application/json" } });
    if (!response.ok) {
      let detail: string | null = null;
      try {
        const body = (await response.json()) as { detail?: unknown };
        detail = typeof body.detail === "string" ? body.detail : null;
      } catch {
        // not JSON: no detail
      }
      throw new RequestError(response.status, detail, url);
    }
    return (await response.json()) as T;
  }

  async function deployment(): Promise<{ chainId: number; contractAddress: string; usdcAddress: string }> {
    if (active === null) {
      const { deployment: d } = await get<Health>("/health", {});
      if (!d || d.contract_address == null || d.usdc_address == null) {
        throw new Error("the service reports no active deployment (its /health has no contract and token addresses)");
      }
      if (!Number.isSafeInteger(d.chain_id) || d.chain_id < 1) throw new Error(`the service reports chain ID ${d.chain_id}`);
      active = { chainId: d.chain_id, contractAddress: toAddress(d.contract_address), usdcAddress: toAddress(d.usdc_address) };
    }
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
    let body = await get<T[] | Page<T>>(path, params);
    while (isPage(body)) {
      yield* body.items as T[];
      const next: unknown = body.next_cursor;
      if (next === null || next === undefined) return;
      if (typeof next !== "string" || next === params.cursor) throw new Error(`GET ${path}: a page's next_cursor is not a new cursor`);
      params = { ...params, cursor: next };
      body = await get<T[] | Page<T>>(path, params);
    }
    if (!Array.isArray(body)) throw new Error(`GET ${path}: expected an array or a page object`);
    yield* body;
  }

  async function page<T>(path: string, params: Params): Promise<Page<T>> {
    const body = await get<unknown>(path, params);
    if (!isPage(body)) throw new Error(`GET ${path}: expected a page object`);
    return body as Page<T>;
  }

  async function all<T>(iterator: AsyncIterableIterator<T>): Promise<T[]> {
    const items: T[] = [];
    for await (const item of iterator) items.push(item);
    return items;
  }

  const record = async <T>(path: string, id: UintInput, suffix = ""): Promise<T> =>
    get<T>(`${path}/${toUint(id).toString()}${suffix}`, await qualified());

  return {
    health: () => get<Health>("/health", {}),
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
