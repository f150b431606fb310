import type { EmailFailedEvent, FailureCause } from '../events/email-failed.event.js';
import type { EmailSentEvent } from '../events/email-sent.event.js';
import { EMAIL_FAILED_EVENT, EMAIL_SENT_EVENT } from '../reliable-mail.constants.js';
import type { RetryPolicy } from '../shared/retry-policy.js';
import type { AttemptOutcome, RejectedRecipient } from '../outbox/mail.types.js';
import type { ClaimedRow, Settlement } from '../outbox/queue.types.js';
import { recipientsOf } from '../outbox/recipients.js';
import type { RecipientOutcome, SendOutcome } from '../transport/mail-transport.interface.js';
import { isHardBounce, parseReply } from '../transport/smtp/smtp-reply.js';
import { decideRetry } from '../shared/retry-policy.js';

/**
 * What one attempt came to, as the settlement decides on it: the transport's outcome, or a mail that could not be
 * made into a message (its template is not registered or throws, an attachment cannot be fetched).
 */
export type AttemptResult = SendOutcome | { kind: 'unrenderable'; reason: string };

/** What the provider said of the request, whatever its outcome: recorded on the attempt and the row. */
function providerFacts(outcome: Extract<SendOutcome, { kind: 'attempted' }>) {
  return {
    providerRequestId: outcome.providerRequestId ?? null,
    providerAcceptedAt: outcome.acceptedAt ?? null,
    deduplicatedByKey: outcome.deduplicatedByKey ?? false,
  };
}

/** The events as stored: the event id is the recorded row's, added when it is emitted. */
type SentEventPayload = Omit<EmailSentEvent, 'eventId'>;
type FailedEventPayload = Omit<EmailFailedEvent, 'eventId'>;

const unique = <T>(items: T[]): T[] => [...new Set(items)];

/** Every recipient of the row, lower case, each once. */
function allRecipients(row: ClaimedRow): string[] {
  return unique(recipientsOf(row.payload).map((address) => address.toLowerCase()));
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
  return allRecipients(row).filter((address) => !done.has(address));
}

const asRejected = (outcome: RecipientOutcome): RejectedRecipient => ({
  address: outcome.address,
  reply: outcome.reply,
  replyCode: outcome.replyCode,
});

/** The attempt record's outcome, from what became of its recipients. */
function attemptOutcomeOf(recipients: RecipientOutcome[]): Exclude<AttemptOutcome, 'started' | 'outage'> {
  const has = (status: RecipientOutcome['status']) => recipients.some((recipient) => recipient.status === status);
  if (has('unknown')) return 'unknown';
  if (has('deferred')) return has('accepted') ? 'partial' : 'transient';
  return has('accepted') || recipients.length === 0 ? 'sent' : 'permanent';
}

/** The reply that best explains the attempt: an unknown outcome, then a deferral, then a refusal. */
function leadingReply(recipients: RecipientOutcome[]): RecipientOutcome | undefined {
  for (const status of ['unknown', 'deferred', 'refused'] as const) {
    const found = recipients.find((recipient) => recipient.status === status);
    if (found) return found;
  }
  return undefined;
}

/**
 * What becomes of a claimed row after one attempt: its new state, the attempt's record and the event that reports
 * it. The row is `sent` once every recipient took the message or refused it and one took it; recipients deferred
 * are retried on their own, with the same Message-ID, until they are settled or the row runs out of attempts or
 * time. A lane outage is retried when the lane resumes (`outageEndsAt`) and not counted as an attempt.
 */
