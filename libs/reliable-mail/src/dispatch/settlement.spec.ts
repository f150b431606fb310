import { describe, expect, it } from '@jest/globals';
import { EMAIL_FAILED_EVENT } from '../events/email-failed.event.js';
import { EMAIL_SENT_EVENT } from '../events/email-sent.event.js';
import type { RejectedRecipient } from '../outbox/mail.types.js';
import type { ClaimedRow, Settlement } from '../outbox/queue.types.js';
import type { RetryPolicy } from '../options/resolve-options.js';
import { settlementFor, skipSettlement } from './settlement.js';
import type { SmtpVerdict } from './smtp-reply.js';

const policy: RetryPolicy = { maxAttempts: 3, baseDelayMs: 1_000, maxDelayMs: 60_000, maxAgeMs: 86_400_000 };
const now = new Date('2026-12-01T12:00:00.000Z');
const at = (offsetMs: number) => new Date(now.getTime() + offsetMs);
const random = () => 0.5;
const durationMs = 42;

function claimedRow(attempts: number, ageMs = 60_000): ClaimedRow {
  return {
    id: 'row-1',
    messageId: '<0b1c@mail.example.com>',
    idempotencyKey: 'order-7',
    payload: {
      v: 1,
      from: { address: 'noreply@example.com' },
      to: [{ address: 'a@example.com' }],
      cc: [],
      bcc: [],
      replyTo: [],
      subject: 'Hi',
      text: 'Hello',
      headers: {},
    },
    metadata: { source: 'unit' },
    attempts,
    maxAttempts: 3,
    ageFrom: at(-ageMs),
    lane: 'default',
    expiresAt: null,
    lockToken: 'lock-1',
    attemptId: 'attempt-1',
    skipReason: null,
    suppressed: [],
    leaseEndsAt: 0,
  };
}

/** The fields every settlement copies from the row and the verdict. */
function common(verdict: SmtpVerdict) {
  return {
    id: 'row-1',
    lockToken: 'lock-1',
    attemptId: 'attempt-1',
    replyCode: verdict.replyCode,
    enhancedStatus: verdict.enhancedStatus,
    reply: verdict.reply,
    durationMs,
  };
}

describe('settlementFor a sent verdict', () => {
  const rejected: RejectedRecipient[] = [{ address: 'b@example.com', reply: '550 5.1.1 User unknown', replyCode: 550 }];

  it.each([
    { name: 'all recipients accepted', rejected: [], rejectedRecipients: null },
    { name: 'rejected recipients recorded', rejected, rejectedRecipients: rejected },
  ])('$name', ({ rejected, rejectedRecipients }) => {
    const verdict: SmtpVerdict = {
      kind: 'sent',
      replyCode: 250,
      enhancedStatus: '2.0.0',
      reply: '250 2.0.0 Ok: queued as 4BZ1x2',
      providerMessageId: '4BZ1x2',
      accepted: ['a@example.com'],
      rejected,
    };
    const expected: Settlement = {
      ...common(verdict),
      bounced: rejected.length > 0 ? ['b@example.com'] : [],
      status: 'sent',
      refundAttempt: 0,
      nextAttemptAt: null,
      lastError: null,
      providerMessageId: '4BZ1x2',
      rejectedRecipients,
      sentAt: now,
      outcome: 'sent',
      eventName: EMAIL_SENT_EVENT,
      eventPayload: {
        id: 'row-1',
        messageId: '<0b1c@mail.example.com>',
        idempotencyKey: 'order-7',
        accepted: ['a@example.com'],
        rejected,
        attempt: 2,
        reply: '250 2.0.0 Ok: queued as 4BZ1x2',
        providerMessageId: '4BZ1x2',
        sentAt: now,
        metadata: { source: 'unit' },
      },
    };
    expect(settlementFor(claimedRow(2), verdict, policy, now, durationMs, random)).toEqual(expected);
  });
});

