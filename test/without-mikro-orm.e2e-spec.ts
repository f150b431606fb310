import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  MailFeedbackService,
  MailOutboxAdmin,
  MailOutboxHealthIndicator,
  MailOutboxService,
  ReliableMailWebhooksModule,
} from '@reliable-mail/nestjs';
import { SmtpTestServer } from './support/smtp-test-server.js';
import { createTestApp, migrate, type TestAppOptions, testMailOptions, waitFor } from './support/test-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

// An app with no ORM at all, reliable-mail on database.url: every public service works, not only the enqueue.

const credentials = { username: 'postmark', password: 's3cret-webhook-password' };

describe('an app without MikroORM', () => {
  let database: TestDatabase;
  let smtp: SmtpTestServer;
  let app: Awaited<ReturnType<typeof createTestApp>>;

  beforeAll(async () => {
    database = await createTestDatabase();
    await migrate(database.url);
    smtp = new SmtpTestServer();
    await smtp.listen();
    const appOptions: TestAppOptions = {
      mikroOrm: false,
      imports: [ReliableMailWebhooksModule.forRoot({ sources: { postmark: { basicAuth: credentials } } })],
    };
    app = await createTestApp(
      database.url,
      testMailOptions(smtp.url, { database: { url: database.url } }),
      [],
      appOptions,
    );
  });

  afterAll(async () => {
    await app?.close();
    await smtp?.close();
    await database?.drop();
  });

  it('sends, reads, cancels, lists, suppresses, counts, takes feedback and reports its health', async () => {
    const outbox = app.get(MailOutboxService);
    const admin = app.get(MailOutboxAdmin);

    const sent = await outbox.enqueue({ to: 'ann@example.org', subject: 'Hi', text: 'x' }, { metadata: { n: 1 } });
    await waitFor('the mail sent', async () => (await outbox.get(sent.id)).status === 'sent');
    const later = await outbox.enqueue({ to: 'bob@example.org', subject: 'Later', text: 'x' }, { delayMs: 3_600_000 });
    await expect(outbox.cancel(later.id)).resolves.toEqual({ id: later.id, status: 'cancelled' });

    expect((await admin.list({ metadata: { n: 1 } })).map((row) => row.id)).toEqual([sent.id]);
    await admin.suppress('cid@example.org', 'asked not to be mailed');
    expect((await admin.listSuppressions()).map((entry) => entry.address)).toEqual(['cid@example.org']);
    expect((await admin.stats()).counts).toEqual(
      expect.arrayContaining([
        { status: 'sent', lane: 'default', count: 1 },
        { status: 'cancelled', lane: 'default', count: 1 },
      ]),
    );

    const delivery = JSON.stringify({
      RecordType: 'Delivery',
      MessageStream: 'outbound',
      MessageID: 'postmark-1',
      Recipient: 'ann@example.org',
      DeliveredAt: '2026-12-03T10:00:00Z',
      Details: 'smtp;250 2.0.0 OK',
    });
    const authorization = `Basic ${Buffer.from(`${credentials.username}:${credentials.password}`).toString('base64')}`;
    await expect(
      app.get(MailFeedbackService).ingest('postmark', delivery, { authorization, 'content-type': 'application/json' }),
    ).resolves.toMatchObject({ stored: 1 });

    const health = await app.get(MailOutboxHealthIndicator).isHealthy('mail');
    expect(health.mail.status).toBe('up');
  });
});