export function settlementFor(
  row: ClaimedRow,
  result: AttemptResult,
  policy: RetryPolicy,
  now: Date,
  durationMs: number,
  outageEndsAt: Date = now,
  random: () => number = Math.random,
): Settlement {
  if (result.kind === 'outage') return outageSettlement(row, result, policy, now, durationMs, outageEndsAt, random);
  if (result.kind === 'unrenderable') {
    const refusals = envelopeOf(row).map((address) => ({ address, reply: result.reason, replyCode: null }));
    return closed(row, now, durationMs, {
      status: row.acceptedRecipients.length > 0 ? 'sent' : 'failed',
      cause: 'render',
      outcome: 'permanent',
      reason: result.reason,
      replyCode: null,
      enhancedStatus: null,
      attemptRecipients: null,
      rejected: [...row.rejectedRecipients, ...refusals],
      accepted: row.acceptedRecipients,
      bounced: [],
      reply: result.reason,
      providerMessageId: null,
    });
  }

  const recipients = result.recipients;
  const accepted = unique([
    ...row.acceptedRecipients,
    ...recipients.filter((recipient) => recipient.status === 'accepted').map((recipient) => recipient.address),
  ]);
  const refused = [
    ...row.rejectedRecipients,
    ...recipients.filter((recipient) => recipient.status === 'refused').map(asRejected),
  ];
  const waiting = recipients.filter((recipient) => recipient.status === 'deferred' || recipient.status === 'unknown');
  const bounced = recipients
    .filter((recipient) => recipient.status === 'refused' && recipient.perRecipient && isHardBounce(recipient.reply))
    .map(({ address, reply }) => ({ address, reply }));
  const outcome = attemptOutcomeOf(recipients);
  // The reply the attempt is recorded with: for a sent row the one that accepted it, otherwise what went wrong.
  const acceptance = result.reply === null ? undefined : parseReply(result.reply);
  const problem = leadingReply(recipients);
  const recordedWith = (
    reply: { replyCode: number | null; enhancedStatus: string | null; reply: string | null } | undefined,
  ) => ({
    replyCode: reply?.replyCode ?? null,
    enhancedStatus: reply?.enhancedStatus ?? null,
    reply: reply?.reply ?? null,
    attemptRecipients: recipients,
    bounced,
    providerMessageId: result.providerMessageId,
    ...providerFacts(result),
  });

  if (waiting.length === 0) {
    const sent = accepted.length > 0;
    return closed(row, now, durationMs, {
      ...recordedWith(sent ? (acceptance ?? problem) : problem),
      status: sent ? 'sent' : 'failed',
      cause: 'refused',
      outcome,
      reason: problem?.reply ?? 'refused',
      rejected: refused,
      accepted,
    });
  }

  const common = recordedWith(problem);
  const reason = problem?.reply ?? 'deferred';
  const cause: FailureCause = outcome === 'unknown' ? 'unknown' : outcome === 'partial' ? 'partial' : 'deferred';
  const retry = decideRetry(row, true, policy, now, random);
  const expires = retry.retry && row.expiresAt !== null && retry.nextAttemptAt >= row.expiresAt;
  if (retry.retry && !expires) {
    return {
      ...base(row, now, durationMs),
      ...common,
      status: 'pending',
      refundAttempt: 0,
      nextAttemptAt: retry.nextAttemptAt,
      lastError: reason,
      outcome,
      acceptedRecipients: accepted,
      rejectedRecipients: refused,
      sentAt: null,
      eventName: EMAIL_FAILED_EVENT,
      eventPayload: failedEvent(row, {
        status: 'pending',
        cause,
        reason,
        replyCode: common.replyCode,
        enhancedStatus: common.enhancedStatus,
        accepted,
        deferred: waiting.map((recipient) => recipient.address),
        nextAttemptAt: retry.nextAttemptAt,
        outcomeUnknown: outcome === 'unknown',
      }),
    };
  }

  // Out of attempts, time or expiry: the recipients still waiting are given up on.
  const why = expires
    ? `expired: no attempt possible before ${row.expiresAt!.toISOString()}`
    : `dead-lettered: ${!retry.retry && retry.reason === 'attempts' ? `${row.attempts} attempts used` : 'too old'}`;
  const givenUp = waiting.map((recipient) => ({ ...asRejected(recipient), reply: `${recipient.reply} (${why})` }));
  return closed(row, now, durationMs, {
    ...(accepted.length > 0 ? recordedWith(acceptance ?? problem) : common),
    status: accepted.length > 0 ? 'sent' : expires ? 'expired' : 'dead',
    cause: expires ? 'expired' : !retry.retry && retry.reason === 'attempts' ? 'attempts' : 'age',
    outcome,
    reason: `${reason} (${why})`,
    rejected: [...refused, ...givenUp],
    accepted,
    outcomeUnknown: outcome === 'unknown',
  });
}

