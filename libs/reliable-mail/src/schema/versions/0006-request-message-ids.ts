import type { OutboxTables } from '../outbox-tables.js';
import type { SchemaVersion } from './schema-version.js';

/** The indexes as of this version, shared with the entity definitions (see OUTBOX_SCHEMA_V1). */
export const OUTBOX_SCHEMA_V6 = (t: Pick<OutboxTables, 'outbox'>) =>
  ({
    indexes: {
      // A webhook names the request the provider took, and a mail may go in many (Postmark and Resend: one for each
      // Bcc recipient beyond the first 50). Rows sent over SMTP have no such ids and stay out of the index.
      providerMessageIds: `create index "mail_outbox_provider_message_ids_index" on ${t.outbox} using gin ("provider_message_ids") where "provider_message_ids" is not null`,
    },
  }) as const;

/**
 * Every id a provider gave the requests that took a row's message, over all its attempts: `provider_message_id`
 * keeps one of them (the first request of the last attempt that took it), and the feedback for the others found
 * no row.
 */
export const requestMessageIds: SchemaVersion = {
  version: 6,
  name: 'request-message-ids',
  servesCodeFrom: 1,
  statements: (t) => [
    `alter table ${t.outbox} add column "provider_message_ids" text[] null`,
    OUTBOX_SCHEMA_V6(t).indexes.providerMessageIds,
  ],
};
