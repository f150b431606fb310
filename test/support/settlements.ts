import { randomUUID } from 'node:crypto';
import type { ClaimedRow, Settlement } from '../../libs/reliable-mail/src/outbox/queue.types.js';

/**
 * Today in UTC, the day a row inserted now is kept in: the default of the builders' `partitionDay`. A test that settles
 * rows it claimed passes each claimed row's own, which a claim across midnight makes differ.
 */
export const utcToday = (): string => new Date().toISOString().slice(0, 10);

/** A settlement of a mail its one recipient took, each call with ids of its own; `overrides` change what a test needs. */
export function sentSettlement(overrides: Partial<Settlement> = {}): Settlement {
  return {
    id: randomUUID(),
    lockToken: randomUUID(),
    partitionDay: utcToday(),
    attemptId: randomUUID(),
    status: 'sent',
    refundAttempt: 0,
    nextAttemptAt: null,
    lastError: null,
    replyCode: 250,
    enhancedStatus: '2.0.0',
    reply: '250 2.0.0 queued',
    providerMessageId: null,
    providerRequestId: null,
    providerAcceptedAt: null,
    deduplicatedByKey: false,
    transport: null,
    acceptedRecipients: ['ann@example.com'],
    rejectedRecipients: [],
    attemptRecipients: [],
    sentAt: new Date(),
    outcome: 'sent',
    durationMs: 12,
    bounced: [],
    eventName: null,
    eventPayload: {},
    ...overrides,
  };
}

/** `sentSettlement` of a row the test claimed: its id, lock token, attempt and day, with `overrides`. */
export function sentSettlementOf(
  row: Pick<ClaimedRow, 'id' | 'lockToken' | 'attemptId' | 'partitionDay'>,
  overrides: Partial<Settlement> = {},
): Settlement {
  const { id, lockToken, attemptId, partitionDay } = row;
  return sentSettlement({ id, lockToken, attemptId, partitionDay, ...overrides });
}

/** A claimed row of an order mail to two recipients (to Ann, cc Bob), its lease far from its end. */
export function claimedRow(overrides: Partial<ClaimedRow> = {}): ClaimedRow {
  return {
    id: 'row-1',
    messageId: '<row-1@test.example.com>',
    idempotencyKey: null,
    payload: {
      v: 2,
      from: { address: 'shop@example.com' },
      to: [{ address: 'ann@example.com' }],
      cc: [{ address: 'bob@example.com' }],
      bcc: [],
      replyTo: [],
      subject: 'Your order',
      text: 'Thanks',
      headers: {},
    },
    metadata: null,
    attempts: 2,
    maxAttempts: 3,
    ageFrom: new Date(),
    lane: 'default',
    expiresAt: null,
    lockToken: 'lock-1',
    partitionDay: utcToday(),
    attemptId: 'attempt-1',
    skipReason: null,
    suppressed: [],
    possiblyTakenBefore: [],
    possiblyTakenThrough: null,
    acceptedRecipients: [],
    rejectedRecipients: [],
    leaseEndsAt: performance.now() + 600_000,
    ...overrides,
  };
}
