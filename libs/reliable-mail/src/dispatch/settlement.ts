import type { FailureCause } from '../events/email-failed.event.js';
import { EMAIL_FAILED_EVENT } from '../reliable-mail.constants.js';
import type { RetryPolicy } from '../shared/retry-policy.js';
import type { AttemptOutcome, RejectedRecipient } from '../outbox/mail.types.js';
import type { ClaimedRow, Settlement } from '../outbox/queue.types.js';
import type { RecipientOutcome, SendOutcome } from '../transport/mail-transport.interface.js';
import { isHardBounce, parseReply } from '../transport/smtp/smtp-reply.js';
import { decideRetry } from '../shared/retry-policy.js';
import { base, closed, envelopeOf, failedEvent } from './settlement-closing.js';

/**
 * What one attempt came to, as the settlement decides on it: the transport's outcome; every recipient deferred
 * because the mail could not be rendered yet (`renderDeferred`: the transport was not reached, so it says nothing of
 * the server); or a mail that could not be made into a message (its template is not registered or throws, an
 * attachment cannot be fetched).
 */
export type AttemptResult =
  | SendOutcome
  | (Extract<SendOutcome, { kind: 'attempted' }> & { renderDeferred: true })
  | { kind: 'unrenderable'; reason: string };

/** What the provider said of the request, whatever its outcome: recorded on the attempt and the row. */
function providerFacts(outcome: Extract<SendOutcome, { kind: 'attempted' }>) {
  return {
    providerRequestId: outcome.providerRequestId ?? null,
    providerAcceptedAt: outcome.acceptedAt ?? null,
    deduplicatedByKey: outcome.deduplicatedByKey ?? false,
  };
}

const unique = <T>(items: T[]): T[] => [...new Set(items)];

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
 * time. A lane outage, and a send its transport held back, are retried when the lane resumes (`outageEndsAt`) and
 * not counted as an attempt.
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
  /** The row waits for its next attempt: what this one reached is recorded, the rest wait. */
  const pending = (
    refundAttempt: 0 | 1,
    nextAttemptAt: Date,
    event: Pick<Settlement, 'eventName' | 'eventPayload'>,
  ): Settlement => ({
    ...base(row, durationMs),
    ...common,
    status: 'pending',
    refundAttempt,
    nextAttemptAt,
    lastError: reason,
    outcome,
    acceptedRecipients: accepted,
    rejectedRecipients: refused,
    sentAt: null,
    ...event,
  });
  if ((result.stoppedAtShutdown || result.heldBack) && outcome !== 'unknown') {
    // The app shut down between two transactions or requests, or the transport held the send back (a Retry-After
    // past its deadline): what went out is recorded, the rest were not tried. Not charged, and no failed event: the
    // next claim sends to them, at once after a shutdown, once the lane resumes after a hold. An attempt that may
    // have reached a recipient (unknown) is charged as any other: a refund would hide from the next claim that the
    // row was sent before, and with it the recipients it may have taken (`possiblyTakenBefore`).
    return pending(1, result.heldBack ? outageEndsAt : now, { eventName: null, eventPayload: {} });
  }
  const cause: FailureCause = outcome === 'unknown' ? 'unknown' : outcome === 'partial' ? 'partial' : 'deferred';
  const retry = decideRetry(row, true, policy, now, random);
  const expires = retry.retry && row.expiresAt !== null && retry.nextAttemptAt >= row.expiresAt;
  if (retry.retry && !expires) {
    return pending(0, retry.nextAttemptAt, {
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
    });
  }

  // Out of attempts, time or expiry: the recipients still waiting are given up on.
  const why = expires
    ? expiredWhy(row)
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

/** Why a row whose next attempt would come after its expiry is closed. */
function expiredWhy(row: ClaimedRow): string {
  return `expired: no attempt possible before ${row.expiresAt!.toISOString()}`;
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
  const nextAttemptAt = new Date(Math.max(outageEndsAt.getTime(), now.getTime()));
  const expires = row.expiresAt !== null && nextAttemptAt >= row.expiresAt;
  if (!retry.retry || expires) {
    const why = expires ? expiredWhy(row) : 'dead-lettered: too old';
    return closed(row, now, durationMs, {
      ...reply,
      status: row.acceptedRecipients.length > 0 ? 'sent' : expires ? 'expired' : 'dead',
      cause: expires ? 'expired' : 'age',
      outcome: 'outage',
      reason: `${result.reply} (${why})`,
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
    ...base(row, durationMs),
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
