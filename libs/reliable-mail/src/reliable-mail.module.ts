import { hostname } from 'node:os';
import { Module } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { MailOutboxAdmin } from './admin/mail-outbox-admin.service.js';
import { MailOutboxHealthIndicator } from './health/mail-outbox.health.js';
import { MailMetrics } from './metrics/mail-metrics.js';
import { OutboxRetention } from './retention/outbox-retention.service.js';
import { MailDispatcher } from './dispatch/mail.dispatcher.js';
import { WakeUpListener } from './dispatch/wake-up.listener.js';
import { MailEventPublisher } from './events/mail-event.publisher.js';
import { MailOutboxService } from './outbox/mail-outbox.service.js';
import { OutboxDatabase } from './database/outbox-database.js';
import { WakeUpNotifier } from './outbox/wake-up.notifier.js';
import { MAIL_TRANSPORTS, RESOLVED_OPTIONS } from './reliable-mail.constants.js';
import { ConfigurableReliableMailModule, RELIABLE_MAIL_OPTIONS } from './reliable-mail.module-definition.js';
import { resolveOptions, type ReliableMailOptions, type ResolvedReliableMailOptions } from './reliable-mail.options.js';
import { MAIL_CONTENT_OPTIONS, resolveContentOptions } from './templates/content-options.js';
import { MailRenderer } from './templates/mail-renderer.js';
import { MailTemplateRegistry } from './templates/mail-template.registry.js';
import type { MailTransport } from './transport/mail-transport.interface.js';
import { SmtpMailTransport } from './transport/smtp-mail.transport.js';

/** One pooled transport shared by the lanes without their own, sized for all of them, plus each lane's own. */
function createLaneTransports(options: ResolvedReliableMailOptions): Map<string, MailTransport> {
  const sharedLanes = options.lanes.filter((lane) => !lane.ownTransport);
  const shared = new SmtpMailTransport(
    options.transport,
    sharedLanes.reduce((sum, lane) => sum + lane.concurrency, 0) || 1,
  );
  return new Map(
    options.lanes.map((lane) => [
      lane.name,
      lane.ownTransport ? new SmtpMailTransport(lane.transport, lane.concurrency) : shared,
    ]),
  );
}

/**
 * The outbox and its dispatcher. Needs, from the app: `MikroOrmModule` (PostgreSQL) with `reliableMailEntities`
 * and `reliableMailMigrations`, `EventEmitterModule.forRoot()` and `ScheduleModule.forRoot()`.
 */
@Module({
  imports: [TerminusModule],
  providers: [
    {
      provide: RESOLVED_OPTIONS,
      inject: [RELIABLE_MAIL_OPTIONS],
      useFactory: (options: ReliableMailOptions) => resolveOptions(options, hostname(), process.pid),
    },
    {
      provide: MAIL_TRANSPORTS,
      inject: [RESOLVED_OPTIONS],
      useFactory: createLaneTransports,
    },
    {
      provide: MAIL_CONTENT_OPTIONS,
      inject: [RELIABLE_MAIL_OPTIONS],
      useFactory: resolveContentOptions,
    },
    MailTemplateRegistry,
    MailRenderer,
    OutboxDatabase,
    WakeUpNotifier,
    MailOutboxService,
    MailOutboxAdmin,
    MailEventPublisher,
    MailMetrics,
    WakeUpListener,
    MailDispatcher,
    OutboxRetention,
    MailOutboxHealthIndicator,
  ],
  exports: [
    MailOutboxService,
    MailOutboxAdmin,
    MailOutboxHealthIndicator,
    MailDispatcher,
    OutboxRetention,
    MAIL_TRANSPORTS,
    MailTemplateRegistry,
  ],
})
export class ReliableMailModule extends ConfigurableReliableMailModule {}
