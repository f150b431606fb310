import type { OutboxTables } from '../outbox-tables.js';
import type { SchemaVersion } from './schema-version.js';

/** The indexes as of this version (see OUTBOX_SCHEMA_V1). */
export const OUTBOX_SCHEMA_V8 = (t: Pick<OutboxTables, 'schema' | 'outbox' | 'audit'>) =>
  ({
    functions: {
      // Every recipient of a payload in lower case, for the console's search by address: an expression index needs
      // an immutable function, and jsonb_array_elements in a subquery cannot be indexed.
      recipients: `create function ${t.schema}.mail_recipients(payload jsonb) returns text[] language sql immutable parallel safe
        as $$ select array(select lower(r->>'address') from jsonb_array_elements(
          coalesce(payload->'to', '[]') || coalesce(payload->'cc', '[]') || coalesce(payload->'bcc', '[]')) r) $$`,
    },
    indexes: {
      // The console finds a mail by the business event it came from (metadata @> {"orderId": 1234}) and by any of
      // its recipients, among millions of rows.
      metadata: `create index "mail_outbox_metadata_index" on ${t.outbox} using gin ("metadata" jsonb_path_ops) where "metadata" is not null`,
      recipients: `create index "mail_outbox_recipients_index" on ${t.outbox} using gin (${t.schema}.mail_recipients("payload"))`,
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
    const { functions, indexes } = OUTBOX_SCHEMA_V8(t);
    return [
      `alter table ${t.outbox} add column "traceparent" text null`,
      `alter table ${t.outbox} add column "tracestate" text null`,
      functions.recipients,
      indexes.metadata,
      indexes.recipients,
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
        "lanes" jsonb not null
      )`,
    ];
  },
};
