import { EMAIL_FAILED_EVENT, type EmailFailedEvent } from '../events/email-failed.event.js';
import { EMAIL_SENT_EVENT, type EmailSentEvent } from '../events/email-sent.event.js';
import type { ClaimedRow, Settlement } from '../outbox/outbox.repository.js';
import { decideRetry, type RetryPolicy } from './retry-policy.js';
import type { SmtpVerdict } from './smtp-reply.js';

/** The event as it is stored in `mail_outbox_event`, so that a first emission and a redelivery see the same thing. */
function asStoredJson(event: object): Record<string, unknown> {
  return JSON.parse(JSON.stringify(event)) as Record<string, unknown>;
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
      eventPayload: asStoredJson(event),
    };
  }

  const senderFault = verdict.kind === 'sender';
  const outcomeUnknown = verdict.kind === 'transient' && verdict.outcomeUnknown;
  const retry = verdict.kind === 'permanent' ? null : decideRetry(row, !senderFault, policy, now, random);
  const status = verdict.kind === 'permanent' ? 'failed' : retry?.retry ? 'pending' : 'dead';
  const nextAttemptAt = retry?.retry ? retry.nextAttemptAt : null;
  const giveUp = retry && !retry.retry ? ` (dead-lettered: ${retry.reason === 'attempts' ? `${row.attempts} attempts used` : 'too old'})` : '';
  const event: EmailFailedEvent = {
    id: row.id,
    messageId: row.messageId,
    idempotencyKey: row.idempotencyKey,
    attempt: row.attempts,
    permanent: verdict.kind === 'permanent',
    senderFault,
    outcomeUnknown,
    replyCode: verdict.replyCode,
    enhancedStatus: verdict.enhancedStatus,
    reason: verdict.reply,
    nextAttemptAt,
    deadLettered: status === 'dead',
    metadata: row.metadata,
  };
  return {
    ...common,
    status,
    refundAttempt: senderFault && status === 'pending' ? 1 : 0,
    nextAttemptAt,
    lastError: `${verdict.reply}${giveUp}`,
    providerMessageId: null,
    rejectedRecipients: null,
    sentAt: null,
    outcome: senderFault ? 'sender' : outcomeUnknown ? 'unknown' : verdict.kind,
    eventName: EMAIL_FAILED_EVENT,
    eventPayload: asStoredJson(event),
  };
}
