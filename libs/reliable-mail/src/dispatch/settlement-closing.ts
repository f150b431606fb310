import type { EmailFailedEvent, FailureCause } from '../events/email-failed.event.js';
import type { EmailSentEvent } from '../events/email-sent.event.js';
import type { RejectedRecipient } from '../outbox/mail.types.js';
import type { ClaimedRow, Settlement } from '../outbox/queue.types.js';
import { recipientsOf } from '../outbox/recipients.js';
import { EMAIL_FAILED_EVENT, EMAIL_SENT_EVENT } from '../reliable-mail.constants.js';
import type { RecipientOutcome } from '../transport/mail-transport.interface.js';

// The settlements that close a row, and the events that report them: what `settlementFor` decides and a claim's
// skip both end in.

/** The events as stored: the event id is the recorded row's, added when it is emitted. */
type SentEventPayload = Omit<EmailSentEvent, 'eventId'>;
type FailedEventPayload = Omit<EmailFailedEvent, 'eventId'>;

export interface Closing {
  status: Exclude<Settlement['status'], 'pending'>;
  cause: FailureCause;
  outcome: Settlement['outcome'];
  reason: string;
  replyCode: number | null;
  enhancedStatus: string | null;
  attemptRecipients: RecipientOutcome[] | null;
  accepted: string[];
  rejected: RejectedRecipient[];
  bounced: Settlement['bounced'];
  reply: string | null;
  providerMessageId: string | null;
  providerRequestId?: string | null;
  providerAcceptedAt?: Date | null;
  deduplicatedByKey?: boolean;
  outcomeUnknown?: boolean;
  /** The attempt is not counted (an outage). */
  refund?: boolean;
}

/** A final settlement: `sent` with its event, or a failure with the event saying why. */
export function closed(row: ClaimedRow, now: Date, durationMs: number, closing: Closing): Settlement {
  const refundAttempt = closing.refund ? 1 : 0;
  // A recipient suppressed since it took the mail or refused it (a later hard bounce) is reported as that, once.
  const settled = new Set([...closing.accepted, ...closing.rejected.map((recipient) => recipient.address)]);
  const rejected = [
    ...closing.rejected,
    ...row.suppressed
      .filter((address) => !settled.has(address))
      .map((address) => ({ address, reply: 'suppressed: not sent', replyCode: null })),
  ];
  const settlement = {
    ...base(row, durationMs),
    replyCode: closing.replyCode,
    enhancedStatus: closing.enhancedStatus,
    reply: closing.reply,
    providerMessageId: closing.providerMessageId,
    providerRequestId: closing.providerRequestId ?? null,
    providerAcceptedAt: closing.providerAcceptedAt ?? null,
    deduplicatedByKey: closing.deduplicatedByKey ?? false,
    attemptRecipients: closing.attemptRecipients,
    bounced: closing.bounced,
    status: closing.status,
    refundAttempt,
    nextAttemptAt: null,
    outcome: closing.outcome,
    acceptedRecipients: closing.accepted,
    rejectedRecipients: rejected.length > 0 ? rejected : null,
  } as const;
  const attempt = row.attempts - refundAttempt;
  if (closing.status === 'sent') {
    const event: SentEventPayload = {
      id: row.id,
      messageId: row.messageId,
      idempotencyKey: row.idempotencyKey,
      accepted: closing.accepted,
      rejected,
      attempt,
      reply: closing.reply ?? '',
      providerMessageId: closing.providerMessageId,
      providerRequestId: closing.providerRequestId ?? null,
      providerAcceptedAt: closing.providerAcceptedAt ?? null,
      sentAt: now,
      metadata: row.metadata,
    };
    return { ...settlement, lastError: null, sentAt: now, eventName: EMAIL_SENT_EVENT, eventPayload: event };
  }
  return {
    ...settlement,
    lastError: closing.reason,
    sentAt: null,
    eventName: EMAIL_FAILED_EVENT,
    eventPayload: failedEvent(
      { ...row, attempts: attempt },
      {
        status: closing.status,
        cause: closing.cause,
        reason: closing.reason,
        replyCode: closing.replyCode,
        enhancedStatus: closing.enhancedStatus,
        accepted: closing.accepted,
        deferred: [],
        nextAttemptAt: null,
        outcomeUnknown: closing.outcomeUnknown ?? false,
      },
    ),
  };
}

/**
 * The recipients this attempt is for: every recipient of the row but those that took it or refused it in an
 * earlier attempt, and those on the suppression list.
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

export function base(row: ClaimedRow, durationMs: number) {
  return { id: row.id, lockToken: row.lockToken, attemptId: row.attemptId, durationMs };
}

export type FailedEventFacts = Pick<
  EmailFailedEvent,
  | 'status'
  | 'cause'
  | 'reason'
  | 'replyCode'
  | 'enhancedStatus'
  | 'accepted'
  | 'deferred'
  | 'nextAttemptAt'
  | 'outcomeUnknown'
>;

export function failedEvent(row: ClaimedRow, facts: FailedEventFacts): FailedEventPayload {
  return {
    id: row.id,
    messageId: row.messageId,
    idempotencyKey: row.idempotencyKey,
    attempt: row.attempts,
    ...facts,
    permanent: facts.cause === 'refused',
    deadLettered: facts.status === 'dead',
    metadata: row.metadata,
  };
}

const SKIP_REASONS: Record<NonNullable<ClaimedRow['skipReason']>, { cause: FailureCause; reason: string }> = {
  cancelled: { cause: 'cancelled', reason: 'cancelled while it was being sent' },
  expired: { cause: 'expired', reason: 'expired before it could be sent' },
  suppressed: { cause: 'suppressed', reason: 'every recipient is on the suppression list' },
  dead: {
    cause: 'crashes',
    reason: 'dead-lettered: its worker stopped without settling it until no attempt or age was left',
  },
};

/**
 * Closes a claimed row that must not be sent (see `ClaimedRow.skipReason`), without an attempt. A row that some
 * recipients took in an earlier attempt is `sent`, as a settle makes a row whose other recipients were given up on:
 * those are recorded refused, for the skip's reason.
 */
export function skipSettlement(row: ClaimedRow & { skipReason: NonNullable<ClaimedRow['skipReason']> }): Settlement {
  const { cause, reason } = SKIP_REASONS[row.skipReason];
  const sent = row.acceptedRecipients.length > 0;
  const givenUp = sent ? envelopeOf(row).map((address) => ({ address, reply: reason, replyCode: null })) : [];
  return closed(row, new Date(), 0, {
    status: sent ? 'sent' : row.skipReason,
    cause,
    outcome: 'permanent',
    reason,
    replyCode: null,
    enhancedStatus: null,
    attemptRecipients: null,
    accepted: row.acceptedRecipients,
    rejected: [...row.rejectedRecipients, ...givenUp],
    bounced: [],
    reply: null,
    providerMessageId: null,
    refund: true,
  });
}
