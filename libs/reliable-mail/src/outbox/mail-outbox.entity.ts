import { defineEntity, p } from '@mikro-orm/core';
import type { AttemptOutcome, MailPayload, OutboxStatus, RejectedRecipient } from './mail.types.js';

// The tables are created by reliable-mail's migrations; these definitions let an app read them with the ORM.
// reliable-mail itself goes through OutboxRepository's SQL, where the claim and the settles need statements
// the unit of work cannot express (SKIP LOCKED, guarded updates, one statement per claim).

export const MailOutbox = defineEntity({
  name: 'MailOutbox',
  tableName: 'mail_outbox',
  properties: {
    id: p.uuid().primary(),
    idempotencyKey: p.text().nullable(),
    contentHash: p.text(),
    messageId: p.text().unique('mail_outbox_message_id_unique'),
    status: p.text().$type<OutboxStatus>().default('pending'),
    lane: p.text().default('default'),
    payload: p.json<MailPayload>(),
    metadata: p.json<Record<string, unknown>>().nullable(),
    attempts: p.integer().default(0),
    maxAttempts: p.integer(),
    nextAttemptAt: p.datetime().columnType('timestamptz'),
    expiresAt: p.datetime().columnType('timestamptz').nullable(),
    cancelRequestedAt: p.datetime().columnType('timestamptz').nullable(),
    lockedUntil: p.datetime().columnType('timestamptz').nullable(),
    lockToken: p.uuid().nullable(),
    lockedBy: p.text().nullable(),
    lastError: p.text().nullable(),
    lastReplyCode: p.integer().nullable(),
    lastEnhancedStatus: p.text().nullable(),
    providerReply: p.text().nullable(),
    providerMessageId: p.text().nullable(),
    requeuedAt: p.datetime().columnType('timestamptz').nullable(),
    requeueReason: p.text().nullable(),
    rejectedRecipients: p.json<RejectedRecipient[]>().nullable(),
    createdAt: p.datetime().columnType('timestamptz'),
    sentAt: p.datetime().columnType('timestamptz').nullable(),
    updatedAt: p.datetime().columnType('timestamptz'),
  },
});

export const MailOutboxAttempt = defineEntity({
  name: 'MailOutboxAttempt',
  tableName: 'mail_outbox_attempt',
  properties: {
    id: p.uuid().primary(),
    outbox: () => p.manyToOne(MailOutbox).fieldName('outbox_id').deleteRule('cascade'),
    attempt: p.integer(),
    workerId: p.text(),
    lockToken: p.uuid(),
    startedAt: p.datetime().columnType('timestamptz'),
    finishedAt: p.datetime().columnType('timestamptz').nullable(),
    outcome: p.text().$type<AttemptOutcome>().default('started'),
    replyCode: p.integer().nullable(),
    enhancedStatus: p.text().nullable(),
    reply: p.text().nullable(),
    durationMs: p.integer().nullable(),
  },
});

export const MailOutboxEvent = defineEntity({
  name: 'MailOutboxEvent',
  tableName: 'mail_outbox_event',
  properties: {
    id: p.bigint().primary(),
    outbox: () => p.manyToOne(MailOutbox).fieldName('outbox_id').deleteRule('cascade'),
    name: p.text(),
    payload: p.json<Record<string, unknown>>(),
    lockedUntil: p.datetime().columnType('timestamptz'),
    createdAt: p.datetime().columnType('timestamptz'),
  },
});

export const MailSuppression = defineEntity({
  name: 'MailSuppression',
  tableName: 'mail_suppression',
  properties: {
    address: p.text().primary(),
    reason: p.text(),
    source: p.text().$type<'bounce' | 'operator'>(),
    outboxId: p.uuid().nullable(),
    createdAt: p.datetime().columnType('timestamptz'),
  },
});

/** The entities to add to the app's MikroORM `entities`. */
export const reliableMailEntities = [MailOutbox, MailOutboxAttempt, MailOutboxEvent, MailSuppression];
