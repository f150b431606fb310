import type { InsertedRow, NewOutboxRow } from '../queue.types.js';
import type { OutboxStatus } from '../mail.types.js';
import { NOTIFY_ROW_LANE, notifyLanesOf } from './notify.js';
import { type SqlClient, Statement } from '../../database/sql-client.js';
import type { OutboxTables } from '../../schema/outbox-tables.js';
import { NO_TRACE_CONTEXT, type StoredTraceContext } from '../../shared/trace-context.js';

// An enqueue: one INSERT in the caller's transaction. A taken idempotency key inserts nothing, and the caller then
// reads the existing row to compare its content hash. ON CONFLICT names no index: in the plain layout its arbiter is
// the partial unique index of the keys; in the partitioned one, which can have no such index, the key's trigger skips
// the row (see versions/0013-partition-days.ts). Ids are UUID v7 made here, so the primary key never conflicts.

interface InsertedRecord {
  id: string;
  idempotency_key: string | null;
  message_id: string;
  status: OutboxStatus;
  content_hash: string | null;
}

const COLUMNS =
  'id, idempotency_key, content_hash, message_id, payload, metadata, max_attempts, lane, next_attempt_at, expires_at, traceparent, tracestate, recipients';
const ON_CONFLICT = 'on conflict do nothing';
const RETURNING = 'returning id, idempotency_key, message_id, status, content_hash, lane';

// A single row goes as plain parameters: cheaper for the server than unpacking a JSON array.
const insertOne = (notify: boolean) =>
  new Statement((t) => ({
    text: `insert into ${t.outbox} (${COLUMNS})
           values ($1, $2, $3, $4, $5, $6, $7, $8, coalesce($9, now()), $10, $11, $12, $13)
           ${ON_CONFLICT} ${RETURNING}${notify ? `, ${NOTIFY_ROW_LANE}` : ''}`,
  }));
const INSERT_ONE = insertOne(false);
const INSERT_ONE_NOTIFYING = insertOne(true);

// The trace context is one enqueue's, the same for every row: two parameters beside the JSON, not a copy in each row.
const insertManyRows = (t: OutboxTables) => `insert into ${t.outbox} (${COLUMNS})
  select id, idempotency_key, content_hash, message_id, payload, metadata, max_attempts, lane,
         coalesce(next_attempt_at, now()), expires_at, $2::text, $3::text, recipients
  from jsonb_to_recordset($1::jsonb) as input(
    id uuid, idempotency_key text, content_hash text, message_id text, payload jsonb, metadata jsonb,
    max_attempts int, lane text, next_attempt_at timestamptz, expires_at timestamptz, recipients text[])
  ${ON_CONFLICT} ${RETURNING}`;

// A batch goes as one JSON parameter, unpacked by jsonb_to_recordset: one statement and one round trip for 500 rows.
const INSERT_MANY = new Statement((t) => ({ text: insertManyRows(t) }));
const INSERT_MANY_NOTIFYING = new Statement((t) => {
  const notified = notifyLanesOf('inserted');
  return {
    text: `with inserted as (${insertManyRows(t)}), ${notified.step} select *, ${notified.column} from inserted`,
  };
});

/**
 * Inserts rows, skipping those whose idempotency key is taken, each with the trace context of the enqueue. With
 * `notify` the statement also notifies each lane's dispatchers, which PostgreSQL delivers when the surrounding
 * transaction commits.
 */
export async function insertRows(
  db: SqlClient,
  rows: NewOutboxRow[],
  notify: boolean,
  traceContext: StoredTraceContext = NO_TRACE_CONTEXT,
): Promise<InsertedRow[]> {
  const inserted =
    rows.length === 1
      ? await db.query<InsertedRecord>(notify ? INSERT_ONE_NOTIFYING : INSERT_ONE, oneRowValues(rows[0], traceContext))
      : await db.query<InsertedRecord>(notify ? INSERT_MANY_NOTIFYING : INSERT_MANY, [
          JSON.stringify(rows.map(manyRowInput)),
          traceContext.traceparent,
          traceContext.tracestate,
        ]);
  return inserted.map((row) => toInsertedRow(row, true));
}

function oneRowValues(row: NewOutboxRow, traceContext: StoredTraceContext): unknown[] {
  return [
    row.id,
    row.idempotencyKey,
    row.contentHash,
    row.messageId,
    JSON.stringify(row.payload),
    row.metadata === null ? null : JSON.stringify(row.metadata),
    row.maxAttempts,
    row.lane,
    row.notBefore,
    row.expiresAt,
    traceContext.traceparent,
    traceContext.tracestate,
    recipientsOf(row),
  ];
}

/**
 * The addresses of To, Cc and Bcc in lower case, the console's search key: a column of its own, written here, so
 * that neither its index nor a search reads the payload.
 */
function recipientsOf(row: NewOutboxRow): string[] {
  const { to, cc, bcc } = row.payload;
  return [...to, ...cc, ...bcc].map((recipient) => recipient.address.toLowerCase());
}

function manyRowInput(row: NewOutboxRow) {
  return {
    id: row.id,
    idempotency_key: row.idempotencyKey,
    content_hash: row.contentHash,
    message_id: row.messageId,
    payload: row.payload,
    metadata: row.metadata,
    max_attempts: row.maxAttempts,
    lane: row.lane,
    next_attempt_at: row.notBefore?.toISOString() ?? null,
    expires_at: row.expiresAt?.toISOString() ?? null,
    recipients: recipientsOf(row),
  };
}

const FIND_BY_IDEMPOTENCY_KEYS = new Statement((t) => ({
  text: `select id, idempotency_key, message_id, status, content_hash from ${t.outbox} where idempotency_key = any($1::text[])`,
}));

/** The rows that hold these idempotency keys: what an enqueue whose insert was skipped compares itself with. */
export async function findByIdempotencyKeys(db: SqlClient, idempotencyKeys: string[]): Promise<InsertedRow[]> {
  if (idempotencyKeys.length === 0) return [];
  const rows = await db.query<InsertedRecord>(FIND_BY_IDEMPOTENCY_KEYS, [idempotencyKeys]);
  return rows.map((row) => toInsertedRow(row, false));
}

function toInsertedRow(row: InsertedRecord, created: boolean): InsertedRow {
  return {
    id: row.id,
    idempotencyKey: row.idempotency_key,
    messageId: row.message_id,
    status: row.status,
    contentHash: row.content_hash,
    created,
  };
}
