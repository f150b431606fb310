import { afterEach, describe, expect, it } from '@jest/globals';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { INestApplication } from '@nestjs/common';
import { createDemoApp } from '../apps/demo/src/app.module.js';
import { providerFromEnv } from '../apps/demo/src/mail-transport.env.js';
import { MailOutboxService } from '@reliable-mail/nestjs';
import { PostmarkTestApi } from './support/postmark-test-api.js';
import { ResendTestApi } from './support/resend-test-api.js';
import { SesTestFront } from './support/ses-test-front.js';
import { createTestDatabase } from './support/test-database.js';
import { waitFor } from './support/test-app.js';

describe('the demo shop pointed at a provider by MAIL_TRANSPORT', () => {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  async function demo(env: Record<string, string>): Promise<INestApplication> {
    const database = await createTestDatabase();
    cleanups.push(() => database.drop());
    const app = await createDemoApp({
      databaseUrl: database.url,
      transport: providerFromEnv(env)!.transport,
      logger: false,
      mail: { dispatcher: { pollIntervalMs: 50 } },
    });
    cleanups.push(() => app.close());
    await app.listen(0, '127.0.0.1');
    return app;
  }

  async function placeOrder(app: INestApplication): Promise<string> {
    const { port } = (app.getHttpServer() as Server).address() as AddressInfo;
    const response = await fetch(`http://127.0.0.1:${port}/orders`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'ann@example.com', items: [{ sku: 'mug', qty: 1, price: 3 }] }),
    });
    const { mail } = (await response.json()) as { mail: { id: string; messageId: string } };
    await waitFor(
      'the order mail to be sent',
      async () => (await app.get(MailOutboxService).get(mail.id)).status === 'sent',
    );
    return mail.messageId;
  }

  it('ses', async () => {
    const front = await new SesTestFront().start();
    cleanups.push(() => front.close());
    // The AWS SDK reads its credentials from the process's environment, as it would in the demo.
    const saved = {
      AWS_ACCESS_KEY_ID: process.env.AWS_ACCESS_KEY_ID,
      AWS_SECRET_ACCESS_KEY: process.env.AWS_SECRET_ACCESS_KEY,
    };
    Object.assign(process.env, { AWS_ACCESS_KEY_ID: 'test', AWS_SECRET_ACCESS_KEY: 'test' });
    cleanups.push(async () => {
      for (const [name, value] of Object.entries(saved)) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    });
    const app = await demo({ MAIL_TRANSPORT: 'ses', AWS_REGION: 'eu-west-1', SES_ENDPOINT: front.endpoint });
    const messageId = await placeOrder(app);
    expect((await front.stored()).map((email) => email.messageId)).toEqual([messageId]);
  });

  it('postmark', async () => {
    const api = await new PostmarkTestApi().start();
    cleanups.push(() => api.close());
    const app = await demo({
      MAIL_TRANSPORT: 'postmark',
      POSTMARK_SERVER_TOKEN: 'server-token',
      POSTMARK_API_URL: `http://${api.host}`,
    });
    const messageId = await placeOrder(app);
    expect(api.messages.map((message) => message.messageId)).toEqual([messageId]);
  });

  it('resend', async () => {
    const api = await new ResendTestApi().start();
    cleanups.push(() => api.close());
    const app = await demo({ MAIL_TRANSPORT: 'resend', RESEND_API_KEY: 're_test', RESEND_BASE_URL: api.url });
    const messageId = await placeOrder(app);
    expect(api.messages.map((message) => message.messageId)).toEqual([messageId]);
  });
});
