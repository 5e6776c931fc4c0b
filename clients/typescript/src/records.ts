/**
 * The service's records and answers, as its API and websocket give them (docs/api.md, Records).
 *
 * Every type here is an alias of one generated from the service's OpenAPI schema:
 * `clients/openapi.json`, turned into `./generated/openapi.ts` by `npm run generate`
 * (openapi-typescript). Nothing is declared by hand, so the types cannot drift from the schema.
 *
 * Amounts are decimal strings (exact up to 2^256-1), times RFC 3339 UTC, addresses EIP-55.
 */
import type { components } from "./generated/openapi.js";

type Schemas = components["schemas"];

/** A bounty; `submission_count` is there on page rows and in overviews. */
export type Bounty = Schemas["Bounty"] & Partial<Pick<Schemas["BountyRow"], "submission_count">>;
/** A bounty as page rows and overviews give it, with `submission_count`. */
export type BountyRow = Schemas["BountyRow"];

/** A submission; `dispute_count` is there on page rows and in overviews. */
export type Submission = Schemas["Submission"] & Partial<Pick<Schemas["SubmissionRow"], "dispute_count">>;
/** A submission as page rows and overviews give it, with `dispute_count`. */
export type SubmissionRow = Schemas["SubmissionRow"];

/** A dispute against a submission. */
export type Dispute = Schemas["Dispute"];

/** A page of a list: `cursor` is the offset it was read from (null when none was sent), `next_cursor` null on the last page. */
export type Page<T> = Omit<Schemas["BountyPage"], "items"> & { items: T[] };

/** `/bounties/{id}/overview`. */
export type BountyOverview = Schemas["BountyOverview"];
/** `/submissions/{id}/overview`: `bounty` is null when the service's mirror lacks it (never on a consistent mirror). */
export type SubmissionOverview = Schemas["SubmissionOverview"];
/** `/disputes/{id}/overview`: `submission` and `bounty` are null when the service's mirror lacks them. */
export type DisputeOverview = Schemas["DisputeOverview"];

/** `/health`: the service's status and version, its active deployment, its indexer's state. */
export type Health = Schemas["Health"];

/** The one error body of the service, `{"detail": "<message>"}`. */
export type ErrorBody = Schemas["Error"];
