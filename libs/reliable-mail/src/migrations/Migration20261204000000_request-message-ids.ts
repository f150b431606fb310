import { Migration } from '@mikro-orm/migrations';

/** The indexes as of this migration, shared with the entity definitions (see OUTBOX_SCHEMA_V1). */
export const OUTBOX_SCHEMA_V4 = {
  indexes: {
    // A webhook names the request the provider took, and a mail may go in many (Postmark and Resend: one for each
    // Bcc recipient beyond the first 50). Rows sent over SMTP have no such ids and stay out of the index.
    providerMessageIds: `create index "mail_outbox_provider_message_ids_index" on "mail_outbox" using gin ("provider_message_ids") where "provider_message_ids" is not null`,
  },
} as const;

/**
 * Every id a provider gave the requests that took a row's message, over all its attempts: `provider_message_id`
 * keeps one of them (the first request of the last attempt that took it), and the feedback for the others found
 * no row.
 */
export class Migration20261204000000_RequestMessageIds extends Migration {
  override up(): void {
    this.addSql(`alter table "mail_outbox" add column "provider_message_ids" text[] null`);
    this.addSql(OUTBOX_SCHEMA_V4.indexes.providerMessageIds);
  }

  override down(): void {
    this.addSql(`drop index "mail_outbox_provider_message_ids_index"`);
    this.addSql(`alter table "mail_outbox" drop column "provider_message_ids"`);
  }
}
