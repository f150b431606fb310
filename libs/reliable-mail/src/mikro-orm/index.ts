// @reliable-mail/nestjs/mikro-orm: what a MikroORM app may add to its ORM configuration. Apart from the package's
// root, which loads no MikroORM package, so that an app on another stack installs none.
export { reliableMailMigrations, reliableMailMigrationsInSchema } from './migrations.js';
export {
  MailConsoleAudit,
  MailInstance,
  MailMigration,
  MailOutbox,
  MailOutboxAttempt,
  MailOutboxEvent,
  MailOutboxFeedback,
  MailRelay,
  MailRelayDestination,
  MailSuppression,
  MailSendQuota,
  MailTemplateSource,
  MailUnsubscribe,
  reliableMailEntities,
} from './entities.js';
