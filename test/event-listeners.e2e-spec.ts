import { afterEach, describe, expect, it } from '@jest/globals';
import { MikroOrmModule } from '@mikro-orm/nestjs';
import { type INestApplicationContext, Injectable, type OnModuleInit } from '@nestjs/common';
import { EventEmitter2, EventEmitterModule, OnEvent } from '@nestjs/event-emitter';
import { ScheduleModule } from '@nestjs/schedule';
import { Test } from '@nestjs/testing';
import {
  EMAIL_SENT_EVENT,
  type EmailSentEvent,
  MailOutboxService,
  ReliableMailModule,
  type ReliableMailOptions,
} from '@reliable-mail/nestjs';
import { ormConfig, testMailOptions, waitFor } from './support/test-app.js';
import { useTestBed } from './support/test-bed.js';

/** Hears every reliable-mail event through a wildcard pattern. */
@Injectable()
class WildcardListener {
  readonly heard: EmailSentEvent[] = [];

  @OnEvent('reliable-mail.**')
  onAnyMailEvent(event: EmailSentEvent): void {
    this.heard.push(event);
  }
}

/** Hears every event of the app through `onAny`, as an audit log or a bridge to a message bus would. */
@Injectable()
class AnyListener implements OnModuleInit {
  readonly heard: Array<{ name: string; eventId: string }> = [];
  constructor(private readonly emitter: EventEmitter2) {}

  onModuleInit(): void {
    this.emitter.onAny((name, event: EmailSentEvent) => {
      this.heard.push({ name: String(name), eventId: event.eventId });
    });
  }
}

/** Events are recorded (and so delivered at least once) whichever way the app listens for them. */
describe('events reach listeners registered by pattern or onAny', () => {
  const bed = useTestBed();
  const apps: INestApplicationContext[] = [];

  afterEach(async () => {
    await Promise.all(apps.splice(0).map((app) => app.close()));
  });

  async function appWith(
    listener: typeof WildcardListener | typeof AnyListener | null,
    smtpUrl: string,
    overrides: Partial<ReliableMailOptions> = {},
  ) {
    const moduleRef = await Test.createTestingModule({
      imports: [
        MikroOrmModule.forRoot(ormConfig(bed.databaseUrl)),
        EventEmitterModule.forRoot({ wildcard: true }),
        ScheduleModule.forRoot(),
        ReliableMailModule.forRoot(testMailOptions(smtpUrl, overrides)),
      ],
      providers: listener ? [listener] : [],
    }).compile();
    const app = moduleRef.createNestApplication({ logger: ['error'] });
    await app.init();
    apps.push(app);
    return app;
  }

  it.each([
    { name: 'a wildcard pattern', listener: WildcardListener },
    { name: 'onAny', listener: AnyListener },
  ])('$name: the sent event is recorded, emitted once with its id, and confirmed', async ({ listener }) => {
    const server = await bed.startSmtp();
    const app = await appWith(listener, server.url);
    const { id } = await app.get(MailOutboxService).enqueue({ to: 'ann@example.com', subject: 'Hi', text: 'Hello' });

    const { heard } = app.get<{ heard: Array<{ eventId: string }> }>(listener);
    await waitFor('the sent event', () => heard.length === 1);
    expect(heard[0].eventId).toMatch(/^\d+$/);
    if (listener === WildcardListener) expect(heard[0]).toMatchObject({ id });
    await waitFor('its confirmation', async () => (await bed.execute('select id from mail_outbox_event')).length === 0);
  });

  it('an instance that records every event but listens to none leaves them to an instance that listens', async () => {
    const server = await bed.startSmtp();
    const lease = { dispatcher: { eventLeaseMs: 300 } };
    const sender = await appWith(null, server.url, { ...lease, events: { record: 'all' } });
    const { id } = await sender.get(MailOutboxService).enqueue({ to: 'ann@example.com', subject: 'Hi', text: 'x' });
    await waitFor('the mail sent', () => server.received.length === 1);
    // Emitted nowhere, confirmed by nobody, through several of its leases and redelivery rounds.
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(await bed.execute('select name from mail_outbox_event')).toEqual([{ name: EMAIL_SENT_EVENT }]);

    const listening = await appWith(WildcardListener, server.url, lease);
    const { heard } = listening.get(WildcardListener);
    await waitFor('the event heard by the listening instance', () => heard.length === 1);
    expect(heard[0]).toMatchObject({ id });
    await waitFor('its confirmation', async () => (await bed.execute('select id from mail_outbox_event')).length === 0);
  });
});
