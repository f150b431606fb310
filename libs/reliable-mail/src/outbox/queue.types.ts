import type { RecipientOutcome } from '../transport/mail-transport.interface.js';
import type { AttemptOutcome, MailPayload, OutboxStatus, RejectedRecipient } from './mail.types.js';

// The rows the queue's statements take and give back (see sql/): what an enqueue writes, what a claim hands to the
// dispatcher, and what a settle records.

export interface NewOutboxRow {
  id: string;
  idempotencyKey: string | null;
  /** Set when there is an idempotency key: what a later enqueue with that key is compared with. */
  contentHash: string | null;
  messageId: string;
  payload: MailPayload;
  metadata: Record<string, unknown> | null;
  maxAttempts: number;
  lane: string;
  notBefore: Date | null;
  expiresAt: Date | null;
}

/** A row an enqueue wrote, or the existing row its idempotency key names (`created: false`). */
export interface InsertedRow {
  idempotencyKey: string | null;
  id: string;
  messageId: string;
  status: OutboxStatus;
  contentHash: string | null;
  created: boolean;
}

export interface ClaimedRow {
  id: string;
  messageId: string;
  idempotencyKey: string | null;
  payload: MailPayload;
  metadata: Record<string, unknown> | null;
  attempts: number;
  maxAttempts: number;
  /** Where the row's age (`retry.maxAgeMs`) counts from: its last requeue, or its creation. */
  ageFrom: Date;
  lane: string;
  expiresAt: Date | null;
  lockToken: string;
  /**
   * The day the row is kept in (`partition_day`, YYYY-MM-DD), which retention never changes while the row is being
   * sent: its settle looks for it there, and a partitioned outbox reads that day's partitions only.
   */
  partitionDay: string;
  /** Null when the row is claimed only to be closed without a send (see `skipReason`). */
  attemptId: string | null;
  /**
   * Why the row must not be sent: cancelled while it was being sent, expired, every recipient suppressed, or dead
   * (its lease ran out once more with no attempt or no age left: a message that takes its worker down each time).
   */
  skipReason: 'cancelled' | 'expired' | 'suppressed' | 'dead' | null;
  /** Recipients on the suppression list, lower case; the send leaves them out. */
  suppressed: string[];
  /**
   * Recipients an earlier attempt may have reached, lower case: its outcome for them was unknown, or it never
   * recorded one (its worker died mid-send). Empty for a row never sent before.
   */
  possiblyTakenBefore: string[];
  /**
   * The transport (in a lane of several, `FailoverTransport`) of the latest attempt that may have reached some of
   * `possiblyTakenBefore`; null when none recorded one (a lane of one transport, or a worker that died mid-send).
   */
  possiblyTakenThrough: string | null;
  /** Recipients that took the message in an earlier attempt, lower case: this one leaves them out. */
  acceptedRecipients: string[];
  /** Recipients that refused it in an earlier attempt: this one leaves them out too. */
  rejectedRecipients: RejectedRecipient[];
  /** The W3C trace context of the enqueue (see `StoredTraceContext`), which the send's span continues. */
  traceparent?: string | null;
  tracestate?: string | null;
  /**
   * When the lease ends on this process's `performance.now()` clock, counted from before the claim was sent, so
   * it never ends later here than in the database.
   */
  leaseEndsAt: number;
}

/** The final word on one claimed row: its new state, the attempt's record and the event to emit. */
export interface Settlement {
  id: string;
  lockToken: string;
  attemptId: string | null;
  /** The row's `partition_day` as claimed (YYYY-MM-DD): a row being sent stays in it. */
  partitionDay: string;
  status: Exclude<OutboxStatus, 'sending'>;
  /** 1 when this attempt must not count against the row (a lane outage, or no send at all). */
  refundAttempt: 0 | 1;
  nextAttemptAt: Date | null;
  lastError: string | null;
  replyCode: number | null;
  enhancedStatus: string | null;
  reply: string | null;
  providerMessageId: string | null;
  /** The provider's id of the request (SES `x-amzn-RequestId`), whatever its outcome. */
  providerRequestId: string | null;
  /** When the provider took the message (its own timestamp, or when its answer came). */
  providerAcceptedAt: Date | null;
  /** The provider deduplicates a retry of this request by its idempotency key (see `SendOutcome`). */
  deduplicatedByKey: boolean;
  /** The transport that made the attempt, in a lane of several (`FailoverTransport`); null otherwise. */
  transport: string | null;
  /** Every recipient that took the message so far; null when this attempt changed nothing. */
  acceptedRecipients: string[] | null;
  /** Every recipient that refused it so far (and, once final, those suppressed or given up on). */
  rejectedRecipients: RejectedRecipient[] | null;
  /** What this attempt's server said of each recipient it was given, for the attempt's record. */
  attemptRecipients: RecipientOutcome[] | null;
  sentAt: Date | null;
  outcome: Exclude<AttemptOutcome, 'started'>;
  durationMs: number;
  /** Addresses the server said, of each alone, do not exist, with its reply: they go on the suppression list. */
  bounced: Array<{ address: string; reply: string | null }>;
  /** Null when nobody in this process listens for the event: then there is nothing to record or emit. */
  eventName: string | null;
  /** The event; it is recorded as its JSON, which is what a first emission and a redelivery both emit. */
  eventPayload: object;
}

/** An event recorded with the status change it reports, until its emission is confirmed. */
export interface StoredEvent {
  id: string;
  name: string;
  payload: Record<string, unknown>;
}
