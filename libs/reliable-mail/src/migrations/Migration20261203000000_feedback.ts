import { Migration } from '@mikro-orm/migrations';
import { OUTBOX_SCHEMA_V1 } from './Migration20261130000000_create-outbox.js';

/** The indexes and checks as of this migration, shared with the entity definitions (see OUTBOX_SCHEMA_V1). */
export const OUTBOX_SCHEMA_V3 = {
  indexes: {
    // Provider webhooks name a row by the provider's message id, which the settle of its accepted attempt wrote.
    providerMessageId: `create index "mail_outbox_provider_message_id_index" on "mail_outbox" ("provider_message_id") where "provider_message_id" is not null`,
    // The denominator of the complaint and bounce rates: mails sent in a window, counted from this index alone.
    sent: `create index "mail_outbox_sent_index" on "mail_outbox" ("sent_at") where "status" = 'sent'`,
    // A row's feedback, for get(id) and for the cascade when retention deletes the row.
    feedbackOfRow: `create index "mail_outbox_feedback_outbox_id_index" on "mail_outbox_feedback" ("outbox_id")`,
    // Bounces and complaints per window (health, metrics), apart from the deliveries, which may be as many as mails.
    feedbackProblems: `create index "mail_outbox_feedback_problem_index" on "mail_outbox_feedback" ("received_at") where "kind" in ('bounced', 'complained')`,
    // Feedback that names no row has no row to be deleted with: retention deletes it by age.
    feedbackUnlinked: `create index "mail_outbox_feedback_unlinked_index" on "mail_outbox_feedback" ("received_at") where "outbox_id" is null`,
  },
  checks: {
    feedbackKind: `"kind" in ('delivered', 'bounced', 'complained', 'delayed')`,
    // A bounce is hard (the address is bad for good) or soft; other kinds have no bounce type.
    bounceType: `("kind" = 'bounced') = ("bounce_type" is not null) and "bounce_type" in ('hard', 'soft')`,
    suppressionSource: `"source" in ('bounce', 'complaint', 'operator')`,
  },
} as const;

/**
 * Delivery feedback: what providers' webhooks and DSN emails report after a row was sent (delivered, bounced,
 * complained, delayed), one row per recipient of a provider's event. A provider delivers a webhook at least once,
 * so a repeat of (source, event id, recipient) is ignored. Complaints join the suppression list's sources.
 */
export class Migration20261203000000_Feedback extends Migration {
  override up(): void {
    const { indexes, checks } = OUTBOX_SCHEMA_V3;
    this.addSql(indexes.providerMessageId);
    this.addSql(indexes.sent);
    this.addSql(`
      create table "mail_outbox_feedback" (
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
        constraint "mail_outbox_feedback_outbox_id_foreign" foreign key ("outbox_id") references "mail_outbox" ("id") on delete cascade,
        constraint "mail_outbox_feedback_event_unique" unique ("source", "provider_event_id", "recipient"),
        constraint "mail_outbox_feedback_kind_check" check (${checks.feedbackKind}),
        constraint "mail_outbox_feedback_bounce_type_check" check (${checks.bounceType})
      )`);
    this.addSql(indexes.feedbackOfRow);
    this.addSql(indexes.feedbackProblems);
    this.addSql(indexes.feedbackUnlinked);
    this.addSql(`alter table "mail_suppression" drop constraint "mail_suppression_source_check"`);
    this.addSql(
      `alter table "mail_suppression" add constraint "mail_suppression_source_check" check (${checks.suppressionSource})`,
    );
  }

  override down(): void {
    this.addSql(`alter table "mail_suppression" drop constraint "mail_suppression_source_check"`);
    this.addSql(`update "mail_suppression" set "source" = 'bounce' where "source" = 'complaint'`);
    this.addSql(
      `alter table "mail_suppression" add constraint "mail_suppression_source_check" check (${OUTBOX_SCHEMA_V1.checks.suppressionSource})`,
    );
    this.addSql(`drop table if exists "mail_outbox_feedback"`);
    this.addSql(`drop index if exists "mail_outbox_sent_index"`);
    this.addSql(`drop index if exists "mail_outbox_provider_message_id_index"`);
  }
}
