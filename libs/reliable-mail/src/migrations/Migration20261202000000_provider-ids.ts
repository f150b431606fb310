import { Migration } from '@mikro-orm/migrations';

/**
 * What an HTTP provider says of a request, kept so that its bounces, complaints and support can be linked back: the
 * request's id and the time the provider took the message, on the row (of the attempt that sent it) and on each
 * attempt; and whether the provider deduplicates a retry by the row's idempotency key (Resend), so that an attempt
 * with an unknown outcome tells whether its retry could make a second copy.
 */
export class Migration20261202000000_ProviderIds extends Migration {
  override up(): void {
    this.addSql(`alter table "mail_outbox" add column "provider_request_id" text null`);
    this.addSql(`alter table "mail_outbox" add column "provider_accepted_at" timestamptz null`);
    this.addSql(`alter table "mail_outbox_attempt" add column "provider_request_id" text null`);
    this.addSql(`alter table "mail_outbox_attempt" add column "provider_accepted_at" timestamptz null`);
    this.addSql(`alter table "mail_outbox_attempt" add column "deduplicated_by_key" boolean not null default false`);
  }

  override down(): void {
    this.addSql(`alter table "mail_outbox_attempt" drop column "deduplicated_by_key"`);
    this.addSql(`alter table "mail_outbox_attempt" drop column "provider_accepted_at"`);
    this.addSql(`alter table "mail_outbox_attempt" drop column "provider_request_id"`);
    this.addSql(`alter table "mail_outbox" drop column "provider_accepted_at"`);
    this.addSql(`alter table "mail_outbox" drop column "provider_request_id"`);
  }
}
