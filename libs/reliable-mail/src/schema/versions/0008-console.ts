import type { OutboxTables } from '../outbox-tables.js';
import type { SchemaVersion } from './schema-version.js';

/**
 * The console's search indexes hold closed rows only. A row is written three times at least (enqueue, claim,
 * settle), and none of those updates is HOT (they change indexed columns), so an index on every row version costs
 * each of them: GIN indexes on the payload's recipients and the metadata took 11-14 % of single enqueues
 * (2,523-2,948/s without, 2,249-2,558/s with, in three alternated pairs of `npm run bench`) and 0.03-0.04 ms of
 * PostgreSQL CPU per mail. Kept to closed rows, they cost the enqueue and the claim nothing, and the settle that
 * closes a row one entry (two alternated pairs: 2,283-2,541 single enqueues/s without, 2,344-2,470 with; 0.21 ms of
 * PostgreSQL CPU per mail, 0.22-0.23); the open rows (the backlog) are searched through the dispatcher's partial
 * indexes (see whereOf).
 */
export const SEARCHED_STATUSES_PREDICATE = `"status" not in ('pending', 'sending')`;

/**
 * The indexes as of this version (see OUTBOX_SCHEMA_V1). `if not exists`: on an outbox of millions of rows a team
 * builds them beforehand with `create index concurrently` (the statements as here), which takes no lock that stops
 * enqueues; the migration then finds them.
 */
export const OUTBOX_SCHEMA_V8 = (t: Pick<OutboxTables, 'outbox' | 'audit'>) =>
  ({
    indexes: {
      // The console finds a mail by the business event it came from (metadata @> {"orderId": 1234}) and by any of
      // its recipients, among millions of rows (see SEARCHED_STATUSES_PREDICATE). The recipients are a column of
      // their own: an index on an expression over the payload cost each written row its evaluation (0.41 ms per
      // single-row insert with a SQL function, 0.30 with built-ins, 0.26 without; pgbench, 3,000 inserts of a 2 KB
      // payload), and a search of the open rows would decompress each payload.
      metadata: `create index if not exists "mail_outbox_metadata_index" on ${t.outbox} using gin ("metadata" jsonb_path_ops) where "metadata" is not null and ${SEARCHED_STATUSES_PREDICATE}`,
      recipients: `create index if not exists "mail_outbox_recipients_index" on ${t.outbox} using gin ("recipients") where ${SEARCHED_STATUSES_PREDICATE}`,
      // The console counts rows by status and lane: the open statuses have partial indexes of their own, `sent` is
      // estimated when it is large (see console/sql/counts.ts), and the final statuses other than `sent` had none:
      // without this index counting a few thousand cancelled rows read the whole table (1.5 s at 1,000,000 rows).
      // It holds (status, lane), so the count is an index-only scan. Enqueue and a send pay nothing (a pending or
      // sent row is not in it; those updates change `status` and were never HOT); a row ending otherwise, one entry.
      unsentFinal: `create index if not exists "mail_outbox_unsent_final_index" on ${t.outbox} ("status", "lane") where "status" in ('failed', 'dead', 'cancelled', 'expired', 'suppressed')`,
      // A timeline shows the operators' actions on its row.
      auditOfRow: `create index "mail_console_audit_outbox_ids_index" on ${t.audit} using gin ("outbox_ids")`,
    },
  }) as const;

/**
 * What the console needs: the W3C trace context active at enqueue, so that the send and the feedback reports are
 * spans of the trace that placed the order; an audit of operators' actions (who, what, when, on which rows); each
 * instance's heartbeat and lane state, which otherwise lives only in its process; and indexes for finding a mail.
 */
export const consoleTables: SchemaVersion = {
  version: 8,
  name: 'console',
  servesCodeFrom: 1,
  statements: (t) => {
    const { indexes } = OUTBOX_SCHEMA_V8(t);
    return [
      `alter table ${t.outbox} add column "traceparent" text null`,
      `alter table ${t.outbox} add column "tracestate" text null`,
      // Written at enqueue from the payload; the rows of earlier versions get theirs here, so that a search by
      // recipient (the console's, and MailOutboxAdmin's verbs) still finds them. A rewrite of every row: on an outbox
      // of millions, run this update in batches (by id ranges) before migrating, and it then finds nothing to do.
      `alter table ${t.outbox} add column "recipients" text[] null`,
      `update ${t.outbox} set "recipients" = array(
         select lower(r->>'address') from jsonb_array_elements(
           coalesce("payload"->'to', '[]') || coalesce("payload"->'cc', '[]') || coalesce("payload"->'bcc', '[]')) r)
       where "recipients" is null`,
      indexes.metadata,
      indexes.recipients,
      indexes.unsentFinal,
      `create table ${t.audit} (
        "id" uuid primary key,
        "actor" text not null,
        "action" text not null,
        "reason" text null,
        "filter" jsonb null,
        "outbox_ids" uuid[] not null,
        "created_at" timestamptz not null default now()
      )`,
      indexes.auditOfRow,
      `create table ${t.instance} (
        "id" text primary key,
        "host" text not null,
        "pid" int not null,
        "started_at" timestamptz not null,
        "heartbeat_at" timestamptz not null,
        "heartbeat_ms" int not null,
        "lanes" jsonb not null
      )`,
    ];
  },
};
