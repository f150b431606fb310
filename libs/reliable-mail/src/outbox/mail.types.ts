import type { EntityManager } from '@mikro-orm/postgresql';

/** An address as a string (`a@example.com` or `Ann <a@example.com>`) or as its parts. */
export type MailAddressInput = string | { name?: string; address: string };

export interface OutgoingMail {
  to?: MailAddressInput | MailAddressInput[];
  cc?: MailAddressInput | MailAddressInput[];
  bcc?: MailAddressInput | MailAddressInput[];
  /** Defaults to the module's `from`. */
  from?: MailAddressInput;
  replyTo?: MailAddressInput | MailAddressInput[];
  subject: string;
  text?: string;
  html?: string;
  /** Extra headers. Message-ID and the envelope are reliable-mail's and cannot be set here. */
  headers?: Record<string, string>;
}

export interface EnqueueOptions {
  /** The same key with the same content returns the existing row; with other content it throws. */
  idempotencyKey?: string;
  /** Write through this EntityManager (and its transaction) instead of the ambient one. */
  em?: EntityManager;
  /** Free JSON stored with the row and carried in its events: source, correlation id. */
  metadata?: Record<string, unknown>;
  /** The lane to send through; an undeclared lane is a validation error. Default: the module's `defaultLane`. */
  lane?: string;
  /** Send no earlier than this. */
  sendAt?: Date;
  /** Send no earlier than this many milliseconds from now. */
  delayMs?: number;
  /** A message not sent by then ends as `expired` rather than going out late. */
  expiresAt?: Date;
  /** The same as `expiresAt`, counted from now. */
  ttlMs?: number;
}

export const OUTBOX_STATUSES = ['pending', 'sending', 'sent', 'failed', 'dead', 'cancelled', 'expired', 'suppressed'] as const;
/** Statuses a row never leaves on its own; only an operator's requeue moves it on. */
export const FINAL_STATUSES: readonly OutboxStatus[] = ['sent', 'failed', 'dead', 'cancelled', 'expired', 'suppressed'];
export type OutboxStatus = (typeof OUTBOX_STATUSES)[number];

export interface EnqueueResult {
  id: string;
  messageId: string;
  status: OutboxStatus;
  /** False when an earlier enqueue with the same idempotency key already wrote the row. */
  created: boolean;
}

export interface MailAddress {
  name?: string;
  address: string;
}

/** What the outbox stores in `payload`: a validated, normalised mail. `v` versions the shape. */
export interface MailPayload {
  v: 1;
  from: MailAddress;
  to: MailAddress[];
  cc: MailAddress[];
  bcc: MailAddress[];
  replyTo: MailAddress[];
  subject: string;
  text?: string;
  html?: string;
  headers: Record<string, string>;
}

export type AttemptOutcome = 'started' | 'sent' | 'transient' | 'permanent' | 'sender' | 'unknown';

export interface OutboxAttempt {
  id: string;
  attempt: number;
  workerId: string;
  startedAt: Date;
  finishedAt: Date | null;
  /** `started` with no `finishedAt` while the send runs; `unknown` once a later claim found its worker gone. */
  outcome: AttemptOutcome;
  replyCode: number | null;
  enhancedStatus: string | null;
  reply: string | null;
  durationMs: number | null;
}

export interface OutboxRow {
  id: string;
  idempotencyKey: string | null;
  messageId: string;
  status: OutboxStatus;
  lane: string;
  payload: MailPayload;
  metadata: Record<string, unknown> | null;
  attempts: number;
  maxAttempts: number;
  nextAttemptAt: Date;
  expiresAt: Date | null;
  cancelRequestedAt: Date | null;
  lockedUntil: Date | null;
  lockedBy: string | null;
  lastError: string | null;
  lastReplyCode: number | null;
  lastEnhancedStatus: string | null;
  providerReply: string | null;
  providerMessageId: string | null;
  rejectedRecipients: RejectedRecipient[] | null;
  createdAt: Date;
  sentAt: Date | null;
  updatedAt: Date;
}

export interface RejectedRecipient {
  address: string;
  reply: string | null;
  replyCode: number | null;
}

export interface OutboxRowWithAttempts extends OutboxRow {
  attemptLog: OutboxAttempt[];
}
