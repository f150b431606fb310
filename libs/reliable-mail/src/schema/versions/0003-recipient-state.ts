import type { SchemaVersion } from './schema-version.js';

/** The checks as of this version, shared with the entity definitions (see OUTBOX_SCHEMA_V1). */
export const OUTBOX_SCHEMA_V3 = {
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
export const recipientState: SchemaVersion = {
  version: 3,
  name: 'recipient-state',
  servesCodeFrom: 1,
  statements: (t) => [
    `alter table ${t.outbox} add column "accepted_recipients" jsonb null`,
    `alter table ${t.attempt} add column "recipients" jsonb null`,
    `alter table ${t.attempt} add column "provider_message_id" text null`,
    `alter table ${t.attempt} drop constraint "mail_outbox_attempt_outcome_check"`,
    `alter table ${t.attempt} add constraint "mail_outbox_attempt_outcome_check" check (${OUTBOX_SCHEMA_V3.checks.outcome})`,
  ],
};
