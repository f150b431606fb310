import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { MikroOrmModule } from '@mikro-orm/nestjs';
import type { INestApplication } from '@nestjs/common';
import { EventEmitterModule } from '@nestjs/event-emitter';
import { Test } from '@nestjs/testing';
import {
  handlebarsTemplate,
  MailOutboxService,
  ReliableMailConsoleModule,
  ReliableMailModule,
  ReliableMailPreviewModule,
  ReliableMailSetupError,
} from '@reliable-mail/nestjs';
import { listenLocally } from './support/http-client.js';
import { migrate, ormConfig, testLogger, testMailOptions } from './support/test-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

// The preview of what the app sends: standalone (ReliableMailPreviewModule, for development) and as the console's
// Preview page, on a real outbox. Nothing is sent: the dispatcher is off, and a preview renders the stored mail as
// its send would.

const templates = [
  handlebarsTemplate({
    name: 'welcome',
    version: 1,
    subject: 'Welcome {{name}}',
    html: '<h1>Hi {{name}}</h1>',
    text: 'Hi {{name}}, in plain text',
  }),
];

async function appWith(databaseUrl: string, preview: ReturnType<typeof ReliableMailPreviewModule.forRoot>) {
  const moduleRef = await Test.createTestingModule({
    imports: [
      MikroOrmModule.forRoot(ormConfig(databaseUrl)),
      EventEmitterModule.forRoot(),
      ReliableMailModule.forRoot({
        ...testMailOptions('smtp://127.0.0.1:1', { dispatcher: { enabled: false }, templates }),
        isGlobal: true,
      }),
      preview,
    ],
  }).compile();
  return moduleRef.createNestApplication({ logger: testLogger });
}

describe('the mail preview', () => {
  let database: TestDatabase;
  let app: INestApplication;
  let base: string;
  const ids: string[] = [];

  const get = async (path: string, headers: Record<string, string> = {}) => {
    const response = await fetch(`${base}${path}`, { headers });
    return { status: response.status, body: await response.text() };
  };

  beforeAll(async () => {
    database = await createTestDatabase();
    await migrate(database.url);
    app = await appWith(database.url, ReliableMailPreviewModule.forRoot());
    base = await listenLocally(app);
    const outbox = app.get(MailOutboxService);
    ids.push((await outbox.enqueue({ to: 'ann@example.com', subject: 'Your receipt', text: 'Paid' })).id);
    ids.push((await outbox.enqueue({ to: 'bob@example.com', template: 'welcome', params: { name: 'Bob' } })).id);
  });

  afterAll(async () => {
    await app?.close();
    await database?.drop();
  });

  it('lists the newest mails and shows the newest rendered, its template subject included', async () => {
    const { status, body } = await get('/mail-preview');
    expect(status).toBe(200);
    const list = body.slice(body.indexOf('data-testid="preview-list"'), body.indexOf('data-testid="preview-mail"'));
    expect(list.indexOf('(template welcome)')).toBeGreaterThan(-1);
    expect(list.indexOf('(template welcome)')).toBeLessThan(list.indexOf('Your receipt'));
    expect(body).toContain('<h2>Welcome Bob</h2>');
    expect(body).toContain(`src="/mail-preview/mails/${ids[1]}/message"`);
    const frame = await get(`/mail-preview/mails/${ids[1]}/message`);
    expect(frame.body).toBe('<h1>Hi Bob</h1>');
  });

  it('shows the mail asked for, and its text part on request', async () => {
    const { body } = await get(`/mail-preview?id=${ids[1]}&part=text`);
    expect(body).toContain(`src="/mail-preview/mails/${ids[1]}/message?part=text"`);
    expect((await get(`/mail-preview/mails/${ids[1]}/message?part=text`)).body).toContain('Hi Bob, in plain text');
    expect((await get(`/mail-preview/preview?id=${ids[0]}`)).body).toContain('<h2>Your receipt</h2>');
    expect((await get('/mail-preview/preview?id=0190a000-0000-7000-8000-000000000000')).status).toBe(404);
  });

  it('is read-only: an action is refused', async () => {
    const { status, body } = await get(`/mail-preview/mails/${ids[0]}/cancel`);
    expect(status).toBe(403);
    expect(body).toContain('the mail console is read-only');
  });

  it('refuses to start when NODE_ENV is production', async () => {
    const environment = process.env.NODE_ENV;
    process.env.NODE_ENV = 'production';
    try {
      await expect(appWith(database.url, ReliableMailPreviewModule.forRoot({ path: 'p' }))).rejects.toThrow(
        ReliableMailSetupError,
      );
    } finally {
      process.env.NODE_ENV = environment;
    }
  });

  it("is the console's Preview page, where a requester without the content permission sees no subject", async () => {
    const console = await appWith(
      database.url,
      ReliableMailConsoleModule.forRoot({
        authorize: (request) =>
          (request as { headers: Record<string, string> }).headers['x-content'] === 'yes'
            ? { actor: 'dev', permissions: ['view', 'content'] }
            : { actor: 'viewer', permissions: ['view'] },
      }),
    );
    try {
      const consoleBase = await listenLocally(console);
      const page = async (headers: Record<string, string>) =>
        (await fetch(`${consoleBase}/mail/preview`, { headers })).text();
      const withContent = await page({ 'x-content': 'yes' });
      expect(withContent).toContain('href="/mail/preview" aria-current="page"');
      expect(withContent).toContain('<h2>Welcome Bob</h2>');
      const without = await page({});
      expect(without).not.toContain('Welcome Bob');
      expect(without).not.toContain('Your receipt');
      expect(without).not.toContain('bob@example.com');
      expect(without).toContain('needs the content permission');
    } finally {
      await console.close();
    }
  });
});
