import { EMAIL_FAILED_EVENT, type EmailFailedEvent } from '../events/email-failed.event.js';
import { EMAIL_SENT_EVENT, type EmailSentEvent } from '../events/email-sent.event.js';
import type { ClaimedRow, Settlement } from '../outbox/queue.types.js';
import { recipientsOf } from '../outbox/recipients.js';
import type { RetryPolicy } from '../options/resolve-options.js';
import { decideRetry } from './retry-policy.js';
import { isHardBounce, type SmtpVerdict } from './smtp-reply.js';

/** The addresses this verdict proves do not exist, lower case, for the suppression list. */
function bouncedBy(row: ClaimedRow, verdict: SmtpVerdict): string[] {
  if (verdict.kind === 'sent') {
    return verdict.rejected
      .filter((recipient) => isHardBounce(recipient.reply))
      .map((recipient) => recipient.address.toLowerCase());
  }
  if (verdict.kind !== 'permanent' || !verdict.hardBounce) return [];
  return verdict.bouncedRecipients ?? recipientsOf(row.payload).map((address) => address.toLowerCase());
}

/**
 * The verdict of a row that could not be made into a message (its template is not registered or throws, an
 * attachment cannot be fetched): nothing was sent, and trying again would fail the same way, so the row fails.
 */
export function renderFailureVerdict(reason: string): SmtpVerdict {
  return {
    kind: 'permanent',
    replyCode: null,
    enhancedStatus: null,
    reply: reason,
    hardBounce: false,
    bouncedRecipients: [],
  };
}

/** What becomes of a claimed row after one attempt, with the attempt's record and the event that reports it. */
export function settlementFor(
  row: ClaimedRow,
  verdict: SmtpVerdict,
  policy: RetryPolicy,
  now: Date,
  durationMs: number,
  random: () => number = Math.random,
): Settlement {
  const common = {
    id: row.id,
    lockToken: row.lockToken,
    attemptId: row.attemptId,
    replyCode: verdict.replyCode,
    enhancedStatus: verdict.enhancedStatus,
    reply: verdict.reply,
    durationMs,
    bounced: bouncedBy(row, verdict),
  };

  if (verdict.kind === 'sent') {
    const event: EmailSentEvent = {
      id: row.id,
      messageId: row.messageId,
      idempotencyKey: row.idempotencyKey,
      accepted: verdict.accepted,
      rejected: verdict.rejected,
      attempt: row.attempts,
      reply: verdict.reply,
      providerMessageId: verdict.providerMessageId,
      sentAt: now,
      metadata: row.metadata,
    };
    return {
      ...common,
      status: 'sent',
      refundAttempt: 0,
      nextAttemptAt: null,
      lastError: null,
      providerMessageId: verdict.providerMessageId,
      rejectedRecipients: verdict.rejected.length > 0 ? verdict.rejected : null,
      sentAt: now,
      outcome: 'sent',
      eventName: EMAIL_SENT_EVENT,
      eventPayload: event,
    };
  }

  const senderFault = verdict.kind === 'sender';
  const outcomeUnknown = verdict.kind === 'transient' && verdict.outcomeUnknown;
  const retry = verdict.kind === 'permanent' ? null : decideRetry(row, !senderFault, policy, now, random);
  let status: Settlement['status'] = verdict.kind === 'permanent' ? 'failed' : retry?.retry ? 'pending' : 'dead';
  let nextAttemptAt = retry?.retry ? retry.nextAttemptAt : null;
  let reason = verdict.reply;
  if (nextAttemptAt && row.expiresAt && nextAttemptAt >= row.expiresAt) {
    status = 'expired';
    nextAttemptAt = null;
    reason = `${verdict.reply} (expired: no attempt possible before ${row.expiresAt.toISOString()})`;
  } else if (retry && !retry.retry) {
    reason = `${verdict.reply} (dead-lettered: ${retry.reason === 'attempts' ? `${row.attempts} attempts used` : 'too old'})`;
  }
  return {
    ...common,
    status,
    refundAttempt: senderFault && status === 'pending' ? 1 : 0,
    nextAttemptAt,
    lastError: reason,
    providerMessageId: null,
    rejectedRecipients: null,
    sentAt: null,
    outcome: senderFault ? 'sender' : outcomeUnknown ? 'unknown' : verdict.kind,
    eventName: EMAIL_FAILED_EVENT,
    eventPayload: failedEvent(row, status, reason, nextAttemptAt, {
      permanent: verdict.kind === 'permanent',
      senderFault,
      outcomeUnknown,
      replyCode: verdict.replyCode,
      enhancedStatus: verdict.enhancedStatus,
    }),
  };
}

const SKIP_REASONS: Record<NonNullable<ClaimedRow['skipReason']>, string> = {
  cancelled: 'cancelled while it was being sent',
  expired: 'expired before it could be sent',
  suppressed: 'every recipient is on the suppression list',
  dead: 'dead-lettered: its worker stopped without settling it until no attempt or age was left',
};

/** Closes a claimed row that must not be sent (see `ClaimedRow.skipReason`), without an attempt. */
export function skipSettlement(row: ClaimedRow & { skipReason: NonNullable<ClaimedRow['skipReason']> }): Settlement {
  const reason = SKIP_REASONS[row.skipReason];
  return {
    id: row.id,
    lockToken: row.lockToken,
    attemptId: null,
    status: row.skipReason,
    refundAttempt: 1,
    nextAttemptAt: null,
    lastError: reason,
    replyCode: null,
    enhancedStatus: null,
    reply: null,
    providerMessageId: null,
    rejectedRecipients: null,
    sentAt: null,
    outcome: 'permanent',
    durationMs: 0,
    bounced: [],
    eventName: EMAIL_FAILED_EVENT,
    eventPayload: failedEvent({ ...row, attempts: row.attempts - 1 }, row.skipReason, reason, null, {
      permanent: true,
      senderFault: false,
      outcomeUnknown: false,
      replyCode: null,
      enhancedStatus: null,
    }),
  };
}

function failedEvent(
  row: ClaimedRow,
  status: Settlement['status'],
  reason: string,
  nextAttemptAt: Date | null,
  reply: Pick<EmailFailedEvent, 'permanent' | 'senderFault' | 'outcomeUnknown' | 'replyCode' | 'enhancedStatus'>,
): EmailFailedEvent {
  return {
    id: row.id,
    messageId: row.messageId,
    idempotencyKey: row.idempotencyKey,
    attempt: row.attempts,
    status,
    ...reply,
    reason,
    nextAttemptAt,
    deadLettered: status === 'dead',
    metadata: row.metadata,
  };
}
