import type { MailAddress, RecipientOutcome } from '../transport/mail-transport.interface.js';
import type { OutboxFeedback } from './feedback.types.js';

/** An address as a string (`a@example.com` or `Ann <a@example.com>`) or as its parts. */
export type MailAddressInput = string | { name?: string; address: string };

/** Fields every mail has, whether it carries its body or names a template. */
interface MailEnvelopeInput {
  to?: MailAddressInput | MailAddressInput[];
  cc?: MailAddressInput | MailAddressInput[];
  bcc?: MailAddressInput | MailAddressInput[];
  /** Defaults to the module's `from`. */
  from?: MailAddressInput;
  replyTo?: MailAddressInput | MailAddressInput[];
  /** Extra headers. Message-ID and the envelope are reliable-mail's and cannot be set here. */
  headers?: Record<string, string>;
  /**
   * Files to attach. Inline ones (`content`) are stored in the row and count against `maxMessageBytes`;
   * referenced ones (`ref`) are fetched at send time through the module's `attachmentResolver`.
   */
  attachments?: MailAttachment[];
}

/** A mail that carries its own subject and body. */
export interface ContentMail extends MailEnvelopeInput {
  subject: string;
  text?: string;
  html?: string;
  template?: never;
  params?: never;
  locale?: never;
}

/**
 * A mail whose subject and body a registered template renders at send time. The row stores the template's name,
 * the newest registered version at enqueue, and the parameters; every attempt renders that same version.
 */
export interface TemplateMail<P extends object = Record<string, unknown>> extends MailEnvelopeInput {
  /** The name of a template registered with the module. */
  template: string;
  /** Plain JSON: strings, finite numbers, booleans, null, arrays and plain objects (a Date is stored as its ISO string). */
  params?: P;
  /** A BCP 47 language tag handed to the template, such as `de-AT`. */
  locale?: string;
  /** Overrides the subject the template renders. */
  subject?: string;
  text?: never;
  html?: never;
}

export type OutgoingMail = ContentMail | TemplateMail<object>;

/** A file stored in the row: `content` is a string (utf8 unless `encoding` says base64) or bytes. */
export interface InlineAttachment {
  filename: string;
  contentType: string;
  content: string | Buffer | Uint8Array;
  /** How a string `content` is encoded. Default `utf8`. */
  encoding?: 'utf8' | 'base64';
  /** Content-ID, to show an image inline from the html (`<img src="cid:logo">`). */
  cid?: string;
  ref?: never;
}

/** A file fetched at send time: `ref` is handed to the module's `attachmentResolver` (an S3 key, a path, a URL). */
export interface ReferencedAttachment {
  filename: string;
  contentType: string;
  ref: string;
  cid?: string;
  content?: never;
  encoding?: never;
}

export type MailAttachment = InlineAttachment | ReferencedAttachment;

export interface EnqueueOptions {
  /** The same key with the same content returns the existing row; with other content it throws. */
  idempotencyKey?: string;
  /**
   * The caller's transaction to write in, instead of the one the calling code runs in: MikroORM's or TypeORM's
   * `EntityManager` of a transaction, a TypeORM `QueryRunner` after `startTransaction()`, Prisma's interactive
   * transaction client, Drizzle's (node-postgres) or Kysely's transaction, or a pg client on which BEGIN ran. One
   * that is in no transaction (a root client) counts as none.
   */
  tx?: unknown;
  /** @deprecated `tx` takes a MikroORM `EntityManager` as well. */
  em?: unknown;
  /** Free JSON stored with the row and carried in its events: source, correlation id. */
  metadata?: Record<string, unknown>;
  /** The lane to send through; an undeclared lane is a validation error. Default: the module's `defaultLane`. */
  lane?: string;
  /** Send no earlier than this (a Date within the years 1–9999, which PostgreSQL stores). */
  sendAt?: Date;
  /** Send no earlier than this many milliseconds from now (ending before the year 10000). */
  delayMs?: number;
  /** A message not sent by then ends as `expired` rather than going out late (within the years 1–9999). */
  expiresAt?: Date;
  /** The same as `expiresAt`, counted from now (ending before the year 10000). */
  ttlMs?: number;
}

