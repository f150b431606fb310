import type { FeedbackSource } from '../outbox/feedback.types.js';

/**
 * What every delivery feedback event carries: the row it is about, the recipient, and what the provider (or the
 * DSN) said. Recorded with the feedback, in its transaction, and emitted after that commits, at least once: a
 * listener must be idempotent. Key it on `eventId`; a provider's repeat of the same report yields no second event.
 * Feedback that names no known row is stored and counted, but has no event.
 */
export abstract class MailFeedbackEvent {
  /** Unique per recorded event and kept by a redelivery: the key to deduplicate on. */
  readonly eventId!: string;
  /** The outbox row. */
  readonly id!: string;
  readonly messageId!: string;
  readonly idempotencyKey!: string | null;
  readonly metadata!: Record<string, unknown> | null;
  /** The stored feedback (one of `MailOutboxService.get(id).feedback`). */
  readonly feedbackId!: string;
  readonly source!: FeedbackSource;
  /** Lower case. */
  readonly recipient!: string;
  /** The RFC 3463 status, where the report has one. */
  readonly status!: string | null;
  /** The provider's diagnostic: the remote server's reply, a bounce description, a complaint's feedback type. */
  readonly diagnostic!: string | null;
  readonly providerEventId!: string;
  readonly providerMessageId!: string | null;
  /** When the provider says it happened. */
  readonly reportedAt!: Date;

  protected constructor(props: MailFeedbackEvent) {
    Object.assign(this, props);
  }

  /** Rebuilds the event from the JSON it was stored as: its fields, the event's id, and its date revived. */
  static fromJSON<T extends MailFeedbackEvent>(
    this: new (props: T) => T,
    json: Record<string, unknown>,
    eventId: string,
  ): T {
    return new this({ ...json, eventId, reportedAt: new Date(json.reportedAt as string) } as T);
  }
}
