import type { RejectedRecipient } from '../outbox/mail.types.js';

/** Emitted under this name through @nestjs/event-emitter: `@OnEvent(EMAIL_SENT_EVENT)`. */
export const EMAIL_SENT_EVENT = 'reliable-mail.email.sent';

/**
 * The SMTP server took the message (2yz after the final dot) and the row is `sent`. Emitted after that commit,
 * at least once: a listener must be idempotent (key it on `id`).
 */
export class EmailSentEvent {
  readonly id!: string;
  readonly messageId!: string;
  readonly idempotencyKey!: string | null;
  readonly accepted!: string[];
  readonly rejected!: RejectedRecipient[];
  readonly attempt!: number;
  /** The server's reply to the final dot. */
  readonly reply!: string;
  readonly providerMessageId!: string | null;
  readonly sentAt!: Date;
  readonly metadata!: Record<string, unknown> | null;

  constructor(props: EmailSentEvent) {
    Object.assign(this, props);
  }

  /** Rebuilds the event from the JSON it was stored as. */
  static fromJSON(json: Record<string, unknown>): EmailSentEvent {
    return new EmailSentEvent({ ...(json as unknown as EmailSentEvent), sentAt: new Date(String(json.sentAt)) });
  }
}