/** A lane outage: nothing about the message was learned, so the attempt does not count; only age can end it. */
function outageSettlement(
  row: ClaimedRow,
  result: Extract<SendOutcome, { kind: 'outage' }>,
  policy: RetryPolicy,
  now: Date,
  durationMs: number,
  outageEndsAt: Date,
  random: () => number,
): Settlement {
  const retry = decideRetry(row, false, policy, now, random);
  const reply = { replyCode: result.replyCode, enhancedStatus: result.enhancedStatus };
  if (!retry.retry) {
    return closed(row, now, durationMs, {
      ...reply,
      status: row.acceptedRecipients.length > 0 ? 'sent' : 'dead',
      cause: 'age',
      outcome: 'outage',
      reason: `${result.reply} (dead-lettered: too old)`,
      attemptRecipients: null,
      rejected: row.rejectedRecipients,
      accepted: row.acceptedRecipients,
      bounced: [],
      reply: result.reply,
      providerMessageId: null,
      refund: true,
    });
  }
  const nextAttemptAt = new Date(Math.max(outageEndsAt.getTime(), now.getTime()));
  if (row.expiresAt !== null && nextAttemptAt >= row.expiresAt) {
    return closed(row, now, durationMs, {
      ...reply,
      status: row.acceptedRecipients.length > 0 ? 'sent' : 'expired',
      cause: 'expired',
      outcome: 'outage',
      reason: `${result.reply} (expired: no attempt possible before ${row.expiresAt.toISOString()})`,
      attemptRecipients: null,
      rejected: row.rejectedRecipients,
      accepted: row.acceptedRecipients,
      bounced: [],
      reply: result.reply,
      providerMessageId: null,
      refund: true,
    });
  }
  return {
    ...base(row, now, durationMs),
    ...reply,
    status: 'pending',
    refundAttempt: 1,
    nextAttemptAt,
    lastError: result.reply,
    reply: result.reply,
    providerMessageId: null,
    providerRequestId: result.providerRequestId ?? null,
    providerAcceptedAt: null,
    deduplicatedByKey: false,
    acceptedRecipients: null,
    rejectedRecipients: null,
    attemptRecipients: null,
    sentAt: null,
    outcome: 'outage',
    bounced: [],
    eventName: EMAIL_FAILED_EVENT,
    eventPayload: failedEvent(
      { ...row, attempts: row.attempts - 1 },
      {
        ...reply,
        status: 'pending',
        cause: 'outage',
        reason: result.reply,
        accepted: row.acceptedRecipients,
        deferred: envelopeOf(row),
        nextAttemptAt,
        outcomeUnknown: false,
      },
    ),
  };
}

interface Closing {
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
function closed(row: ClaimedRow, now: Date, durationMs: number, closing: Closing): Settlement {
  const refundAttempt = closing.refund ? 1 : 0;
  const rejected = [
    ...closing.rejected,
    ...row.suppressed.map((address) => ({ address, reply: 'suppressed: not sent', replyCode: null })),
  ];
  const settlement = {
    ...base(row, now, durationMs),
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

function base(row: ClaimedRow, _now: Date, durationMs: number) {
  return { id: row.id, lockToken: row.lockToken, attemptId: row.attemptId, durationMs };
}

type FailedEventFacts = Pick<
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

function failedEvent(row: ClaimedRow, facts: FailedEventFacts): FailedEventPayload {
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

/** Closes a claimed row that must not be sent (see `ClaimedRow.skipReason`), without an attempt. */
export function skipSettlement(row: ClaimedRow & { skipReason: NonNullable<ClaimedRow['skipReason']> }): Settlement {
  const { cause, reason } = SKIP_REASONS[row.skipReason];
  return closed(row, new Date(), 0, {
    status: row.skipReason,
    cause,
    outcome: 'permanent',
    reason,
    replyCode: null,
    enhancedStatus: null,
    attemptRecipients: null,
    accepted: row.acceptedRecipients,
    rejected: row.rejectedRecipients,
    bounced: [],
    reply: null,
    providerMessageId: null,
    refund: true,
  });
}
