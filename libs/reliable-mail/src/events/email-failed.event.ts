import type { OutboxStatus } from '../outbox/mail.types.js';

/** Emitted under this name through @nestjs/event-emitter: `@OnEvent(EMAIL_FAILED_EVENT)`. */
export const EMAIL_FAILED_EVENT = 'reliable-mail.email.failed';

/**
 * The message was not delivered by this attempt, or will not be sent at all. `status` is the row's status after
 * it: `pending` with `nextAttemptAt` when it will be tried again; otherwise final: `failed` (a permanent reply),
 * `dead` (`deadLettered`: out of attempts or too old), `expired` (not sent before its `expiresAt`), `cancelled`,
 * or `suppressed` (every recipient is on the suppression list; no SMTP attempt was made). Emitted after the status
 * change commits, at least once: a listener must be idempotent (key it on `id` and `attempt`).
 */
export class EmailFailedEvent {
  readonly id!: string;
  readonly messageId!: string;
  readonly idempotencyKey!: string | null;
  readonly attempt!: number;
  readonly status!: OutboxStatus;
  /** True when the reply says the message can never be delivered (5yz); false for a transient failure. */
  readonly permanent!: boolean;
  /** True when the fault is the sender's (authentication, configuration): the attempt did not count. */
  readonly senderFault!: boolean;
  /** True when the server may have taken the message although the send failed (connection lost mid-conversation). */
  readonly outcomeUnknown!: boolean;
  readonly replyCode!: number | null;
  readonly enhancedStatus!: string | null;
  readonly reason!: string;
  readonly nextAttemptAt!: Date | null;
  readonly deadLettered!: boolean;
  readonly metadata!: Record<string, unknown> | null;

  constructor(props: EmailFailedEvent) {
    Object.assign(this, props);
  }

  static fromJSON(json: Record<string, unknown>): EmailFailedEvent {
    return new EmailFailedEvent({
      ...(json as unknown as EmailFailedEvent),
      nextAttemptAt: json.nextAttemptAt ? new Date(json.nextAttemptAt as string) : null,
    });
  }
}
