import { describe, expect, it } from '@jest/globals';
import type { ClaimedRow } from '../outbox/queue.types.js';
import type { RecipientOutcome, SendOutcome } from '../transport/mail-transport.interface.js';
import { UNSTORED_TEXT_NOTE, withReportedTextNoted } from './noted-settlement.js';
import { settlementFor } from './settlement.js';

const now = new Date('2026-12-01T12:00:00.000Z');
const policy = { maxAttempts: 3, baseDelayMs: 1_000, maxDelayMs: 60_000, maxAgeMs: 86_400_000 };
const row: ClaimedRow = {
  id: 'row-1',
  messageId: '<0b1c@mail.example.com>',
  idempotencyKey: null,
  payload: {
    v: 2,
    from: { address: 'noreply@example.com' },
    to: [{ address: 'ann@example.com' }],
    cc: [{ address: 'bob@example.com' }],
    bcc: [],
    replyTo: [],
    subject: 'Hi',
    text: 'Hello',
    headers: {},
  },
  metadata: { orderId: 7 },
  attempts: 1,
  maxAttempts: 3,
  ageFrom: now,
  lane: 'default',
  expiresAt: null,
  lockToken: 'lock-1',
  partitionDay: '2026-12-03',
  attemptId: 'attempt-1',
  skipReason: null,
  suppressed: [],
  possiblyTakenBefore: [],
  possiblyTakenThrough: null,
  acceptedRecipients: [],
  rejectedRecipients: [],
  leaseEndsAt: 0,
};
/** Text PostgreSQL refuses whatever the JSON around it: the tests only need it to be gone from the noted one. */
const reported = 'reported \uD83D text';
const recipient = (address: string, status: RecipientOutcome['status'], replyCode: number): RecipientOutcome => ({
  address,
  status,
  replyCode,
  enhancedStatus: '5.1.1',
  reply: `${replyCode} 5.1.1 ${reported}`,
  perRecipient: true,
  providerMessageId: `id ${reported}`,
});
const attempted = (recipients: RecipientOutcome[]): SendOutcome => ({
  kind: 'attempted',
  recipients,
  reply: `250 ${reported}`,
  providerMessageId: `queue ${reported}`,
  providerRequestId: `request ${reported}`,
  acceptedAt: new Date('+200000-01-01T00:00:00.000Z'),
  slowDown: false,
});

describe('withReportedTextNoted', () => {
  it.each([
    {
      name: 'one took it, one refused with a hard bounce: still sent, the bounce still suppressed',
      result: attempted([recipient('ann@example.com', 'accepted', 250), recipient('bob@example.com', 'refused', 550)]),
      status: 'sent',
      bounced: 1,
    },
    {
      name: 'every recipient deferred: still pending, at the same time, with its failed event',
      result: attempted([recipient('ann@example.com', 'deferred', 451), recipient('bob@example.com', 'deferred', 451)]),
      status: 'pending',
      bounced: 0,
    },
    {
      name: 'every recipient refused: still failed, both suppressed',
      result: attempted([recipient('ann@example.com', 'refused', 554), recipient('bob@example.com', 'refused', 554)]),
      status: 'failed',
      bounced: 2,
    },
    {
      name: 'a template that throws: still failed, for the reason noted',
      result: { kind: 'unrenderable' as const, reason: `template failed: ${reported}` },
      status: 'failed',
      bounced: 0,
    },
  ])('$name', ({ result, status, bounced }) => {
    const settlement = settlementFor(row, result, policy, now, 12, now, () => 0.5);
    const noted = withReportedTextNoted(settlement);
    expect(settlement.status).toBe(status);
    expect(settlement.bounced).toHaveLength(bounced);
    // The decision is kept whole.
    expect(noted).toMatchObject({
      id: settlement.id,
      lockToken: settlement.lockToken,
      attemptId: settlement.attemptId,
      status: settlement.status,
      refundAttempt: settlement.refundAttempt,
      nextAttemptAt: settlement.nextAttemptAt,
      sentAt: settlement.sentAt,
      outcome: settlement.outcome,
      durationMs: settlement.durationMs,
      acceptedRecipients: settlement.acceptedRecipients,
      eventName: settlement.eventName,
    });
    expect(noted.rejectedRecipients?.map((rejected) => rejected.address)).toEqual(
      settlement.rejectedRecipients?.map((rejected) => rejected.address),
    );
    expect(noted.attemptRecipients?.map(({ address, status }) => ({ address, status }))).toEqual(
      settlement.attemptRecipients?.map(({ address, status }) => ({ address, status })),
    );
    expect(noted.bounced.map((bounce) => bounce.address)).toEqual(settlement.bounced.map((bounce) => bounce.address));
    expect(noted.eventPayload).toMatchObject({ id: 'row-1', metadata: { orderId: 7 }, attempt: 1 });
    // Nothing the server, the provider or the template said is left.
    expect(JSON.stringify(noted)).not.toContain('reported');
    expect(JSON.stringify(settlement)).toContain('reported');
    for (const text of [noted.lastError, noted.reply, (noted.eventPayload as { reason?: string }).reason])
      if (text != null) expect(text).toBe(UNSTORED_TEXT_NOTE);
    expect(noted).toMatchObject({ replyCode: null, enhancedStatus: null, providerAcceptedAt: null });
  });

  it('a sent event keeps its recipients and says its reply could not be stored', () => {
    const result = attempted([
      recipient('ann@example.com', 'accepted', 250),
      recipient('bob@example.com', 'refused', 550),
    ]);
    const noted = withReportedTextNoted(settlementFor(row, result, policy, now, 12));
    expect(noted.eventPayload).toMatchObject({
      accepted: ['ann@example.com'],
      rejected: [{ address: 'bob@example.com', reply: UNSTORED_TEXT_NOTE, replyCode: null }],
      reply: UNSTORED_TEXT_NOTE,
      providerMessageId: null,
      providerRequestId: null,
      providerAcceptedAt: null,
    });
  });
});
