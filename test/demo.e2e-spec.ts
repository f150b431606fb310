import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { INestApplication } from '@nestjs/common';
import type { AddressInfo } from 'node:net';
import { createDemoApp } from '../apps/demo/src/app.module.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';
import { waitFor } from './support/test-app.js';
import { SmtpTestServer } from './support/smtp-test-server.js';

describe('the demo shop over HTTP', () => {
  let database: TestDatabase;
  let smtp: SmtpTestServer;
  let app: INestApplication;
  let baseUrl: string;

  const post = (path: string, body: unknown) =>
    fetch(`${baseUrl}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  const getJson = async (path: string) => {
    const response = await fetch(`${baseUrl}${path}`);
    return { status: response.status, body: (await response.json()) as Record<string, any> };
  };

  beforeAll(async () => {
    database = await createTestDatabase();
    smtp = new SmtpTestServer();
    await smtp.listen();
    app = await createDemoApp({ databaseUrl: database.url, smtpUrl: smtp.url, logger: false });
    await app.listen(0, '127.0.0.1');
    baseUrl = `http://127.0.0.1:${(app.getHttpServer().address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    await app?.close();
    await smtp?.close();
    await database?.drop();
  });

  it('an order stores the order and its confirmation mail in one transaction; the mail is sent and audited', async () => {
    const response = await post('/orders', { email: 'ann@example.com', items: [{ sku: 'mug', qty: 2, price: 12.5 }] });
    expect(response.status).toBe(201);
    const { orderId, mail } = (await response.json()) as { orderId: number; mail: { id: string; messageId: string } };

    await waitFor('the confirmation mail', () => smtp.received.some((message) => message.messageId === mail.messageId));
    const raw = smtp.received.find((message) => message.messageId === mail.messageId)!.raw;
    // Rendered from the order-confirmation template at send time.
    expect(raw).toContain(`Subject: Your order #${orderId} is confirmed`);
    expect(raw).toContain('2 x mug @ 12.50');
    await waitFor('the row to be sent', async () => (await getJson(`/outbox/${mail.id}`)).body.status === 'sent');
    const row = (await getJson(`/outbox/${mail.id}`)).body;
    expect(row).toMatchObject({
      idempotencyKey: `order-confirmation:${orderId}`,
      lane: 'default',
      metadata: { source: 'orders', orderId },
    });
    await waitFor('the audit entry', async () => ((await getJson('/events')).body as unknown as unknown[]).length > 0);
    expect((await getJson('/events')).body).toEqual([
      expect.objectContaining({ type: 'sent', event: expect.objectContaining({ id: mail.id }) }),
    ]);
  });

  it('a bad address is refused with 400 and leaves no order behind', async () => {
    const response = await post('/orders', { email: 'not-an-address', items: [{ sku: 'mug', qty: 1, price: 1 }] });
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({ error: 'MailValidationError', field: 'to' });
    expect((await getJson('/orders/2')).status).toBe(404);
  });

  it('a password reset goes through the critical lane with an expiry', async () => {
    const response = await post('/password-reset', { email: 'bob@example.com' });
    expect(response.status).toBe(202);
    const { mail } = (await response.json()) as { mail: { id: string; messageId: string } };
    await waitFor('the reset mail', () => smtp.received.some((message) => message.messageId === mail.messageId));
    const row = (await getJson(`/outbox/${mail.id}`)).body;
    expect(row.lane).toBe('critical');
    expect(new Date(row.expiresAt).getTime() - new Date(row.createdAt).getTime()).toBeGreaterThan(14 * 60_000);
  });

  it('GET /health and GET /outbox report the outbox', async () => {
    await waitFor('both mails settled', async () => (await getJson('/outbox')).body.stats.backlog === 0);
    const health = await getJson('/health');
    expect(health.status).toBe(200);
    expect(health.body).toMatchObject({
      status: 'ok',
      info: { database: { status: 'up' }, mail: { status: 'up', backlog: { count: 0 } } },
    });
    const outbox = (await getJson('/outbox')).body;
    expect(outbox.stats.counts).toEqual(
      expect.arrayContaining([
        { status: 'sent', lane: 'default', count: 1 },
        { status: 'sent', lane: 'critical', count: 1 },
      ]),
    );
    expect(outbox.recent).toHaveLength(2);
  });
});
