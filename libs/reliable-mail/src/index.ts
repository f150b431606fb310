// The public API of @reliable-mail/nestjs. Anything not exported here is internal and may change in any release.

// The module and its options
export { ReliableMailModule } from './reliable-mail.module.js';
export type {
  AttachmentResolver,
  DatabaseOptions,
  DispatcherOptions,
  EventOptions,
  HealthOptions,
  LaneOptions,
  LaneQuotaOptions,
  LoggingOptions,
  QuotaCounts,
  RelayOptions,
  ReliableMailOptions,
  RetentionOptions,
  RetryOptions,
  TransportOption,
  UnsubscribeOptions,
  VerpOptions,
} from './options/reliable-mail-options.interface.js';
export type { SmtpTransportOptions } from './transport/smtp/smtp-transport-options.js';
export type { DkimOptions } from './transport/smtp/dkim-options.js';

// Errors, all of one family
export {
  IdempotencyConflictError,
  InvalidOptionsError,
  MailValidationError,
  MissingPeerDependencyError,
  OutboxFilterError,
  OutboxRowNotCancellableError,
  OutboxRowNotFoundError,
  ReliableMailError,
  ReliableMailSetupError,
  TransactionRequiredError,
  FeedbackPayloadError,
  FeedbackSignatureError,
  FeedbackUnavailableError,
  UnknownFeedbackSourceError,
} from './errors.js';
// Answering an HTTP request that failed with one of them: 400, 404, 409 or 500, with the reason
export { ReliableMailErrorFilter, httpStatusOf } from './http/reliable-mail-error.filter.js';

// Writing mail: the outbox, in the business transaction
export {
  MailOutboxService,
  type BatchMail,
  type EnqueueManyOptions,
  type TransactionOption,
} from './outbox/mail-outbox.service.js';
export type {
  AttemptOutcome,
  ContentMail,
  EnqueueOptions,
  EnqueueResult,
  InlineAttachment,
  JsonValue,
  MailAddressInput,
  MailAttachment,
  MailPayload,
  MailPayloadV1,
  MailPayloadV2,
  OutboxAttempt,
  OutboxRow,
  OutboxRowWithAttempts,
  OutboxStatus,
  OutgoingMail,
  ReferencedAttachment,
  RejectedRecipient,
  StoredAttachment,
  StoredTemplate,
  TemplateMail,
} from './outbox/mail.types.js';
export type { BounceType, FeedbackKind, FeedbackSource, OutboxFeedback } from './outbox/feedback.types.js';

// The schema reliable-mail owns (`npx reliable-mail migrate`; MikroORM's migrations are in
// '@reliable-mail/nestjs/mikro-orm')
export { DEFAULT_SCHEMA } from './schema/outbox-tables.js';
export { KNOWN_SCHEMA_VERSION, NEEDED_SCHEMA_VERSION } from './schema/schema-steps.js';

// Events, emitted after the change they report commits
export {
  EMAIL_BOUNCED_EVENT,
  EMAIL_COMPLAINED_EVENT,
  EMAIL_DELIVERED_EVENT,
  EMAIL_FAILED_EVENT,
  EMAIL_SENT_EVENT,
} from './reliable-mail.constants.js';
export { EmailSentEvent } from './events/email-sent.event.js';
export { EmailFailedEvent, type FailureCause } from './events/email-failed.event.js';
export { MailFeedbackEvent } from './events/mail-feedback.event.js';
export { EmailBouncedEvent } from './events/email-bounced.event.js';
export { EmailComplainedEvent } from './events/email-complained.event.js';
export { EmailDeliveredEvent } from './events/email-delivered.event.js';

// Delivery feedback: provider webhooks and DSN emails
export { MailFeedbackService, type FeedbackIngestResult } from './feedback/mail-feedback.service.js';
export { ReliableMailWebhooksModule } from './feedback/webhooks/reliable-mail-webhooks.module.js';
export type { ReliableMailWebhooksOptions, WebhookSourcesOptions } from './feedback/webhooks/webhooks-options.js';
export type { SesWebhookOptions } from './feedback/sources/ses-webhook-source.js';
export type { ResendWebhookOptions } from './feedback/sources/resend-webhook-source.js';
export type { PostmarkWebhookOptions } from './feedback/sources/postmark-webhook-source.js';
export type { WebhookHeaders } from './feedback/sources/webhook-source.js';

// One-click unsubscribe (RFC 8058) of the lanes marked transactional: false
export { MailUnsubscribeService, type UnsubscribeResult } from './unsubscribe/mail-unsubscribe.service.js';
export { type UnsubscribeRequest, UnsubscribeTokenError } from './unsubscribe/unsubscribe-token.js';

// The web console
export { ReliableMailConsoleModule } from './console/reliable-mail-console.module.js';
export { ReliableMailPreviewModule } from './console/reliable-mail-preview.module.js';
export type {
  ConsoleAccess,
  ConsoleAuthorize,
  ConsolePermission,
  ReliableMailConsoleOptions,
} from './console/console-options.js';

// Templates, rendered at send time
export { MailTemplateRegistry } from './templates/mail-template.registry.js';
export {
  InvalidTemplateError,
  paramsValidator,
  type MailRenderContext,
  type MailTemplate,
  type ParamsSchema,
  type RenderedContent,
  type StandardSchemaLike,
  type TemplateVersion,
} from './templates/mail-template.js';
export {
  handlebarsTemplate,
  type HandlebarsLayout,
  type HandlebarsSources,
  type HandlebarsTemplateOptions,
} from './templates/handlebars-template.js';
export {
  fileTemplates,
  MailTemplateFolder,
  type FileTemplate,
  type FileTemplateSources,
  type FileTemplatesOptions,
} from './templates/file-templates.js';
export { htmlToText } from './templates/html-to-text.js';

// Operating it: the runbook's verbs, health, retention
export { MailOutboxAdmin } from './admin/mail-outbox-admin.js';
export type { OutboxFilter, OutboxStats, Suppression, Unsubscribe } from './outbox/operations.types.js';
export type { UnsubscribeCursor } from './unsubscribe/sql/unsubscribes.js';
export { MailOutboxHealthIndicator } from './health/mail-outbox.health.js';
export { OutboxRetention } from './retention/outbox-retention.js';

// Transports: the interface another one implements, and the providers' (each needs its SDK installed)
export type {
  MailAddress,
  MailTransport,
  OutboundAttachment,
  OutboundMessage,
  RecipientOutcome,
  RecipientStatus,
  RenderedMail,
  ProviderSendQuota,
  SendOutcome,
  TransportContext,
} from './transport/mail-transport.interface.js';
export { SesMailTransport, type SesTransportOptions } from './transport/ses/ses-mail.transport.js';
export { PostmarkMailTransport, type PostmarkTransportOptions } from './transport/postmark/postmark-mail.transport.js';
export { ResendMailTransport, type ResendTransportOptions } from './transport/resend/resend-mail.transport.js';
export { EmlFileTransport, type EmlFileTransportOptions } from './transport/file/eml-file.transport.js';
export type { RelayDestination, RelayedEvent } from './relay/relay-destination.interface.js';
export { NatsJetStreamDestination, type NatsJetStreamDestinationOptions } from './relay/nats-jetstream.destination.js';
export { RabbitMqDestination, type RabbitMqDestinationOptions } from './relay/rabbitmq.destination.js';
export {
  type FailoverEntry,
  FailoverTransport,
  type FailoverTransportOptions,
} from './transport/failover/failover-transport.js';
