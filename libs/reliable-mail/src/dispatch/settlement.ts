import type { EmailFailedEvent, FailureCause } from '../events/email-failed.event.js';
import type { EmailSentEvent } from '../events/email-sent.event.js';
import { EMAIL_FAILED_EVENT, EMAIL_SENT_EVENT } from '../reliable-mail.constants.js';
import { isHardBounceStatus } from '../shared/enhanced-status.js';
import { decideRetry, type RetryPolicy } from '../shared/retry-policy.js';
import type { RejectedRecipient } from '../outbox/mail.types.js';
import type { ClaimedRow, Settlement } from '../outbox/queue.types.js';
import type { RecipientOutcome, SendOutcome } from '../transport/mail-transport.interface.js';
import { envelopeOf } from './envelope.js';

// The settle decision, a pure unit: what becomes of a claimed row, decided from what its attempt came to (or from
// why its claim said not to send it), the row as claimed, the retry policy and the time. One entry point,
// `settlementFor`; each kind of cause has its function below, and every settlement is built by one of two
// builders, `closedSettlement` (a final status and its event) and `pendingSettlement` (the row waits for another
// attempt).

/**
 * What one attempt came to: the transport's outcome; every recipient deferred because the mail could not be
 * rendered yet (`renderDeferred`: the transport was not reached, so it says nothing of the server); or a mail that
 * could not be made into a message (its template is not registered or throws, an attachment cannot be fetched).
 */
export type AttemptResult =
  | SendOutcome
  | (Extract<SendOutcome, { kind: 'attempted' }> & { renderDeferred: true })
  | { kind: 'unrenderable'; reason: string };

type Attempted = Extract<SendOutcome, { kind: 'attempted' }>;
type Outage = Extract<SendOutcome, { kind: 'outage' }>;
type SkipReason = NonNullable<ClaimedRow['skipReason']>;

/** What a row is settled on: an attempt's result, or the reason its claim gave for not sending it. */
export type SettleCause = AttemptResult | { kind: 'skipped'; reason: SkipReason };

/** The facts every part of one decision shares. */
interface Decision {
  row: ClaimedRow;
  policy: RetryPolicy;
  now: Date;
  durationMs: number;
  /** When the lane sends again: the retry time of a row whose send the lane's outage or pause held back. */
  resumesAt: Date;
  random: () => number;
}

/**
 * What becomes of a claimed row: its new state, the attempt's record and the event that reports it. The row is
 * `sent` once every recipient took the message or refused it and one took it; recipients deferred are retried on
 * their own, with the same Message-ID, until they are settled or the row runs out of attempts or time. A lane
 * outage, a send its transport held back and a row closed at its claim are not counted as an attempt.
 */
export function settlementFor(
  row: ClaimedRow,
  cause: SettleCause,
  policy: RetryPolicy,
  now: Date,
  durationMs: number,
  resumesAt: Date = now,
  random: () => number = Math.random,
): Settlement {
  const decision: Decision = { row, policy, now, durationMs, resumesAt, random };
  switch (cause.kind) {
    case 'attempted':
      return afterAttempt(decision, cause);
    case 'outage':
      return afterOutage(decision, cause);
    case 'unrenderable':
      return afterUnrenderable(decision, cause.reason);
    case 'skipped':
      return afterSkip(decision, cause.reason);
  }
}

/**
 * The attempt record's outcome: `outage` for a refused session, `permanent` for a mail that cannot be rendered,
 * otherwise from what became of the recipients. What a send's span reports.
 */
export function attemptOutcomeOf(result: AttemptResult): Settlement['outcome'] {
  if (result.kind === 'outage') return 'outage';
  if (result.kind === 'unrenderable') return 'permanent';
  return recipientsOutcome(result.recipients);
}

function recipientsOutcome(recipients: RecipientOutcome[]): Exclude<Settlement['outcome'], 'outage'> {
  const has = (status: RecipientOutcome['status']) => recipients.some((recipient) => recipient.status === status);
  if (has('unknown')) return 'unknown';
  if (has('deferred')) return has('accepted') ? 'partial' : 'transient';
  return has('accepted') || recipients.length === 0 ? 'sent' : 'permanent';
}

/** The reply that best explains what went wrong in an attempt: an unknown outcome, then a deferral, then a refusal. */
export function leadingReply(recipients: RecipientOutcome[]): RecipientOutcome | undefined {
  for (const status of ['unknown', 'deferred', 'refused'] as const) {
    const found = recipients.find((recipient) => recipient.status === status);
    if (found) return found;
  }
  return undefined;
}

