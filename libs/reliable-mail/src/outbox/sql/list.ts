import type { OutboxFeedback } from '../feedback.types.js';
import type { AttemptOutcome, OutboxAttempt, OutboxRow, OutboxRowWithAttempts } from '../mail.types.js';
import type { OutboxFilter } from '../operations.types.js';
import { whereOf } from './filter.js';
import { type SqlClient, Statement } from '../../database/sql-client.js';
import type { OutboxTables } from '../../schema/outbox-tables.js';
import { toDate, toDateOrNull } from './timestamps.js';

// Reading rows with their attempts and delivery feedback: `get`, the operators' list, and the export. One
// statement per page, the attempts and feedback of each row aggregated beside it.

type Timestamp = Date | string;

interface OutboxRecord {
  id: string;
  idempotency_key: string | null;
  message_id: string;
  status: OutboxRow['status'];
  lane: string;
  payload: OutboxRow['payload'];
  metadata: Record<string, unknown> | null;
  attempts: number;
  max_attempts: number;
  next_attempt_at: Timestamp;
  expires_at: Timestamp | null;
  cancel_requested_at: Timestamp | null;
  locked_until: Timestamp | null;
  locked_by: string | null;
  last_error: string | null;
  last_reply_code: number | null;
  last_enhanced_status: string | null;
  provider_reply: string | null;
  provider_message_id: string | null;
  provider_request_id: string | null;
  provider_accepted_at: Timestamp | null;
  accepted_recipients: string[] | null;
  rejected_recipients: OutboxRow['rejectedRecipients'];
  requeued_at: Timestamp | null;
  requeue_reason: string | null;
  created_at: Timestamp;
  sent_at: Timestamp | null;
  updated_at: Timestamp;
  attempt_log: AttemptRecord[];
  feedback: FeedbackRecord[];
}

/** An attempt as `to_jsonb` renders it: timestamps are text. */
interface AttemptRecord {
  id: string;
  attempt: number;
  worker_id: string;
  started_at: string;
  finished_at: string | null;
  outcome: AttemptOutcome;
  reply_code: number | null;
  enhanced_status: string | null;
  reply: string | null;
  duration_ms: number | null;
  recipients: OutboxAttempt['recipients'];
  provider_message_id: string | null;
  provider_request_id: string | null;
  provider_accepted_at: string | null;
  deduplicated_by_key: boolean;
  /** Absent from the attempts recorded before schema version 11. */
  transport?: string | null;
}

/** Feedback as `to_jsonb` renders it. */
interface FeedbackRecord {
  id: string;
  source: OutboxFeedback['source'];
  recipient: string;
  kind: OutboxFeedback['kind'];
  bounce_type: OutboxFeedback['bounceType'];
  provider_event_id: string;
  provider_message_id: string | null;
  status: string | null;
  diagnostic: string | null;
  reported_at: string;
  received_at: string;
  payload: Record<string, unknown>;
}

const withHistory = (t: OutboxTables) => `select o.*,
    coalesce((select jsonb_agg(to_jsonb(a) order by a.started_at, a.attempt)
              from ${t.attempt} a where a.outbox_id = o.id), '[]'::jsonb) as attempt_log,
    coalesce((select jsonb_agg(to_jsonb(f) order by f.reported_at, f.id)
              from ${t.feedback} f where f.outbox_id = o.id), '[]'::jsonb) as feedback
  from ${t.outbox} o`;

/** Rows matching the filter, newest first; `before` is the id to continue after. */
export async function listRows(
  db: SqlClient,
  filter: OutboxFilter,
  limit: number,
  before?: string,
): Promise<OutboxRowWithAttempts[]> {
  const where = whereOf(filter, 3);
  const rows = await db.query<OutboxRecord>(
    new Statement((t) => ({
      text: `${withHistory(t)} where ${where.sql} and ($2::uuid is null or o.id < $2) order by o.id desc limit $1`,
    })),
    [limit, before ?? null, ...where.values],
  );
  return rows.map(toRowWithAttempts);
}

/** Up to `limit` rows created in [from, to) after the id `after`, oldest first: one export page. */
export async function exportPage(
  db: SqlClient,
  from: Date,
  to: Date,
  limit: number,
  after?: string,
): Promise<OutboxRowWithAttempts[]> {
  const rows = await db.query<OutboxRecord>(
    new Statement((t) => ({
      text: `${withHistory(t)} where o.created_at >= $1 and o.created_at < $2 and ($3::uuid is null or o.id > $3)
             order by o.id limit $4`,
    })),
    [from, to, after ?? null, limit],
  );
  return rows.map(toRowWithAttempts);
}

function toRowWithAttempts(row: OutboxRecord): OutboxRowWithAttempts {
  return { ...toOutboxRow(row), attemptLog: row.attempt_log.map(toAttempt), feedback: row.feedback.map(toFeedback) };
}

function toOutboxRow(row: OutboxRecord): OutboxRow {
  return {
    id: row.id,
    idempotencyKey: row.idempotency_key,
    messageId: row.message_id,
    status: row.status,
    lane: row.lane,
    payload: row.payload,
    metadata: row.metadata,
    attempts: row.attempts,
    maxAttempts: row.max_attempts,
    nextAttemptAt: toDate(row.next_attempt_at),
    expiresAt: toDateOrNull(row.expires_at),
    cancelRequestedAt: toDateOrNull(row.cancel_requested_at),
    lockedUntil: toDateOrNull(row.locked_until),
    lockedBy: row.locked_by,
    lastError: row.last_error,
    lastReplyCode: row.last_reply_code,
    lastEnhancedStatus: row.last_enhanced_status,
    providerReply: row.provider_reply,
    providerMessageId: row.provider_message_id,
    providerRequestId: row.provider_request_id,
    providerAcceptedAt: toDateOrNull(row.provider_accepted_at),
    acceptedRecipients: row.accepted_recipients,
    rejectedRecipients: row.rejected_recipients,
    requeuedAt: toDateOrNull(row.requeued_at),
    requeueReason: row.requeue_reason,
    createdAt: toDate(row.created_at),
    sentAt: toDateOrNull(row.sent_at),
    updatedAt: toDate(row.updated_at),
  };
}

function toAttempt(row: AttemptRecord): OutboxAttempt {
  return {
    id: row.id,
    attempt: row.attempt,
    workerId: row.worker_id,
    startedAt: toDate(row.started_at),
    finishedAt: toDateOrNull(row.finished_at),
    outcome: row.outcome,
    replyCode: row.reply_code,
    enhancedStatus: row.enhanced_status,
    reply: row.reply,
    durationMs: row.duration_ms,
    recipients: row.recipients,
    providerMessageId: row.provider_message_id,
    providerRequestId: row.provider_request_id,
    providerAcceptedAt: toDateOrNull(row.provider_accepted_at),
    deduplicatedByKey: row.deduplicated_by_key,
    transport: row.transport ?? null,
  };
}

function toFeedback(row: FeedbackRecord): OutboxFeedback {
  return {
    id: row.id,
    source: row.source,
    recipient: row.recipient,
    kind: row.kind,
    bounceType: row.bounce_type,
    providerEventId: row.provider_event_id,
    providerMessageId: row.provider_message_id,
    status: row.status,
    diagnostic: row.diagnostic,
    reportedAt: toDate(row.reported_at),
    receivedAt: toDate(row.received_at),
    payload: row.payload,
  };
}
