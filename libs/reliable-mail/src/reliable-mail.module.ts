import { hostname } from 'node:os';
import { Module } from '@nestjs/common';
import { MailDispatcher } from './dispatch/mail.dispatcher.js';
import { WakeUpListener } from './dispatch/wake-up.listener.js';
import { MailEventPublisher } from './events/mail-event.publisher.js';
import { MailOutboxService } from './outbox/mail-outbox.service.js';
import { OutboxRepository } from './outbox/outbox.repository.js';
import { MAIL_TRANSPORT, RESOLVED_OPTIONS } from './reliable-mail.constants.js';
import { ConfigurableReliableMailModule, RELIABLE_MAIL_OPTIONS } from './reliable-mail.module-definition.js';
import { resolveOptions, type ReliableMailOptions, type ResolvedReliableMailOptions } from './reliable-mail.options.js';
import { SmtpMailTransport } from './transport/smtp-mail.transport.js';

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
      provide: MAIL_TRANSPORT,
      inject: [RESOLVED_OPTIONS],
      useFactory: (options: ResolvedReliableMailOptions) =>
        new SmtpMailTransport(options.transport, options.dispatcher.concurrency),
    },
    OutboxRepository,
    MailOutboxService,
    MailEventPublisher,
    WakeUpListener,
    MailDispatcher,
  ],
  exports: [MailOutboxService, MailDispatcher, MAIL_TRANSPORT],
})
export class ReliableMailModule extends ConfigurableReliableMailModule {}
