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
//
// A statement in which no row has a key (most mail) can conflict with nothing: it is a plain INSERT, without the
// speculative insertion ON CONFLICT makes (a check of every unique index before the heap insert, a confirmation
// record after), and it sends back no row's columns, since nothing in them is unknown here (a notifying one answers
// with the NOTIFY's column only). `npm run bench:insert` (begin, one insert, commit on 16 clients): PostgreSQL spent
// 248–325 µs a transaction on a keyed mail and 218–298 on a keyless one, 12–55 µs less in each round.

interface InsertedRecord {
  id: string;
  idempotency_key: string | null;
  message_id: string;
  status: OutboxStatus;
  content_hash: string | null;
}

const COLUMNS =
  'id, idempotency_key, content_hash, message_id, payload, metadata, max_attempts, lane, next_attempt_at, expires_at, traceparent, tracestate, recipients';
/** What follows the insert of rows that may carry a taken key: skip those, and say which were written. */
const KEYED_TAIL = 'on conflict do nothing returning id, idempotency_key, message_id, status, content_hash, lane';

// A single row goes as plain parameters: cheaper for the server than unpacking a JSON array.
const insertOne = (t: OutboxTables, tail: string) => `insert into ${t.outbox} (${COLUMNS})
  values ($1, $2, $3, $4, $5, $6, $7, $8, coalesce($9, now()), $10, $11, $12, $13) ${tail}`;

// A batch goes as one JSON parameter, unpacked by jsonb_to_recordset: one statement and one round trip for 500 rows.
// The trace context is one enqueue's, the same for every row: two parameters beside the JSON, not a copy in each row.
const insertMany = (t: OutboxTables, tail: string) => `insert into ${t.outbox} (${COLUMNS})
  select id, idempotency_key, content_hash, message_id, payload, metadata, max_attempts, lane,
         coalesce(next_attempt_at, now()), expires_at, $2::text, $3::text, recipients
  from jsonb_to_recordset($1::jsonb) as input(
    id uuid, idempotency_key text, content_hash text, message_id text, payload jsonb, metadata jsonb,
    max_attempts int, lane text, next_attempt_at timestamptz, expires_at timestamptz, recipients text[])
  ${tail}`;

/** The insert of one row or of many, as it is and notifying each lane it wrote (`notifying`). */
interface InsertStatements {
  plain: Statement;
  notifying: Statement;
}

/** A batch's insert as the CTE `inserted`, then a step that notifies each lane it wrote; `select` makes the answer. */
const notifyingMany = (t: OutboxTables, tail: string, select: (notifiedColumn: string) => string) => {
  const notified = notifyLanesOf('inserted');
  return `with inserted as (${insertMany(t, tail)}), ${notified.step} ${select(notified.column)}`;
};

const KEYED: Record<'one' | 'many', InsertStatements> = {
  one: {
    plain: new Statement((t) => ({ text: insertOne(t, KEYED_TAIL) })),
    notifying: new Statement((t) => ({ text: `${insertOne(t, KEYED_TAIL)}, ${NOTIFY_ROW_LANE}` })),
  },
  many: {
    plain: new Statement((t) => ({ text: insertMany(t, KEYED_TAIL) })),
    notifying: new Statement((t) => ({
      text: notifyingMany(t, KEYED_TAIL, (notified) => `select *, ${notified} from inserted`),
    })),
  },
};

const KEYLESS: Record<'one' | 'many', InsertStatements> = {
  one: {
    plain: new Statement((t) => ({ text: insertOne(t, '') })),
    notifying: new Statement((t) => ({ text: insertOne(t, `returning ${NOTIFY_ROW_LANE}`) })),
  },
  many: {
    plain: new Statement((t) => ({ text: insertMany(t, '') })),
    notifying: new Statement((t) => ({
      text: notifyingMany(t, 'returning lane', (notified) => `select ${notified}`),
    })),
  },
};

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
  const shape = rows.length === 1 ? 'one' : 'many';
  const values =
    shape === 'one'
      ? oneRowValues(rows[0], traceContext)
      : [JSON.stringify(rows.map(manyRowInput)), traceContext.traceparent, traceContext.tracestate];
  if (rows.every((row) => row.idempotencyKey === null)) {
    const statements = KEYLESS[shape];
    await db.query<unknown>(notify ? statements.notifying : statements.plain, values);
    return rows.map(insertedAsWritten);
  }
  const statements = KEYED[shape];
  const written = await db.query<InsertedRecord>(notify ? statements.notifying : statements.plain, values);
  return written.map((row) => toInsertedRow(row, true));
}

/** A row without a key as the insert wrote it: what RETURNING would have said. */
function insertedAsWritten(row: NewOutboxRow): InsertedRow {
  return {
    id: row.id,
    idempotencyKey: null,
    messageId: row.messageId,
    status: 'pending',
    contentHash: row.contentHash,
    created: true,
  };
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
