import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { MikroOrmModule } from '@mikro-orm/nestjs';
import { EntityManager } from '@mikro-orm/postgresql';
import { Body, Controller, type INestApplication, Module, Post } from '@nestjs/common';
import { EventEmitterModule } from '@nestjs/event-emitter';
import { ScheduleModule, SchedulerRegistry } from '@nestjs/schedule';
import { Test } from '@nestjs/testing';
import { handlebarsTemplate, MailOutboxAdmin, MailOutboxService, ReliableMailModule } from '@reliable-mail/nestjs';
import { MailExpectationError, MailTester, withMailCapture } from '@reliable-mail/nestjs/testing';
import { ReliableMailSetupError } from '../libs/reliable-mail/src/errors.js';
import { listenLocally, postJson } from './support/http-client.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';
import { EventRecorder, migrate, ormConfig, testLogger } from './support/test-app.js';

// An app as its own repository would have it: a controller that enqueues in its transaction, a template, a
// listener (EventRecorder), and an SMTP server that does not exist (port 1): a test that reached it would fail.
@Controller()
class SignupController {
  constructor(
    private readonly em: EntityManager,
    private readonly outbox: MailOutboxService,
  ) {}

  @Post('signup')
  async signup(@Body() body: { email: string; name: string; withTerms?: boolean }) {
    return this.em.transactional(async () => {
      const { id } = await this.outbox.enqueue(
        {
          to: body.email,
          template: 'welcome',
          params: { name: body.name },
          attachments: body.withTerms
            ? [{ filename: 'terms.txt', contentType: 'text/plain', content: 'Be nice.' }]
            : undefined,
        },
        { metadata: { signup: body.email } },
      );
      return { id };
    });
  }
}

function appModule(databaseUrl: string) {
  @Module({
    imports: [
      MikroOrmModule.forRoot(ormConfig(databaseUrl)),
      EventEmitterModule.forRoot(),
      ScheduleModule.forRoot(),
      ReliableMailModule.forRootAsync({
        useFactory: () => ({
          transport: 'smtp://127.0.0.1:1',
          from: 'shop@example.com',
          messageIdDomain: 'shop.example.com',
          templates: [
            handlebarsTemplate({
              name: 'welcome',
              version: 1,
              subject: 'Welcome {{name}}',
              html: '<p>Hi {{name}}</p>',
            }),
          ],
        }),
      }),
    ],
    controllers: [SignupController],
    providers: [EventRecorder],
  })
  class AppModule {}
  return AppModule;
}

