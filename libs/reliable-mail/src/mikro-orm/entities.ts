import { defineEntity, p } from '@mikro-orm/core';
import { OUTBOX_SCHEMA_V1 } from '../schema/versions/0001-create-outbox.js';
import { OUTBOX_SCHEMA_V3 } from '../schema/versions/0003-recipient-state.js';
import { OUTBOX_SCHEMA_V5 } from '../schema/versions/0005-feedback.js';
import { OUTBOX_SCHEMA_V6 } from '../schema/versions/0006-request-message-ids.js';
import { OUTBOX_SCHEMA_V8 } from '../schema/versions/0008-console.js';
import { EVENT_RELAY_SCHEMA_V14 } from '../schema/versions/0014-event-relay.js';
import type { InstanceLaneState } from '../console/console-data.types.js';
import type { RecipientOutcome } from '../transport/mail-transport.interface.js';
import type { BounceType, FeedbackKind } from '../outbox/feedback.types.js';
import type { AttemptOutcome, MailPayload, OutboxStatus, RejectedRecipient } from '../outbox/mail.types.js';
import type { Suppression } from '../outbox/operations.types.js';

// The tables as the MikroORM migrations of earlier releases made them: in the app's own schema, unqualified.
const LEGACY_TABLES = {
  outbox: '"mail_outbox"',
  attempt: '"mail_outbox_attempt"',
  event: '"mail_outbox_event"',
  feedback: '"mail_outbox_feedback"',
  audit: '"mail_console_audit"',
  relay: '"mail_relay"',
};
const { indexes, checks } = OUTBOX_SCHEMA_V1(LEGACY_TABLES);
const v5 = OUTBOX_SCHEMA_V5(LEGACY_TABLES);
const v6 = OUTBOX_SCHEMA_V6(LEGACY_TABLES);
const v8 = OUTBOX_SCHEMA_V8(LEGACY_TABLES);
const v14 = EVENT_RELAY_SCHEMA_V14(LEGACY_TABLES);
const timestamp = () => p.datetime().columnType('timestamptz');
/** The day a row is kept in (schema version 13), as PostgreSQL writes its default back. */
const partitionDay = () => p.string().columnType('date').defaultRaw(`((now() AT TIME ZONE 'utc'::text))::date`);

// Only for installations whose tables the MikroORM migrations of earlier releases made in the app's own schema:
// registered, they keep MikroORM's schema diff from dropping them. reliable-mail itself reads and writes them with
// SQL of its own (SKIP LOCKED, guarded updates, one statement per claim), which no unit of work expresses.

export const MailOutbox = defineEntity({
  name: 'MailOutbox',
  tableName: 'mail_outbox',
  indexes: [
    { name: 'mail_outbox_due_index', expression: indexes.due },
    { name: 'mail_outbox_lease_index', expression: indexes.lease },
    { name: 'mail_outbox_closed_index', expression: indexes.closed },
    { name: 'mail_outbox_problem_index', expression: indexes.problem },
    { name: 'mail_outbox_provider_message_id_index', expression: v5.indexes.providerMessageId },
    { name: 'mail_outbox_sent_index', expression: v5.indexes.sent },
    { name: 'mail_outbox_provider_message_ids_index', expression: v6.indexes.providerMessageIds },
    { name: 'mail_outbox_metadata_index', expression: v8.indexes.metadata },
    // MikroORM matches an index given as an expression by its name alone; the expression is what it would create.
    { name: 'mail_outbox_recipients_index', expression: v8.indexes.recipients },
    { name: 'mail_outbox_unsent_final_index', expression: v8.indexes.unsentFinal },
  ],
  uniques: [{ name: 'mail_outbox_idempotency_key_unique', expression: indexes.idempotencyKey }],
  checks: [{ name: 'mail_outbox_status_check', expression: checks.status }],
  properties: {
    id: p.uuid().primary(),
    idempotencyKey: p.text().nullable(),
    contentHash: p.text().nullable(),
    messageId: p.text(),
    status: p.text().$type<OutboxStatus>().default('pending'),
    lane: p.text().default('default'),
    payload: p.json<MailPayload>(),
    metadata: p.json<Record<string, unknown>>().nullable(),
    attempts: p.integer().default(0),
    maxAttempts: p.integer(),
    nextAttemptAt: timestamp().defaultRaw('now()'),
    expiresAt: timestamp().nullable(),
    cancelRequestedAt: timestamp().nullable(),
    lockedUntil: timestamp().nullable(),
    lockToken: p.uuid().nullable(),
    lockedBy: p.text().nullable(),
    lastError: p.text().nullable(),
    lastReplyCode: p.integer().nullable(),
    lastEnhancedStatus: p.text().nullable(),
    providerReply: p.text().nullable(),
    providerMessageId: p.text().nullable(),
    providerMessageIds: p.array().nullable(),
    providerRequestId: p.text().nullable(),
    providerAcceptedAt: timestamp().nullable(),
    requeuedAt: timestamp().nullable(),
    requeueReason: p.text().nullable(),
    acceptedRecipients: p.json<string[]>().nullable(),
    rejectedRecipients: p.json<RejectedRecipient[]>().nullable(),
    createdAt: timestamp().defaultRaw('now()'),
    sentAt: timestamp().nullable(),
    updatedAt: timestamp().defaultRaw('now()'),
    traceparent: p.text().nullable(),
    tracestate: p.text().nullable(),
    recipients: p.array().nullable(),
    partitionDay: partitionDay(),
  },
});

