import type { SchemaVersion } from './schema-version.js';

/**
 * What an HTTP provider says of a request, kept so that its bounces, complaints and support can be linked back: the
 * request's id and the time the provider took the message, on the row (of the attempt that sent it) and on each
 * attempt; and whether the provider deduplicates a retry by the row's idempotency key (Resend), so that an attempt
 * with an unknown outcome tells whether its retry could make a second copy.
 */
export const providerIds: SchemaVersion = {
  version: 4,
  name: 'provider-ids',
  servesCodeFrom: 1,
  statements: (t) => [
    `alter table ${t.outbox} add column "provider_request_id" text null`,
    `alter table ${t.outbox} add column "provider_accepted_at" timestamptz null`,
    `alter table ${t.attempt} add column "provider_request_id" text null`,
    `alter table ${t.attempt} add column "provider_accepted_at" timestamptz null`,
    `alter table ${t.attempt} add column "deduplicated_by_key" boolean not null default false`,
  ],
};
