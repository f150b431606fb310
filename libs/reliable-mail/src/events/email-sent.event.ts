import type { RejectedRecipient } from '../outbox/mail.types.js';

/**
 * Every recipient of the row is settled and at least one took the message (2yz after the final dot): the row is
 * `sent`. `accepted` lists every recipient that took it, over all attempts (a recipient deferred at first is
 * retried on its own, with the same Message-ID); `rejected` lists those that refused it, those left out because
 * they are on the suppression list, and those still deferred when the row ran out of attempts or time.
 *
 * Emitted after that commits, at least once: a listener must be idempotent. Key it on `eventId`.
 */
export class EmailSentEvent {
  /** Unique per recorded event and kept by a redelivery: the key to deduplicate on. */
  readonly eventId!: string;
  readonly id!: string;
  readonly messageId!: string;
  readonly idempotencyKey!: string | null;
  readonly accepted!: string[];
  readonly rejected!: RejectedRecipient[];
  /** The attempts counted against the row when it was sent. */
  readonly attempt!: number;
  /** The server's reply to the final dot (of the attempt that finished the row). */
  readonly reply!: string;
  readonly providerMessageId!: string | null;
  readonly sentAt!: Date;
  readonly metadata!: Record<string, unknown> | null;

  constructor(props: EmailSentEvent) {
    Object.assign(this, props);
  }

  /** Rebuilds the event from the JSON it was stored as. */
  static fromJSON(json: Record<string, unknown>, eventId: string): EmailSentEvent {
    return new EmailSentEvent({
      ...(json as unknown as EmailSentEvent),
      eventId,
      sentAt: new Date(json.sentAt as string),
    });
  }
}
