/**
 * Injection token of the module's options after defaults and validation (`ResolvedReliableMailOptions`): every
 * provider reads these, never the raw input.
 */
export const RELIABLE_MAIL_OPTIONS = Symbol('reliable-mail:options');

/** Injection token of the `Map<lane, MailTransport>` the dispatcher sends through. */
export const MAIL_TRANSPORTS = Symbol('reliable-mail:mail-transports');

/** `EmailSentEvent` is emitted under this name through @nestjs/event-emitter: `@OnEvent(EMAIL_SENT_EVENT)`. */
export const EMAIL_SENT_EVENT = 'reliable-mail.email.sent';

/** `EmailFailedEvent` is emitted under this name: `@OnEvent(EMAIL_FAILED_EVENT)`. */
export const EMAIL_FAILED_EVENT = 'reliable-mail.email.failed';

/** `EmailBouncedEvent` is emitted under this name: `@OnEvent(EMAIL_BOUNCED_EVENT)`. */
export const EMAIL_BOUNCED_EVENT = 'reliable-mail.email.bounced';

/** `EmailComplainedEvent` is emitted under this name: `@OnEvent(EMAIL_COMPLAINED_EVENT)`. */
export const EMAIL_COMPLAINED_EVENT = 'reliable-mail.email.complained';

/** `EmailDeliveredEvent` is emitted under this name: `@OnEvent(EMAIL_DELIVERED_EVENT)`. */
export const EMAIL_DELIVERED_EVENT = 'reliable-mail.email.delivered';

/** The events a relay destination can take: every one reliable-mail records. */
export const RELAYABLE_EVENTS: readonly string[] = [
  EMAIL_SENT_EVENT,
  EMAIL_FAILED_EVENT,
  EMAIL_BOUNCED_EVENT,
  EMAIL_COMPLAINED_EVENT,
  EMAIL_DELIVERED_EVENT,
];

/** The PostgreSQL channel an enqueue notifies on commit, so that an idle dispatcher wakes at once. */
export const WAKE_UP_CHANNEL = 'reliable_mail_wake_up';

/** The prefix of the dispatcher's self-rescheduling timeouts in @nestjs/schedule's registry. */
export const DISPATCHER_TIMEOUT_NAME = 'reliable-mail:dispatcher';
