import { randomUUID } from 'node:crypto';
import type { Settlement } from '../../libs/reliable-mail/src/outbox/queue.types.js';

/** A settlement of a mail its one recipient took, each call with ids of its own; `overrides` change what a test needs. */
export function sentSettlement(overrides: Partial<Settlement> = {}): Settlement {
  return {
    id: randomUUID(),
    lockToken: randomUUID(),
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
