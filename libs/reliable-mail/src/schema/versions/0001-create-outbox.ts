import type { OutboxTables } from '../outbox-tables.js';
import type { SchemaVersion } from './schema-version.js';

/**
 * The indexes and checks this version creates, shared with the entity definitions of the installations whose
 * tables MikroORM's migrations made in the app's own schema, so that the app's `migration:create` sees them as
 * existing instead of generating statements that drop them.
 */
export const OUTBOX_SCHEMA_V1 = (t: Pick<OutboxTables, 'outbox' | 'attempt' | 'event'>) =>
  ({
    indexes: {
      idempotencyKey: `create unique index "mail_outbox_idempotency_key_unique" on ${t.outbox} ("idempotency_key") where "idempotency_key" is not null`,
      // The claim reads only these two partial indexes, so its cost does not grow with the number of settled rows.
      due: `create index "mail_outbox_due_index" on ${t.outbox} ("lane", "next_attempt_at") where "status" = 'pending'`,
      lease: `create index "mail_outbox_lease_index" on ${t.outbox} ("lane", "locked_until") where "status" = 'sending'`,
      // Retention deletes closed rows by age; health and stats count recent problems: each reads only its own rows.
      closed: `create index "mail_outbox_closed_index" on ${t.outbox} ("updated_at") where "status" in ('sent', 'cancelled', 'expired', 'suppressed')`,
      problem: `create index "mail_outbox_problem_index" on ${t.outbox} ("updated_at") where "status" in ('failed', 'dead')`,
      attemptsOfRow: `create index "mail_outbox_attempt_outbox_id_index" on ${t.attempt} ("outbox_id", "attempt")`,
      eventLease: `create index "mail_outbox_event_locked_until_index" on ${t.event} ("locked_until")`,
    },
    checks: {
      status: `"status" in ('pending', 'sending', 'sent', 'failed', 'dead', 'cancelled', 'expired', 'suppressed')`,
      outcome: `"outcome" in ('started', 'sent', 'transient', 'permanent', 'sender', 'unknown')`,
      suppressionSource: `"source" in ('bounce', 'operator')`,
    },
  }) as const;

export const createOutbox: SchemaVersion = {
  version: 1,
  name: 'create-outbox',
  servesCodeFrom: 1,
  statements: (t) => {
    const { indexes, checks } = OUTBOX_SCHEMA_V1(t);
    return [
      `create table ${t.outbox} (
        "id" uuid primary key,
        "idempotency_key" text null,
        "content_hash" text not null,
        "message_id" text not null,
        "status" text not null default 'pending',
        "lane" text not null default 'default',
        "payload" jsonb not null,
        "metadata" jsonb null,
        "attempts" int not null default 0,
        "max_attempts" int not null,
        "next_attempt_at" timestamptz not null default now(),
        "expires_at" timestamptz null,
        "cancel_requested_at" timestamptz null,
        "locked_until" timestamptz null,
        "lock_token" uuid null,
        "locked_by" text null,
        "last_error" text null,
        "last_reply_code" int null,
        "last_enhanced_status" text null,
        "provider_reply" text null,
        "provider_message_id" text null,
        "requeued_at" timestamptz null,
        "requeue_reason" text null,
        "rejected_recipients" jsonb null,
        "created_at" timestamptz not null default now(),
        "sent_at" timestamptz null,
        "updated_at" timestamptz not null default now(),
        constraint "mail_outbox_message_id_unique" unique ("message_id"),
        constraint "mail_outbox_status_check" check (${checks.status})
      )`,
      indexes.idempotencyKey,
      indexes.due,
      indexes.lease,
      indexes.closed,
      indexes.problem,
      `create table ${t.attempt} (
        "id" uuid primary key,
        "outbox_id" uuid not null,
        "attempt" int not null,
        "worker_id" text not null,
        "lock_token" uuid not null,
        "started_at" timestamptz not null default now(),
        "finished_at" timestamptz null,
        "outcome" text not null default 'started',
        "reply_code" int null,
        "enhanced_status" text null,
        "reply" text null,
        "duration_ms" int null,
        constraint "mail_outbox_attempt_outbox_id_foreign" foreign key ("outbox_id") references ${t.outbox} ("id") on delete cascade,
        constraint "mail_outbox_attempt_outcome_check" check (${checks.outcome})
      )`,
      indexes.attemptsOfRow,
      // Events recorded in the settle's transaction and deleted once emitted: a crash between the two re-emits them.
      `create table ${t.event} (
        "id" bigserial primary key,
        "outbox_id" uuid not null,
        "name" text not null,
        "payload" jsonb not null,
        "locked_until" timestamptz not null,
        "created_at" timestamptz not null default now(),
        constraint "mail_outbox_event_outbox_id_foreign" foreign key ("outbox_id") references ${t.outbox} ("id") on delete cascade
      )`,
      indexes.eventLease,
      // Addresses that must get no mail: hard bounces and operators' entries, kept in lower case.
      `create table ${t.suppression} (
        "address" text primary key,
        "reason" text not null,
        "source" text not null,
        "outbox_id" uuid null,
        "created_at" timestamptz not null default now(),
        constraint "mail_suppression_source_check" check (${checks.suppressionSource})
      )`,
    ];
  },
};