/** Every status a row can be in. */
export const OUTBOX_STATUSES = [
  'pending',
  'sending',
  'sent',
  'failed',
  'dead',
  'cancelled',
  'expired',
  'suppressed',
] as const;

export type OutboxStatus = (typeof OUTBOX_STATUSES)[number];

export interface EnqueueResult {
  id: string;
  messageId: string;
  status: OutboxStatus;
  /** False when an earlier enqueue with the same idempotency key already wrote the row. */
  created: boolean;
}

/** The envelope part of a stored payload, the same in every version. */
interface StoredEnvelope {
  from: MailAddress;
  to: MailAddress[];
  cc: MailAddress[];
  bcc: MailAddress[];
  replyTo: MailAddress[];
  headers: Record<string, string>;
}

/** A stored payload of the first version: a rendered mail without attachments. Still read, no longer written. */
export interface MailPayloadV1 extends StoredEnvelope {
  v: 1;
  subject: string;
  text?: string;
  html?: string;
}

/** A JSON value, as template parameters are stored. */
export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };

/** The template a v2 payload is rendered with at send time. */
export interface StoredTemplate {
  name: string;
  /**
   * The version that was the newest registered at enqueue (for a template from files, the hash of its sources then);
   * every attempt renders this one.
   */
  version: number | string;
  params: Record<string, JsonValue>;
  locale?: string;
}

export type StoredAttachment =
  | { filename: string; contentType: string; cid?: string; /** base64 */ content: string }
  | { filename: string; contentType: string; cid?: string; ref: string };

/**
 * The second version: either a body (`text`/`html` with `subject`) or a `template` (with an optional `subject`
 * that overrides the template's), plus attachments.
 */
export interface MailPayloadV2 extends StoredEnvelope {
  v: 2;
  subject?: string;
  text?: string;
  html?: string;
  template?: StoredTemplate;
  attachments?: StoredAttachment[];
}

/** What the outbox stores in `payload`: a validated, normalised mail. `v` versions the shape. */
export type MailPayload = MailPayloadV1 | MailPayloadV2;

/**
 * What one attempt came to: `sent` (every recipient given took it or refused it, some took it), `partial` (some
 * took it, others were deferred), `transient` (deferred, nothing taken), `permanent` (refused, or not renderable),
 * `outage` (the lane's server refused the session; not counted), `unknown` (the server may have taken it).
 */
export type AttemptOutcome = 'started' | 'sent' | 'partial' | 'transient' | 'permanent' | 'outage' | 'unknown';

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
  /** What the server said of each recipient of this attempt; null before it finished. */
  recipients: RecipientOutcome[] | null;
  providerMessageId: string | null;
  /** The provider's id of this attempt's request (SES `x-amzn-RequestId`); null for SMTP and when none was given. */
  providerRequestId: string | null;
  /** When the provider or server took the message in this attempt. */
  providerAcceptedAt: Date | null;
  /**
   * The provider deduplicates this request by the row's idempotency key (Resend, for 24 hours): when the outcome
   * is `unknown`, the retry cannot deliver a second copy.
   */
  deduplicatedByKey: boolean;
  /** The transport that made the attempt, in a lane of several (`FailoverTransport`); null otherwise. */
  transport: string | null;
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
  /** The provider's id of the request that sent it, or of the last request that failed. */
  providerRequestId: string | null;
  /** When the provider or server took the message. */
  providerAcceptedAt: Date | null;
  /** Recipients that took the message, over all attempts, lower case. */
  acceptedRecipients: string[] | null;
  rejectedRecipients: RejectedRecipient[] | null;
  requeuedAt: Date | null;
  requeueReason: string | null;
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
  /** Delivery feedback about the row, oldest first. */
  feedback: OutboxFeedback[];
}