describe('testing utilities: withMailCapture and MailTester', () => {
  let database: TestDatabase;
  let app: INestApplication;
  let mail: MailTester;
  let base: string;

  const signup = (body: Record<string, unknown>) => postJson(base, '/signup', body);

  beforeAll(async () => {
    database = await createTestDatabase();
    await migrate(database.url);
    const moduleRef = await withMailCapture(Test.createTestingModule({ imports: [appModule(database.url)] })).compile();
    app = moduleRef.createNestApplication({ logger: testLogger });
    base = await listenLocally(app);
    mail = MailTester.of(app);
  });

  beforeEach(() => mail.reset());

  afterAll(async () => {
    await app?.close();
    await database?.drop();
  });

  it('sees what the app enqueued, sends it on drain with no server, and its listeners have run by then', async () => {
    const { id } = (await (await signup({ email: 'Ann@Example.com', name: 'Ann' })).json()) as { id: string };
    const row = await mail.expectEnqueued({ to: 'ann@example.com', template: 'welcome' });
    expect(row).toMatchObject({ id, status: 'pending', metadata: { signup: 'Ann@Example.com' } });
    expect(mail.sent()).toEqual([]);

    expect(await mail.drain()).toEqual({ sent: 1, failed: 0, pending: 0 });
    const sent = mail.expectSent({ to: 'ann@example.com', subject: 'Welcome Ann' });
    expect(sent).toMatchObject({ messageId: row.messageId, html: '<p>Hi Ann</p>', lane: 'default' });
    expect(sent.raw.toString()).toContain(`Message-ID: ${row.messageId}`);
    expect(app.get(EventRecorder).sent.map((event) => event.id)).toContain(id);
    expect(await mail.expectEnqueued({ to: 'ann@example.com', status: 'sent' })).toMatchObject({ id });
  });

  it('starts no timer: nothing is sent until the test drains', async () => {
    const scheduler = app.get(SchedulerRegistry);
    expect([...scheduler.getTimeouts(), ...scheduler.getIntervals(), ...scheduler.getCronJobs().keys()]).toEqual([]);
    await signup({ email: 'bob@example.com', name: 'Bob' });
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect((await mail.expectEnqueued({ to: 'bob@example.com' })).status).toBe('pending');
    await mail.drain();
    expect(mail.sent().map((sent) => sent.subject)).toEqual(['Welcome Bob']);
  });

  it('captures attachments with their bytes', async () => {
    await signup({ email: 'cy@example.com', name: 'Cy', withTerms: true });
    await mail.drain();
    expect(mail.expectSent({ to: 'cy@example.com' }).attachments).toEqual([
      expect.objectContaining({ filename: 'terms.txt', contentType: 'text/plain', content: Buffer.from('Be nice.') }),
    ]);
  });

  it("a refused recipient's mail fails, with its failed event; a deferred one stays pending", async () => {
    mail.refuse('gone@example.com');
    mail.defer('slow@example.com');
    const gone = (await (await signup({ email: 'gone@example.com', name: 'G' })).json()) as { id: string };
    await signup({ email: 'slow@example.com', name: 'S' });
    expect(await mail.drain()).toEqual({ sent: 0, failed: 1, pending: 1 });
    expect(mail.sent()).toEqual([]);
    expect((await mail.expectEnqueued({ to: 'gone@example.com' })).status).toBe('failed');
    expect((await mail.expectEnqueued({ to: 'slow@example.com' })).status).toBe('pending');
    expect(app.get(EventRecorder).failed.map((event) => event.id)).toContain(gone.id);
  });

  it("a refusal's reply counts as a server's: a 5.1.1 suppresses the address, a 5.7.1 does not", async () => {
    mail.refuse('gone@example.com');
    mail.refuse('spam@example.com', '550 5.7.1 message refused as spam');
    await signup({ email: 'gone@example.com', name: 'G' });
    await signup({ email: 'spam@example.com', name: 'S' });
    expect(await mail.drain()).toEqual({ sent: 0, failed: 2, pending: 0 });
    const suppressed = await app.get(MailOutboxAdmin).listSuppressions();
    expect(suppressed.map((entry) => entry.address)).toEqual(['gone@example.com']);
  });

  it('an expectation not met names what there was', async () => {
    await signup({ email: 'dee@example.com', name: 'Dee' });
    await expect(mail.expectEnqueued({ to: 'eve@example.com' })).rejects.toThrow(MailExpectationError);
    await expect(mail.expectEnqueued({ to: 'eve@example.com' })).rejects.toThrow(
      /No enqueued mail matches \{"to":"eve@example.com"\}; enqueued:\n {2}pending in default: to dee@example.com; template welcome/,
    );
    expect(() => mail.expectSent({ subject: /Dee/ })).toThrow(/nothing was sent \(did the test call drain\(\)\?\)/);
    await mail.drain();
    expect(() => mail.expectSent({ to: 'eve@example.com' })).toThrow(/sent:\n {2}to dee@example.com: "Welcome Dee"/);
  });

  it('refuses a field its match cannot look at, which would let any mail meet the expectation', async () => {
    await signup({ email: 'gil@example.com', name: 'Gil' });
    await mail.drain();
    expect(() => mail.expectSent({ template: 'welcome' } as never)).toThrow(
      'sent cannot match on template; it matches on to, subject, body, lane',
    );
    await expect(mail.expectEnqueued({ body: /Gil/ } as never)).rejects.toThrow(TypeError);
  });

  it('reset forgets what came before it', async () => {
    await signup({ email: 'fay@example.com', name: 'Fay' });
    await mail.drain();
    await mail.reset();
    expect(await mail.enqueued()).toEqual([]);
    expect(mail.sent()).toEqual([]);
  });

  it('refuses an app built without withMailCapture', async () => {
    const moduleRef = await Test.createTestingModule({ imports: [appModule(database.url)] }).compile();
    const plain = moduleRef.createNestApplication({ logger: testLogger });
    try {
      expect(() => MailTester.of(plain)).toThrow(ReliableMailSetupError);
    } finally {
      await plain.close();
    }
  });
});