export const MailOutboxAttempt = defineEntity({
  name: 'MailOutboxAttempt',
  tableName: 'mail_outbox_attempt',
  indexes: [{ name: 'mail_outbox_attempt_outbox_id_index', expression: indexes.attemptsOfRow }],
  checks: [{ name: 'mail_outbox_attempt_outcome_check', expression: OUTBOX_SCHEMA_V3.checks.outcome }],
  properties: {
    id: p.uuid().primary(),
    outbox: () => p.manyToOne(MailOutbox).fieldName('outbox_id').deleteRule('cascade'),
    attempt: p.integer(),
    workerId: p.text(),
    lockToken: p.uuid(),
    startedAt: timestamp().defaultRaw('now()'),
    finishedAt: timestamp().nullable(),
    outcome: p.text().$type<AttemptOutcome>().default('started'),
    replyCode: p.integer().nullable(),
    enhancedStatus: p.text().nullable(),
    reply: p.text().nullable(),
    durationMs: p.integer().nullable(),
    recipients: p.json<RecipientOutcome[]>().nullable(),
    providerMessageId: p.text().nullable(),
    providerRequestId: p.text().nullable(),
    providerAcceptedAt: timestamp().nullable(),
    deduplicatedByKey: p.boolean().default(false),
    transport: p.text().nullable(),
    partitionDay: partitionDay(),
  },
});

export const MailOutboxEvent = defineEntity({
  name: 'MailOutboxEvent',
  tableName: 'mail_outbox_event',
  indexes: [{ name: 'mail_outbox_event_locked_until_index', expression: indexes.eventLease }],
  properties: {
    id: p.bigint().primary(),
    outbox: () => p.manyToOne(MailOutbox).fieldName('outbox_id').deleteRule('cascade'),
    name: p.text(),
    payload: p.json<Record<string, unknown>>(),
    lockedUntil: timestamp(),
    createdAt: timestamp().defaultRaw('now()'),
  },
});

export const MailSuppression = defineEntity({
  name: 'MailSuppression',
  tableName: 'mail_suppression',
  checks: [{ name: 'mail_suppression_source_check', expression: v5.checks.suppressionSource }],
  properties: {
    address: p.text().primary(),
    reason: p.text(),
    source: p.text().$type<Suppression['source']>(),
    outboxId: p.uuid().nullable(),
    createdAt: timestamp().defaultRaw('now()'),
  },
});

export const MailOutboxFeedback = defineEntity({
  name: 'MailOutboxFeedback',
  tableName: 'mail_outbox_feedback',
  indexes: [
    { name: 'mail_outbox_feedback_outbox_id_index', expression: v5.indexes.feedbackOfRow },
    { name: 'mail_outbox_feedback_problem_index', expression: v5.indexes.feedbackProblems },
    { name: 'mail_outbox_feedback_unlinked_index', expression: v5.indexes.feedbackUnlinked },
  ],
  uniques: [{ name: 'mail_outbox_feedback_event_unique', properties: ['source', 'providerEventId', 'recipient'] }],
  checks: [
    { name: 'mail_outbox_feedback_kind_check', expression: v5.checks.feedbackKind },
    { name: 'mail_outbox_feedback_bounce_type_check', expression: v5.checks.bounceType },
  ],
  properties: {
    id: p.uuid().primary(),
    outbox: () => p.manyToOne(MailOutbox).fieldName('outbox_id').nullable().deleteRule('cascade'),
    source: p.text(),
    recipient: p.text(),
    kind: p.text().$type<FeedbackKind>(),
    bounceType: p.text().$type<BounceType>().nullable(),
    providerEventId: p.text(),
    providerMessageId: p.text().nullable(),
    status: p.text().nullable(),
    diagnostic: p.text().nullable(),
    reportedAt: timestamp(),
    receivedAt: timestamp().defaultRaw('now()'),
    payload: p.json<Record<string, unknown>>(),
    partitionDay: partitionDay(),
  },
});

