export { ReliableMailModule } from './reliable-mail.module.js';
export { RELIABLE_MAIL_OPTIONS } from './reliable-mail.module-definition.js';
export {
  DEFAULT_DISPATCHER_OPTIONS,
  DEFAULT_LANES,
  DEFAULT_RETRY_OPTIONS,
  DEFAULT_SMTP_TIMEOUTS,
  type DispatcherOptions,
  type LaneOptions,
  type ReliableMailOptions,
  type RetryOptions,
  type SmtpTransportOptions,
} from './reliable-mail.options.js';
export { MAIL_TRANSPORTS } from './reliable-mail.constants.js';
export {
  IdempotencyConflictError,
  InvalidOptionsError,
  MailValidationError,
  OutboxRowNotCancellableError,
  OutboxRowNotFoundError,
  ReliableMailError,
} from './errors.js';
export { MailOutboxService, type BatchMail, type EnqueueManyOptions } from './outbox/mail-outbox.service.js';
export { MailOutbox, MailOutboxAttempt, MailOutboxEvent, MailSuppression, reliableMailEntities } from './outbox/mail-outbox.entity.js';
export { reliableMailMigrations } from './migrations/index.js';
export type {
  AttemptOutcome,
  EnqueueOptions,
  EnqueueResult,
  MailAddressInput,
  OutboxAttempt,
  OutboxRow,
  OutboxRowWithAttempts,
  OutboxStatus,
  OutgoingMail,
  RejectedRecipient,
} from './outbox/mail.types.js';
export { EMAIL_SENT_EVENT, EmailSentEvent } from './events/email-sent.event.js';
export { EMAIL_FAILED_EVENT, EmailFailedEvent } from './events/email-failed.event.js';
export { MailDispatcher } from './dispatch/mail.dispatcher.js';
export type { DeliveryReport, MailTransport, OutboundMessage, SmtpFailure } from './transport/mail-transport.interface.js';