describe('settlementFor a failed verdict', () => {
  const transient = (outcomeUnknown: boolean): SmtpVerdict => ({
    kind: 'transient',
    replyCode: outcomeUnknown ? null : 451,
    enhancedStatus: outcomeUnknown ? null : '4.3.0',
    reply: outcomeUnknown ? 'Connection closed unexpectedly' : '451 4.3.0 Try again later',
    outcomeUnknown,
    slowDown: false,
  });
  const permanent: SmtpVerdict = {
    kind: 'permanent',
    replyCode: 550,
    enhancedStatus: '5.1.1',
    reply: '550 5.1.1 User unknown',
    hardBounce: true,
    bouncedRecipients: null,
  };
  const sender: SmtpVerdict = {
    kind: 'sender',
    replyCode: 535,
    enhancedStatus: '5.7.8',
    reply: '535 5.7.8 Authentication failed',
  };

  it.each<{
    name: string;
    attempts: number;
    ageMs?: number;
    verdict: SmtpVerdict;
    status: Settlement['status'];
    nextAttemptAt: Date | null;
    lastError: string;
    refundAttempt: 0 | 1;
    outcome: Settlement['outcome'];
    permanent: boolean;
    senderFault: boolean;
    outcomeUnknown: boolean;
    deadLettered: boolean;
  }>([
    {
      name: 'transient with attempts left',
      attempts: 1,
      verdict: transient(false),
      status: 'pending',
      nextAttemptAt: at(500),
      lastError: '451 4.3.0 Try again later',
      refundAttempt: 0,
      outcome: 'transient',
      permanent: false,
      senderFault: false,
      outcomeUnknown: false,
      deadLettered: false,
    },
    {
      name: 'transient at the last attempt',
      attempts: 3,
      verdict: transient(false),
      status: 'dead',
      nextAttemptAt: null,
      lastError: '451 4.3.0 Try again later (dead-lettered: 3 attempts used)',
      refundAttempt: 0,
      outcome: 'transient',
      permanent: false,
      senderFault: false,
      outcomeUnknown: false,
      deadLettered: true,
    },
    {
      name: 'transient past the age limit',
      attempts: 1,
      ageMs: 90_000_000,
      verdict: transient(false),
      status: 'dead',
      nextAttemptAt: null,
      lastError: '451 4.3.0 Try again later (dead-lettered: too old)',
      refundAttempt: 0,
      outcome: 'transient',
      permanent: false,
      senderFault: false,
      outcomeUnknown: false,
      deadLettered: true,
    },
    {
      name: 'transient with unknown outcome',
      attempts: 2,
      verdict: transient(true),
      status: 'pending',
      nextAttemptAt: at(1_000),
      lastError: 'Connection closed unexpectedly',
      refundAttempt: 0,
      outcome: 'unknown',
      permanent: false,
      senderFault: false,
      outcomeUnknown: true,
      deadLettered: false,
    },
    {
      name: 'permanent is not retried',
      attempts: 1,
      verdict: permanent,
      status: 'failed',
      nextAttemptAt: null,
      lastError: '550 5.1.1 User unknown',
      refundAttempt: 0,
      outcome: 'permanent',
      permanent: true,
      senderFault: false,
      outcomeUnknown: false,
      deadLettered: false,
    },
    {
      name: 'sender fault at the last attempt is refunded and retried',
      attempts: 3,
      verdict: sender,
      status: 'pending',
      nextAttemptAt: at(2_000),
      lastError: '535 5.7.8 Authentication failed',
      refundAttempt: 1,
      outcome: 'sender',
      permanent: false,
      senderFault: true,
      outcomeUnknown: false,
      deadLettered: false,
    },
    {
      name: 'sender fault past the age limit is dead and not refunded',
      attempts: 1,
      ageMs: 90_000_000,
      verdict: sender,
      status: 'dead',
      nextAttemptAt: null,
      lastError: '535 5.7.8 Authentication failed (dead-lettered: too old)',
      refundAttempt: 0,
      outcome: 'sender',
      permanent: false,
      senderFault: true,
      outcomeUnknown: false,
      deadLettered: true,
    },
  ])('$name', ({ attempts, ageMs, verdict, status, nextAttemptAt, lastError, refundAttempt, outcome, ...event }) => {
    const expected: Settlement = {
      ...common(verdict),
      // A hard bounce that names no recipient covers all of them.
      bounced: verdict.kind === 'permanent' ? ['a@example.com'] : [],
      status,
      refundAttempt,
      nextAttemptAt,
      lastError,
      providerMessageId: null,
      rejectedRecipients: null,
      sentAt: null,
      outcome,
      eventName: EMAIL_FAILED_EVENT,
      eventPayload: {
        id: 'row-1',
        messageId: '<0b1c@mail.example.com>',
        idempotencyKey: 'order-7',
        attempt: attempts,
        status,
        permanent: event.permanent,
        senderFault: event.senderFault,
        outcomeUnknown: event.outcomeUnknown,
        replyCode: verdict.replyCode,
        enhancedStatus: verdict.enhancedStatus,
        reason: lastError,
        nextAttemptAt,
        deadLettered: event.deadLettered,
        metadata: { source: 'unit' },
      },
    };
    expect(settlementFor(claimedRow(attempts, ageMs), verdict, policy, now, durationMs, random)).toEqual(expected);
  });
});

describe('expiry and skipped rows', () => {
  const transient: SmtpVerdict = {
    kind: 'transient',
    replyCode: 451,
    enhancedStatus: '4.3.0',
    reply: '451 4.3.0 Try again later',
    outcomeUnknown: false,
    slowDown: false,
  };

  it('a retry that would come after expiresAt ends the row as expired', () => {
    const settlement = settlementFor(
      { ...claimedRow(1), expiresAt: at(100) },
      transient,
      policy,
      now,
      durationMs,
      random,
    );
    expect(settlement).toMatchObject({
      status: 'expired',
      nextAttemptAt: null,
      refundAttempt: 0,
      outcome: 'transient',
    });
    expect(settlement.lastError).toBe(
      '451 4.3.0 Try again later (expired: no attempt possible before 2026-12-01T12:00:00.100Z)',
    );
    expect(settlement.eventPayload).toMatchObject({ status: 'expired', deadLettered: false, nextAttemptAt: null });
  });

  it('a retry before expiresAt stays pending', () => {
    const settlement = settlementFor(
      { ...claimedRow(1), expiresAt: at(60_000) },
      transient,
      policy,
      now,
      durationMs,
      random,
    );
    expect(settlement).toMatchObject({ status: 'pending', nextAttemptAt: at(500) });
  });

  it.each([
    ['cancelled', 'cancelled while it was being sent'],
    ['expired', 'expired before it could be sent'],
    ['suppressed', 'every recipient is on the suppression list'],
  ] as const)('a row claimed as %s closes without an attempt', (skipReason, reason) => {
    const settlement = skipSettlement({ ...claimedRow(2), attemptId: null, skipReason });
    expect(settlement).toMatchObject({
      status: skipReason,
      attemptId: null,
      refundAttempt: 1,
      lastError: reason,
      eventName: EMAIL_FAILED_EVENT,
    });
    expect(settlement.eventPayload).toMatchObject({
      status: skipReason,
      attempt: 1,
      permanent: true,
      reason,
      nextAttemptAt: null,
    });
  });
});
