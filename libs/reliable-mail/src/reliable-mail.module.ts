import { hostname } from 'node:os';
import { Module } from '@nestjs/common';
import { MailDispatcher } from './dispatch/mail.dispatcher.js';
import { WakeUpListener } from './dispatch/wake-up.listener.js';
import { MailEventPublisher } from './events/mail-event.publisher.js';
import { MailOutboxService } from './outbox/mail-outbox.service.js';
import { OutboxRepository } from './outbox/outbox.repository.js';
import { MAIL_TRANSPORTS, RESOLVED_OPTIONS } from './reliable-mail.constants.js';
import { ConfigurableReliableMailModule, RELIABLE_MAIL_OPTIONS } from './reliable-mail.module-definition.js';
import { resolveOptions, type ReliableMailOptions, type ResolvedReliableMailOptions } from './reliable-mail.options.js';
import type { MailTransport } from './transport/mail-transport.interface.js';
import { SmtpMailTransport } from './transport/smtp-mail.transport.js';

/** One pooled transport shared by the lanes without their own, sized for all of them, plus each lane's own. */
function createLaneTransports(options: ResolvedReliableMailOptions): Map<string, MailTransport> {
  const sharedLanes = options.lanes.filter((lane) => !lane.ownTransport);
  const shared = new SmtpMailTransport(options.transport, sharedLanes.reduce((sum, lane) => sum + lane.concurrency, 0) || 1);
  return new Map(
    options.lanes.map((lane) => [lane.name, lane.ownTransport ? new SmtpMailTransport(lane.transport, lane.concurrency) : shared]),
  );
}

/**
 * The outbox and its dispatcher. Needs, from the app: `MikroOrmModule` (PostgreSQL) with `reliableMailEntities`
 * and `reliableMailMigrations`, `EventEmitterModule.forRoot()` and `ScheduleModule.forRoot()`.
 */
@Module({
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
    OutboxRepository,
    MailOutboxService,
    MailEventPublisher,
    WakeUpListener,
    MailDispatcher,
  ],
  exports: [MailOutboxService, MailDispatcher, MAIL_TRANSPORTS],
})
export class ReliableMailModule extends ConfigurableReliableMailModule {}