/**
 * The reply that accepted the message: the recipient the attempt's accepting reply (`SendOutcome.reply`) was for,
 * with the code and enhanced status the transport read from it, or the first recipient accepted.
 */
export function acceptingReply(result: Attempted): RecipientOutcome | undefined {
  if (result.reply === null) return undefined;
  const accepted = result.recipients.filter((recipient) => recipient.status === 'accepted');
  return accepted.find((recipient) => recipient.reply?.trim() === result.reply!.trim()) ?? accepted[0];
}

/** What the attempt's record keeps of the server's or the provider's answer. */
interface AttemptRecord {
  replyCode: number | null;
  enhancedStatus: string | null;
  reply: string | null;
  attemptRecipients: RecipientOutcome[] | null;
  /** Addresses the server said, of each alone, do not exist: they go on the suppression list. */
  bounced: Settlement['bounced'];
  providerMessageId: string | null;
  providerRequestId: string | null;
  providerAcceptedAt: Date | null;
  deduplicatedByKey: boolean;
  transport: string | null;
}

/** A settlement without a server's answer (a row not sent, a mail not rendered), with the text it is closed for. */
const noAnswer = (reply: string | null): AttemptRecord => ({
  replyCode: null,
  enhancedStatus: null,
  reply,
  attemptRecipients: null,
  bounced: [],
  providerMessageId: null,
  providerRequestId: null,
  providerAcceptedAt: null,
  deduplicatedByKey: false,
  transport: null,
});

const unique = <T>(items: T[]): T[] => [...new Set(items)];

const asRejected = (outcome: RecipientOutcome): RejectedRecipient => ({
  address: outcome.address,
  reply: outcome.reply,
  replyCode: outcome.replyCode,
});

