import { Module } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { MailOutboxAdmin } from './admin/mail-outbox-admin.js';
import { OutboxDatabase } from './database/outbox-database.js';
import { MailDispatcher } from './dispatch/mail.dispatcher.js';
import { MailRenderer } from './dispatch/mail-renderer.js';
import { WakeUpListener } from './dispatch/wake-up.listener.js';
import { MailEventPublisher } from './events/mail-event.publisher.js';
import { MailFeedbackService } from './feedback/mail-feedback.service.js';
import { MailOutboxHealthIndicator } from './health/mail-outbox.health.js';
import { MailMetrics } from './metrics/mail-metrics.js';
import { MailOutboxService } from './outbox/mail-outbox.service.js';
import { WakeUpNotifier } from './outbox/wake-up.notifier.js';
import { MAIL_TRANSPORTS } from './reliable-mail.constants.js';
import { ConfigurableReliableMailModule } from './reliable-mail.module-definition.js';
import { optionsProvider, templateRegistryProvider, transportsProvider } from './reliable-mail.providers.js';
import { MailEventRelay } from './relay/mail-event-relay.js';
import { RelayedEvents } from './relay/relayed-events.js';
import { OutboxRetention } from './retention/outbox-retention.js';
import { OutboxSchema } from './schema/outbox-schema.js';
import { ReliableMailStartup } from './startup/reliable-mail-startup.js';
import { MailTemplateRegistry } from './templates/mail-template.registry.js';
import { StoredTemplateVersions } from './templates/stored-template-versions.js';
import { CallerTransactions } from './transactions/caller-transactions.js';
import { MailUnsubscribeService } from './unsubscribe/mail-unsubscribe.service.js';

/**
 * The outbox and its dispatcher. Needs, from the app: `EventEmitterModule.forRoot()`, `ScheduleModule.forRoot()`
 * where the dispatcher runs, and its database: `database.url`, or the settings of its MikroOrmModule. The start
 * checks them (ReliableMailStartup).
 */
@Module({
  imports: [TerminusModule],
  providers: [
    optionsProvider,
    transportsProvider,
    templateRegistryProvider,
    StoredTemplateVersions,
    MailRenderer,
    OutboxSchema,
    OutboxDatabase,
    CallerTransactions,
    ReliableMailStartup,
    WakeUpNotifier,
    MailOutboxService,
    MailOutboxAdmin,
    RelayedEvents,
    MailEventPublisher,
    MailEventRelay,
    MailMetrics,
    WakeUpListener,
    MailDispatcher,
    OutboxRetention,
    MailOutboxHealthIndicator,
    MailFeedbackService,
    MailUnsubscribeService,
  ],
  exports: [
    MailOutboxService,
    MailFeedbackService,
    MailUnsubscribeService,
    MailOutboxAdmin,
    MailOutboxHealthIndicator,
    MailDispatcher,
    OutboxRetention,
    MAIL_TRANSPORTS,
    MailTemplateRegistry,
    // For ReliableMailConsoleModule (its actions and their audit in one transaction, its preview); not in index.ts.
    OutboxDatabase,
    MailRenderer,
  ],
})
export class ReliableMailModule extends ConfigurableReliableMailModule {}
