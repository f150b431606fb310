import type { OutboxTables } from '../outbox-tables.js';
import type { SchemaVersion } from './schema-version.js';

/** The indexes and checks as of this version, shared with the entity definitions (see OUTBOX_SCHEMA_V1). */
export const OUTBOX_SCHEMA_V5 = (t: Pick<OutboxTables, 'outbox' | 'feedback'>) =>
  ({
    indexes: {
      // Provider webhooks name a row by the provider's message id, which the settle of its accepted attempt wrote.
      providerMessageId: `create index "mail_outbox_provider_message_id_index" on ${t.outbox} ("provider_message_id") where "provider_message_id" is not null`,
      // The denominator of the complaint and bounce rates: mails sent in a window, counted from this index alone.
      sent: `create index "mail_outbox_sent_index" on ${t.outbox} ("sent_at") where "status" = 'sent'`,
      // A row's feedback, for get(id) and for the cascade when retention deletes the row.
      feedbackOfRow: `create index "mail_outbox_feedback_outbox_id_index" on ${t.feedback} ("outbox_id")`,
      // Bounces and complaints per window (health, metrics), apart from the deliveries, which may be as many as mails.
      feedbackProblems: `create index "mail_outbox_feedback_problem_index" on ${t.feedback} ("received_at") where "kind" in ('bounced', 'complained')`,
      // Feedback that names no row has no row to be deleted with: retention deletes it by age.
      feedbackUnlinked: `create index "mail_outbox_feedback_unlinked_index" on ${t.feedback} ("received_at") where "outbox_id" is null`,
    },
    checks: {
      feedbackKind: `"kind" in ('delivered', 'bounced', 'complained', 'delayed')`,
      // A bounce is hard (the address is bad for good) or soft; other kinds have no bounce type.
      bounceType: `("kind" = 'bounced') = ("bounce_type" is not null) and "bounce_type" in ('hard', 'soft')`,
      suppressionSource: `"source" in ('bounce', 'complaint', 'operator')`,
    },
  }) as const;

/**
 * Delivery feedback: what providers' webhooks and DSN emails report after a row was sent (delivered, bounced,
 * complained, delayed), one row per recipient of a provider's event. A provider delivers a webhook at least once,
 * so a repeat of (source, event id, recipient) is ignored. Complaints join the suppression list's sources.
 */
export const feedback: SchemaVersion = {
  version: 5,
  name: 'feedback',
  servesCodeFrom: 1,
  statements: (t) => {
    const { indexes, checks } = OUTBOX_SCHEMA_V5(t);
    return [
      indexes.providerMessageId,
      indexes.sent,
      `create table ${t.feedback} (
        "id" uuid primary key,
        "outbox_id" uuid null,
        "source" text not null,
        "recipient" text not null,
        "kind" text not null,
        "bounce_type" text null,
        "provider_event_id" text not null,
        "provider_message_id" text null,
        "status" text null,
        "diagnostic" text null,
        "reported_at" timestamptz not null,
        "received_at" timestamptz not null default now(),
        "payload" jsonb not null,
        constraint "mail_outbox_feedback_outbox_id_foreign" foreign key ("outbox_id") references ${t.outbox} ("id") on delete cascade,
        constraint "mail_outbox_feedback_event_unique" unique ("source", "provider_event_id", "recipient"),
        constraint "mail_outbox_feedback_kind_check" check (${checks.feedbackKind}),
        constraint "mail_outbox_feedback_bounce_type_check" check (${checks.bounceType})
      )`,
      indexes.feedbackOfRow,
      indexes.feedbackProblems,
      indexes.feedbackUnlinked,
      `alter table ${t.suppression} drop constraint "mail_suppression_source_check"`,
      `alter table ${t.suppression} add constraint "mail_suppression_source_check" check (${checks.suppressionSource})`,
    ];
  },
};