function afterAttempt(decision: Decision, result: Attempted): Settlement {
  const { row } = decision;
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
  const outcome = recipientsOutcome(recipients);
  const problem = leadingReply(recipients);
  // The attempt is recorded with the reply that accepted it for a row that is sent, otherwise with what went wrong.
  const recordedWith = (reply: RecipientOutcome | undefined): AttemptRecord => ({
    replyCode: reply?.replyCode ?? null,
    enhancedStatus: reply?.enhancedStatus ?? null,
    reply: reply?.reply ?? null,
    attemptRecipients: recipients,
    bounced: recipients
      .filter(
        (recipient) =>
          recipient.status === 'refused' && recipient.perRecipient && isHardBounceStatus(recipient.enhancedStatus),
      )
      .map(({ address, reply }) => ({ address, reply })),
    providerMessageId: result.providerMessageId,
    providerRequestId: result.providerRequestId ?? null,
    providerAcceptedAt: result.acceptedAt ?? null,
    deduplicatedByKey: result.deduplicatedByKey ?? false,
    transport: result.transport ?? null,
  });
  const asSent = recordedWith(acceptingReply(result) ?? problem);
  const asFailing = recordedWith(problem);

  if (waiting.length === 0) {
    const sent = accepted.length > 0;
    return closedSettlement(decision, sent ? asSent : asFailing, {
      status: sent ? 'sent' : 'failed',
      cause: 'refused',
      outcome,
      reason: problem?.reply ?? 'refused',
      rejected: refused,
      accepted,
    });
  }

  const reason = problem?.reply ?? 'deferred';
  const waitsWith = { outcome, lastError: reason, accepted, rejected: refused };
  if ((result.stoppedAtShutdown || result.heldBack) && outcome !== 'unknown') {
    // The app shut down between two transactions or requests, or the transport held the send back (a Retry-After
    // past its deadline): what went out is recorded, the rest were not tried. Not charged, and no failed event: the
    // next claim sends to them, at once after a shutdown, once the lane resumes after a hold. An attempt that may
    // have reached a recipient (unknown) is charged as any other: a refund would hide from the next claim that the
    // row was sent before, and with it the recipients it may have taken (`possiblyTakenBefore`).
    return pendingSettlement(decision, asFailing, {
      ...waitsWith,
      refundAttempt: 1,
      nextAttemptAt: result.heldBack ? decision.resumesAt : decision.now,
      event: null,
    });
  }
  const retry = decideRetry(row, true, decision.policy, decision.now, decision.random);
  const expires = retry.retry && row.expiresAt !== null && retry.nextAttemptAt >= row.expiresAt;
  if (retry.retry && !expires) {
    const cause: FailureCause = outcome === 'unknown' ? 'unknown' : outcome === 'partial' ? 'partial' : 'deferred';
    return pendingSettlement(decision, asFailing, {
      ...waitsWith,
      refundAttempt: 0,
      nextAttemptAt: retry.nextAttemptAt,
      event: {
        cause,
        deferred: waiting.map((recipient) => recipient.address),
        outcomeUnknown: outcome === 'unknown',
      },
    });
  }

  // Out of attempts, time or expiry: the recipients still waiting are given up on.
  const why = expires
    ? expiredWhy(row)
    : `dead-lettered: ${!retry.retry && retry.reason === 'attempts' ? `${row.attempts} attempts used` : 'too old'}`;
  const givenUp = waiting.map((recipient) => ({ ...asRejected(recipient), reply: `${recipient.reply} (${why})` }));
  return closedSettlement(decision, accepted.length > 0 ? asSent : asFailing, {
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
function afterOutage(decision: Decision, result: Outage): Settlement {
  const { row, now } = decision;
  const record: AttemptRecord = {
    ...noAnswer(result.reply),
    replyCode: result.replyCode,
    enhancedStatus: result.enhancedStatus,
    providerRequestId: result.providerRequestId ?? null,
    transport: result.transport ?? null,
  };
  const retry = decideRetry(row, false, decision.policy, now, decision.random);
  const nextAttemptAt = new Date(Math.max(decision.resumesAt.getTime(), now.getTime()));
  const expires = row.expiresAt !== null && nextAttemptAt >= row.expiresAt;
  if (!retry.retry || expires) {
    const why = expires ? expiredWhy(row) : 'dead-lettered: too old';
    return closedSettlement(decision, record, {
      status: row.acceptedRecipients.length > 0 ? 'sent' : expires ? 'expired' : 'dead',
      cause: expires ? 'expired' : 'age',
      outcome: 'outage',
      reason: `${result.reply} (${why})`,
      rejected: row.rejectedRecipients,
      accepted: row.acceptedRecipients,
      refund: true,
    });
  }
  return pendingSettlement(decision, record, {
    outcome: 'outage',
    refundAttempt: 1,
    nextAttemptAt,
    lastError: result.reply,
    // Nothing changed for any recipient.
    accepted: null,
    rejected: null,
    event: { cause: 'outage', deferred: envelopeOf(row), outcomeUnknown: false },
  });
}

/** A mail that cannot be made into a message fails for every recipient still waiting; those that took it keep it. */
function afterUnrenderable(decision: Decision, reason: string): Settlement {
  const { row } = decision;
  const refusals = envelopeOf(row).map((address) => ({ address, reply: reason, replyCode: null }));
  return closedSettlement(decision, noAnswer(reason), {
    status: row.acceptedRecipients.length > 0 ? 'sent' : 'failed',
    cause: 'render',
    outcome: 'permanent',
    reason,
    rejected: [...row.rejectedRecipients, ...refusals],
    accepted: row.acceptedRecipients,
  });
}

const SKIP_REASONS: Record<SkipReason, { cause: FailureCause; reason: string }> = {
  cancelled: { cause: 'cancelled', reason: 'cancelled while it was being sent' },
  expired: { cause: 'expired', reason: 'expired before it could be sent' },
  suppressed: {
    cause: 'suppressed',
    reason: "every recipient is on the suppression list, or unsubscribed from the lane's category",
  },
  dead: {
    cause: 'crashes',
    reason: 'dead-lettered: its worker stopped without settling it until no attempt or age was left',
  },
};

/**
 * A claimed row that must not be sent (see `ClaimedRow.skipReason`) is closed without an attempt. A row that some
 * recipients took in an earlier attempt is `sent`, as a settle makes a row whose other recipients were given up on:
 * those are recorded refused, for the skip's reason.
 */
function afterSkip(decision: Decision, skipReason: SkipReason): Settlement {
  const { row } = decision;
  const { cause, reason } = SKIP_REASONS[skipReason];
  const sent = row.acceptedRecipients.length > 0;
  const givenUp = sent ? envelopeOf(row).map((address) => ({ address, reply: reason, replyCode: null })) : [];
  return closedSettlement(decision, noAnswer(null), {
    status: sent ? 'sent' : skipReason,
    cause,
    outcome: 'permanent',
    reason,
    accepted: row.acceptedRecipients,
    rejected: [...row.rejectedRecipients, ...givenUp],
    refund: true,
  });
}

/** Why a row whose next attempt would come after its expiry is closed. */
function expiredWhy(row: ClaimedRow): string {
  return `expired: no attempt possible before ${row.expiresAt!.toISOString()}`;
}

interface Closing {
  status: Exclude<Settlement['status'], 'pending'>;
  cause: FailureCause;
  outcome: Settlement['outcome'];
  reason: string;
  accepted: string[];
  rejected: RejectedRecipient[];
  outcomeUnknown?: boolean;
  /** The attempt is not counted (an outage, a row closed at its claim). */
  refund?: boolean;
}

/** A final settlement: `sent` with its event, or a failure with the event saying why. */
function closedSettlement({ row, now, durationMs }: Decision, record: AttemptRecord, closing: Closing): Settlement {
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
    id: row.id,
    lockToken: row.lockToken,
    attemptId: row.attemptId,
    partitionDay: row.partitionDay,
    durationMs,
    ...record,
    status: closing.status,
    refundAttempt,
    nextAttemptAt: null,
    outcome: closing.outcome,
    acceptedRecipients: closing.accepted,
    rejectedRecipients: rejected.length > 0 ? rejected : null,
  } as const;
  const attempt = row.attempts - refundAttempt;
  if (closing.status === 'sent') {
    const event: Omit<EmailSentEvent, 'eventId'> = {
      id: row.id,
      messageId: row.messageId,
      idempotencyKey: row.idempotencyKey,
      accepted: closing.accepted,
      rejected,
      attempt,
      reply: record.reply ?? '',
      providerMessageId: record.providerMessageId,
      providerRequestId: record.providerRequestId,
      providerAcceptedAt: record.providerAcceptedAt,
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
    eventPayload: failedEvent(row, attempt, record, {
      status: closing.status,
      cause: closing.cause,
      reason: closing.reason,
      accepted: closing.accepted,
      deferred: [],
      nextAttemptAt: null,
      outcomeUnknown: closing.outcomeUnknown ?? false,
    }),
  };
}

interface Waiting {
  outcome: Settlement['outcome'];
  refundAttempt: 0 | 1;
  nextAttemptAt: Date;
  lastError: string;
  /** Every recipient that took it and refused it so far; null when this attempt changed nothing for any. */
  accepted: string[] | null;
  rejected: RejectedRecipient[] | null;
  /** What the failed event adds to the settlement's facts; null when the wait is reported by no event. */
  event: Pick<EmailFailedEvent, 'cause' | 'deferred' | 'outcomeUnknown'> | null;
}

/** The row waits for its next attempt: what this one reached is recorded, the rest wait. */
function pendingSettlement({ row, durationMs }: Decision, record: AttemptRecord, waiting: Waiting): Settlement {
  const { event } = waiting;
  return {
    id: row.id,
    lockToken: row.lockToken,
    attemptId: row.attemptId,
    partitionDay: row.partitionDay,
    durationMs,
    ...record,
    status: 'pending',
    refundAttempt: waiting.refundAttempt,
    nextAttemptAt: waiting.nextAttemptAt,
    lastError: waiting.lastError,
    outcome: waiting.outcome,
    acceptedRecipients: waiting.accepted,
    rejectedRecipients: waiting.rejected,
    sentAt: null,
    eventName: event ? EMAIL_FAILED_EVENT : null,
    eventPayload: event
      ? failedEvent(row, row.attempts - waiting.refundAttempt, record, {
          ...event,
          status: 'pending',
          reason: waiting.lastError,
          accepted: waiting.accepted ?? row.acceptedRecipients,
          nextAttemptAt: waiting.nextAttemptAt,
        })
      : {},
  };
}

/** The failed event as stored: the event id is the recorded row's, added when it is emitted. */
function failedEvent(
  row: ClaimedRow,
  attempt: number,
  record: AttemptRecord,
  facts: Pick<
    EmailFailedEvent,
    'status' | 'cause' | 'reason' | 'accepted' | 'deferred' | 'nextAttemptAt' | 'outcomeUnknown'
  >,
): Omit<EmailFailedEvent, 'eventId'> {
  return {
    id: row.id,
    messageId: row.messageId,
    idempotencyKey: row.idempotencyKey,
    attempt,
    ...facts,
    replyCode: record.replyCode,
    enhancedStatus: record.enhancedStatus,
    permanent: facts.cause === 'refused',
    deadLettered: facts.status === 'dead',
    metadata: row.metadata,
  };
}
