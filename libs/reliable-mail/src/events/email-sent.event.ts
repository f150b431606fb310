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
  /** The server's reply to the final dot, or the provider API's answer (of the attempt that finished the row). */
  readonly reply!: string;
  /** The provider's id of the message (an API's message id, a queue id in an SMTP reply): bounces name it. */
  readonly providerMessageId!: string | null;
  /** The provider's id of the request that sent it (SES `x-amzn-RequestId`), for its support; null when none. */
  readonly providerRequestId!: string | null;
  /** When the provider or server took the message: the API's own timestamp where it gives one, else its answer's. */
  readonly providerAcceptedAt!: Date | null;
  /** When the row was settled as sent. */
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
      // Events recorded before the provider's accept time was kept have none.
      providerRequestId: (json.providerRequestId as string | undefined) ?? null,
      providerAcceptedAt: json.providerAcceptedAt ? new Date(json.providerAcceptedAt as string) : null,
    });
  }
}
