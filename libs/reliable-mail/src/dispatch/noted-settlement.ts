import type { RejectedRecipient } from '../outbox/mail.types.js';
import type { Settlement } from '../outbox/queue.types.js';

/** What stands for a text PostgreSQL would not store. */
export const UNSTORED_TEXT_NOTE =
  '[not stored: PostgreSQL refused the text of this settlement; the dispatcher logged why]';

/** Event fields that carry what a server, a provider or a template said, and what replaces each. */
const EVENT_TEXT = ['reason', 'reply'] as const;
const EVENT_REPORTED = ['replyCode', 'enhancedStatus', 'providerMessageId', 'providerRequestId', 'providerAcceptedAt'];

const note = (text: string | null): string | null => (text === null ? null : UNSTORED_TEXT_NOTE);
const notedRejection = (rejected: RejectedRecipient): RejectedRecipient => ({
  ...rejected,
  reply: note(rejected.reply),
  replyCode: null,
});

/**
 * The settlement as it can still be written when PostgreSQL refused it for its values: the same decision (status,
 * recipients, retry time, event), with every text and value a server, a provider or a template reported (replies,
 * reasons, codes, provider ids and times) replaced by a note or null. The database does not say which value it
 * refused, and none of what is left came from outside: the row's own addresses and what the dispatcher decided.
 * A delivered row stays `sent`; its reply is lost, and the log keeps the error.
 */
export function withReportedTextNoted(settlement: Settlement): Settlement {
  const payload = settlement.eventPayload as Record<string, unknown>;
  const eventPayload: Record<string, unknown> = { ...payload };
  for (const key of EVENT_TEXT) if (typeof payload[key] === 'string') eventPayload[key] = UNSTORED_TEXT_NOTE;
  for (const key of EVENT_REPORTED) if (key in payload) eventPayload[key] = null;
  if (Array.isArray(payload.rejected))
    eventPayload.rejected = (payload.rejected as RejectedRecipient[]).map(notedRejection);
  return {
    ...settlement,
    lastError: note(settlement.lastError),
    replyCode: null,
    enhancedStatus: null,
    reply: note(settlement.reply),
    providerMessageId: null,
    providerRequestId: null,
    providerAcceptedAt: null,
    rejectedRecipients: settlement.rejectedRecipients?.map(notedRejection) ?? null,
    attemptRecipients:
      settlement.attemptRecipients?.map((recipient) => ({
        address: recipient.address,
        status: recipient.status,
        replyCode: null,
        enhancedStatus: null,
        reply: note(recipient.reply),
        perRecipient: recipient.perRecipient,
        providerMessageId: null,
      })) ?? null,
    bounced: settlement.bounced.map((bounce) => ({ address: bounce.address, reply: note(bounce.reply) })),
    eventPayload,
  };
}
