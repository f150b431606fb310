import type { OutboxStatus } from '../outbox/mail.types.js';

/**
 * Why an attempt did not send the message, or why the row closed without it:
 * - `deferred`: the server answered 4yz, or the send failed before the message could have been taken (retried);
 * - `unknown`: the connection was lost after the whole message was written, or a provider answered a 5xx but 503,
 *   so the server may hold it (retried with the same Message-ID; the copy may be a duplicate);
 * - `partial`: some recipients took it and others were deferred (retried for those only);
 * - `outage`: the lane's server refused the session (connection, greeting, EHLO, login, the module's own sender):
 *   retried when the lane resumes, not counted as an attempt;
 * - `refused`: the server refused it for good (5yz): `failed`;
 * - `render`: its template or an attachment could not be made into a message: `failed`;
 * - `attempts`, `age`: out of attempts or too old: `dead`;
 * - `crashes`: its worker stopped every time it was sent, until no attempt or age was left: `dead`;
 * - `expired`, `cancelled`, `suppressed`: closed without a send.
 */
export type FailureCause =
  | 'deferred'
  | 'unknown'
  | 'partial'
  | 'outage'
  | 'refused'
  | 'render'
  | 'attempts'
  | 'age'
  | 'crashes'
  | 'expired'
  | 'cancelled'
  | 'suppressed';

/**
 * The message was not delivered by this attempt, or will not be sent at all. `status` is the row's status after
 * it: `pending` with `nextAttemptAt` when it will be tried again; otherwise final: `failed`, `dead`
 * (`deadLettered`), `expired`, `cancelled` or `suppressed`; `cause` says why.
 *
 * Emitted after the change commits, at least once: a listener must be idempotent. Key it on `eventId`. Events of
 * one row may arrive out of order (a redelivered retry event after the sent event): for one row, a later event has
 * a larger `eventId` (compare them as BigInt).
 */
export class EmailFailedEvent {
  /** Unique per recorded event and kept by a redelivery: the key to deduplicate on. */
  readonly eventId!: string;
  readonly id!: string;
  readonly messageId!: string;
  readonly idempotencyKey!: string | null;
  /** The attempts counted against the row so far (an outage's attempt does not count). */
  readonly attempt!: number;
  readonly status!: OutboxStatus;
  readonly cause!: FailureCause;
  /** True when the server refused the message for good (5yz); false for every other cause. */
  readonly permanent!: boolean;
  /** True when the server may have taken the message although the send failed (the `unknown` cause). */
  readonly outcomeUnknown!: boolean;
  /** Recipients that took the message in this or an earlier attempt. */
  readonly accepted!: string[];
  /** Recipients it will be sent to again (the row is `pending`). */
  readonly deferred!: string[];
  readonly replyCode!: number | null;
  readonly enhancedStatus!: string | null;
  readonly reason!: string;
  readonly nextAttemptAt!: Date | null;
  readonly deadLettered!: boolean;
  readonly metadata!: Record<string, unknown> | null;

  constructor(props: EmailFailedEvent) {
    Object.assign(this, props);
  }

  /** Rebuilds the event from the JSON it was stored as. */
  static fromJSON(json: Record<string, unknown>, eventId: string): EmailFailedEvent {
    return new EmailFailedEvent({
      ...(json as unknown as EmailFailedEvent),
      eventId,
      nextAttemptAt: json.nextAttemptAt ? new Date(json.nextAttemptAt as string) : null,
    });
  }
}
