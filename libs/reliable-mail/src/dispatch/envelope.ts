import type { ClaimedRow } from '../outbox/queue.types.js';
import { recipientsOf } from '../outbox/recipients.js';

/**
 * The recipients an attempt of the row is for, lower case: every recipient of the row but those that took it or
 * refused it in an earlier attempt, and those on the suppression list.
 */
export function envelopeOf(row: ClaimedRow): string[] {
  const done = new Set([
    ...row.acceptedRecipients,
    ...row.rejectedRecipients.map((recipient) => recipient.address),
    ...row.suppressed,
  ]);
  const recipients = new Set(recipientsOf(row.payload).map((address) => address.toLowerCase()));
  return [...recipients].filter((address) => !done.has(address));
}
