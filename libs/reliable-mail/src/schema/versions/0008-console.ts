import type { OutboxTables } from '../outbox-tables.js';
import type { SchemaVersion } from './schema-version.js';

/**
 * The lower-cased addresses of a payload's To, Cc and Bcc as a JSON array: what the console's search by recipient
 * matches and what its index holds. Built-in functions only, evaluated inline: the same list from a SQL function of
 * our own (a subquery over jsonb_array_elements) cost 0.41 ms per single-row insert against 0.30 ms, and 0.26 ms
 * with no index (pgbench, 3,000 inserts of a 2 KB payload). `payload` is the column as the statement names it.
 */
export const recipientAddresses = (payload: string) =>
  `lower(jsonb_path_query_array(coalesce(${payload}->'to', '[]') || coalesce(${payload}->'cc', '[]') || coalesce(${payload}->'bcc', '[]'), '$[*].address')::text)::jsonb`;

/**
 * The indexes as of this version (see OUTBOX_SCHEMA_V1). `if not exists`: on an outbox of millions of rows a team
 * builds them beforehand with `create index concurrently` (the statements as here), which takes no lock that stops
 * enqueues; the migration then finds them.
 */
export const OUTBOX_SCHEMA_V8 = (t: Pick<OutboxTables, 'outbox' | 'audit'>) =>
  ({
    indexes: {
      // The console finds a mail by the business event it came from (metadata @> {"orderId": 1234}) and by any of
      // its recipients, among millions of rows. Every row version pays them (a claim or a settle is no HOT update:
      // it changes indexed columns): 0.03 ms more per update and 0.05 ms per insert, both indexes together, in the
      // pgbench above. A side table written once would spare the updates but cost 0.15 ms at the enqueue, where
      // the business transaction waits.
      metadata: `create index if not exists "mail_outbox_metadata_index" on ${t.outbox} using gin ("metadata" jsonb_path_ops) where "metadata" is not null`,
      recipients: `create index if not exists "mail_outbox_recipients_index" on ${t.outbox} using gin ((${recipientAddresses('"payload"')}) jsonb_path_ops)`,
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