export const MailConsoleAudit = defineEntity({
  name: 'MailConsoleAudit',
  tableName: 'mail_console_audit',
  indexes: [{ name: 'mail_console_audit_outbox_ids_index', expression: v8.indexes.auditOfRow }],
  properties: {
    id: p.uuid().primary(),
    actor: p.text(),
    action: p.text(),
    reason: p.text().nullable(),
    filter: p.json<Record<string, unknown>>().nullable(),
    outboxIds: p.array().columnType('uuid[]'),
    createdAt: timestamp().defaultRaw('now()'),
  },
});

export const MailInstance = defineEntity({
  name: 'MailInstance',
  tableName: 'mail_instance',
  properties: {
    id: p.text().primary(),
    host: p.text(),
    pid: p.integer(),
    startedAt: timestamp(),
    heartbeatAt: timestamp(),
    heartbeatMs: p.integer(),
    lanes: p.json<Record<string, InstanceLaneState>>(),
  },
});

export const MailTemplateSource = defineEntity({
  name: 'MailTemplateSource',
  tableName: 'mail_template_source',
  properties: {
    name: p.text().primary(),
    version: p.text().primary(),
    sources: p.json<Record<string, unknown>>(),
    createdAt: timestamp().defaultRaw('now()'),
  },
});

export const MailSendQuota = defineEntity({
  name: 'MailSendQuota',
  tableName: 'mail_send_quota',
  properties: {
    key: p.text().primary(),
    tokens: p.double(),
    refilledAt: timestamp(),
    recentAt: p.array().columnType('double precision[]').defaultRaw(`'{}'`),
    recentCounts: p.array().columnType('int[]').defaultRaw(`'{}'`),
    dayBucket: p.bigint().defaultRaw('0'),
    dayCounts: p.array().columnType('int[]').defaultRaw(`'{}'`),
    pausedUntil: timestamp().nullable(),
    lastGranted: p.integer().default(0),
  },
});

export const MailUnsubscribe = defineEntity({
  name: 'MailUnsubscribe',
  tableName: 'mail_unsubscribe',
  properties: {
    address: p.text().primary(),
    category: p.text().primary(),
    outboxId: p.uuid().nullable(),
    createdAt: timestamp().defaultRaw('now()'),
  },
});

export const MailRelayDestination = defineEntity({
  name: 'MailRelayDestination',
  tableName: 'mail_relay_destination',
  properties: {
    name: p.text().primary(),
    events: p.array().columnType('text[]'),
    registeredAt: timestamp().defaultRaw('now()'),
    seenAt: timestamp().defaultRaw('now()'),
  },
});

export const MailRelay = defineEntity({
  name: 'MailRelay',
  tableName: 'mail_relay',
  indexes: [
    { name: 'mail_relay_due_index', expression: v14.indexes.due },
    { name: 'mail_relay_destination_index', expression: v14.indexes.destination },
  ],
  properties: {
    id: p.bigint().primary(),
    destination: p.text(),
    eventId: p.bigint(),
    outboxId: p.uuid(),
    name: p.text(),
    payload: p.json<Record<string, unknown>>(),
    recordedAt: timestamp().defaultRaw('now()'),
    lockedUntil: timestamp().defaultRaw('now()'),
    attempts: p.integer().default(0),
    lastError: p.text().nullable(),
  },
});

/** The versions table, which `migrate` (or `database.migrateAtStart`) adds beside the tables when it first runs. */
export const MailMigration = defineEntity({
  name: 'MailMigration',
  tableName: 'mail_migrations',
  properties: {
    version: p.integer().primary().autoincrement(false),
    name: p.text(),
    servesCodeFrom: p.integer(),
    appliedAt: timestamp().defaultRaw('now()'),
  },
});

/**
 * The entities of an installation whose tables are in the app's own schema (made by the MikroORM migrations of
 * earlier releases), for the app's MikroORM `entities`: all of them,
 * the tables of the newer versions included, which `migrate` adds there. A new installation keeps its tables in a
 * schema of their own, registers none of these, and adds `schemaGenerator: { ignoreSchema: ['reliable_mail'] }`
 * instead.
 */
export const reliableMailEntities = [
  MailOutbox,
  MailOutboxAttempt,
  MailOutboxEvent,
  MailSuppression,
  MailOutboxFeedback,
  MailConsoleAudit,
  MailInstance,
  MailTemplateSource,
  MailSendQuota,
  MailUnsubscribe,
  MailRelayDestination,
  MailRelay,
  MailMigration,
];
