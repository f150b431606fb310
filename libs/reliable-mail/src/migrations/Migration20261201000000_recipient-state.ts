import { Migration } from '@mikro-orm/migrations';

/** The checks as of this migration, shared with the entity definitions (see OUTBOX_SCHEMA_V1). */
export const OUTBOX_SCHEMA_V2 = {
  checks: {
    // `sender` is no longer written (a refused login or sender is now an `outage`), but older rows may hold it.
    outcome: `"outcome" in ('started', 'sent', 'partial', 'transient', 'permanent', 'outage', 'sender', 'unknown')`,
  },
} as const;

/**
 * Delivery state per recipient: which recipients took the message in an earlier attempt (a retry after some were
 * deferred goes to the others only), and what the server said of each recipient in each attempt. New attempt
 * outcomes: `partial` (some took it, some were deferred) and `outage` (the lane's server refused the session).
 */
export class Migration20261201000000_RecipientState extends Migration {
  override up(): void {
    this.addSql(`alter table "mail_outbox" add column "accepted_recipients" jsonb null`);
    this.addSql(`alter table "mail_outbox_attempt" add column "recipients" jsonb null`);
    this.addSql(`alter table "mail_outbox_attempt" add column "provider_message_id" text null`);
    this.addSql(`alter table "mail_outbox_attempt" drop constraint "mail_outbox_attempt_outcome_check"`);
    this.addSql(
      `alter table "mail_outbox_attempt" add constraint "mail_outbox_attempt_outcome_check" check (${OUTBOX_SCHEMA_V2.checks.outcome})`,
    );
  }

  override down(): void {
    this.addSql(`alter table "mail_outbox_attempt" drop constraint "mail_outbox_attempt_outcome_check"`);
    this.addSql(`update "mail_outbox_attempt" set "outcome" = 'transient' where "outcome" in ('partial', 'outage')`);
    this.addSql(
      `alter table "mail_outbox_attempt" add constraint "mail_outbox_attempt_outcome_check" check ("outcome" in ('started', 'sent', 'transient', 'permanent', 'sender', 'unknown'))`,
    );
    this.addSql(`alter table "mail_outbox_attempt" drop column "provider_message_id"`);
    this.addSql(`alter table "mail_outbox_attempt" drop column "recipients"`);
    this.addSql(`alter table "mail_outbox" drop column "accepted_recipients"`);
  }
}
