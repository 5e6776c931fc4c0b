/** The service's records, as its API and websocket give them (docs/api.md, Records). */

/** Amounts are decimal strings (exact up to 2^256-1), times RFC 3339 UTC, addresses EIP-55. */
interface RecordBase {
  id: number;
  chain_id: number;
  contract_address: string;
  metadata_uri: string;
  metadata_hash: string;
  bond_amount: string;
  tx_hash: string;
  block_number: number;
  log_index: number;
  created_at: string;
}

export interface Bounty extends RecordBase {
  prompt: string;
  bounty_amount: string;
  fee_amount: string;
  duration: number;
  status: "open" | "resolved" | "refunded";
  poster: string;
  deadline: string;
  challenge_window: number;
  /** Only on page rows and in overviews. */
  submission_count?: number;
}

export interface Submission extends RecordBase {
  bounty_id: number;
  tile_id: string;
  content: string;
  review_deadline: string;
  status: "submitted" | "disputed" | "accepted" | "rejected" | "refunded";
  claimant: string;
  /** Only on page rows and in overviews. */
  dispute_count?: number;
}

export interface Dispute extends RecordBase {
  bounty_id: number;
  submission_id: number;
  challenger_id: string;
  reason: string;
  status: "pending_human_review" | "upheld" | "rejected" | "cancelled";
}

export interface Page<T> {
  items: T[];
  total: number;
  limit: number;
  cursor: string | null;
  next_cursor: string | null;
}

export interface BountyOverview {
  bounty: Bounty;
  submissions: Submission[];
  disputes: Dispute[];
}

export interface SubmissionOverview {
  submission: Submission;
  bounty: Bounty;
  disputes: Dispute[];
}

export interface DisputeOverview {
  dispute: Dispute;
  submission: Submission;
  bounty: Bounty;
  sibling_disputes: Dispute[];
}

export interface Health {
  status: "ok" | "degraded" | "error";
  version: string;
  deployment: { chain_id: number; contract_address: string | null; usdc_address: string | null };
  indexer: {
    enabled: boolean;
    running: boolean;
    synced: boolean;
    last_indexed_block: number | null;
    head_block: number | null;
    lag_blocks: number | null;
    confirmations: number;
    last_heartbeat: string | null;
    indexes: "ready" | "deferred" | "building";
    backfill: { from_block: number; to_block: number; done_blocks: number; total_blocks: number; percent: number } | null;
    processes: { name: string; role: "writer" | "standby"; last_seen: string }[];
  };
}
