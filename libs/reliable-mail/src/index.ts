export { ReliableMailModule } from './reliable-mail.module.js';
export { RELIABLE_MAIL_OPTIONS } from './reliable-mail.module-definition.js';
export {
  DEFAULT_DISPATCHER_OPTIONS,
  DEFAULT_HEALTH_OPTIONS,
  DEFAULT_LANES,
  DEFAULT_RETENTION_OPTIONS,
  DEFAULT_RETRY_OPTIONS,
  DEFAULT_SMTP_TIMEOUTS,
  type DispatcherOptions,
  type HealthOptions,
  type LaneOptions,
  type RetentionOptions,
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
export {
  MailOutbox,
  MailOutboxAttempt,
  MailOutboxEvent,
  MailSuppression,
  reliableMailEntities,
} from './outbox/mail-outbox.entity.js';
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
  ContentMail,
  TemplateMail,
  MailAttachment,
  InlineAttachment,
  ReferencedAttachment,
  MailPayload,
  MailPayloadV1,
  MailPayloadV2,
  StoredTemplate,
  StoredAttachment,
  JsonValue,
} from './outbox/mail.types.js';
export { EMAIL_SENT_EVENT, EmailSentEvent } from './events/email-sent.event.js';
export { EMAIL_FAILED_EVENT, EmailFailedEvent } from './events/email-failed.event.js';
export { MailDispatcher } from './dispatch/mail.dispatcher.js';
export { MailOutboxAdmin } from './admin/mail-outbox-admin.service.js';
export type { OutboxFilter, OutboxStats, Suppression } from './outbox/operations.types.js';
export { MailOutboxHealthIndicator } from './health/mail-outbox.health.js';
export { OutboxRetention } from './retention/outbox-retention.service.js';
export type {
  DeliveryReport,
  MailTransport,
  OutboundAttachment,
  OutboundMessage,
  RenderedMail,
  SmtpFailure,
} from './transport/mail-transport.interface.js';
export {
  InvalidTemplateError,
  paramsValidator,
  type MailRenderContext,
  type MailTemplate,
  type ParamsSchema,
  type RenderedContent,
  type StandardSchemaLike,
} from './templates/mail-template.js';
export { MailTemplateRegistry } from './templates/mail-template.registry.js';
export {
  handlebarsTemplate,
  type HandlebarsSources,
  type HandlebarsTemplateOptions,
} from './templates/handlebars-template.js';
export { decodeEntities, htmlToText } from './templates/html-to-text.js';
export { DEFAULT_MAX_MESSAGE_BYTES, type AttachmentResolver } from './templates/content-options.js';
