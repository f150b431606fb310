import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { EntityManager } from '@mikro-orm/postgresql';
import { MailOutboxService } from '@reliable-mail/nestjs';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';
import { createTestApp, migrate, testMailOptions, waitFor } from './support/test-app.js';
import { SmtpTestServer } from './support/smtp-test-server.js';

describe('enqueue inside the business transaction', () => {
  let database: TestDatabase;
  let smtp: SmtpTestServer;
  let app: Awaited<ReturnType<typeof createTestApp>>;
  let outbox: MailOutboxService;
  let em: EntityManager;

  beforeAll(async () => {
    database = await createTestDatabase();
    await migrate(database.url);
    smtp = new SmtpTestServer();
    await smtp.listen();
    app = await createTestApp(database.url, testMailOptions(smtp.url));
    outbox = app.get(MailOutboxService);
    em = app.get(EntityManager);
    await em.execute('create table orders (id serial primary key, customer text not null)');
  });

  afterAll(async () => {
    await app?.close();
    await smtp?.close();
    await database?.drop();
  });

  it('writes no row and sends no mail when the business transaction rolls back', async () => {
    await expect(
      em.transactional(async () => {
        await em.execute(`insert into orders (customer) values ('rollback@example.com')`);
        await outbox.enqueue({ to: 'rollback@example.com', subject: 'Order', text: 'Thanks' });
        throw new Error('payment declined');
      }),
    ).rejects.toThrow('payment declined');

    const [{ count }] = await em.execute(`select count(*)::int as count from mail_outbox`);
    expect(count).toBe(0);
    const [{ orders }] = await em.execute(`select count(*)::int as orders from orders`);
    expect(orders).toBe(0);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(smtp.received).toHaveLength(0);
  });

  it('writes one row, sends one mail and emits EmailSentEvent once when it commits', async () => {
    const result = await em.transactional(async () => {
      await em.execute(`insert into orders (customer) values ('commit@example.com')`);
      return outbox.enqueue(
        { to: 'Ann <commit@example.com>', subject: 'Order 1', text: 'Thanks', html: '<p>Thanks</p>' },
        { metadata: { source: 'orders', correlationId: 'c-1' } },
      );
    });
    expect(result).toMatchObject({ status: 'pending', created: true });
    expect(result.messageId).toBe(`<${result.id}@test.example.com>`);

    await waitFor('EmailSentEvent', () => app.events.sent.length === 1);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(app.events.sent).toHaveLength(1);
    expect(smtp.received).toHaveLength(1);
    expect(smtp.received[0].messageId).toBe(result.messageId);
    expect(smtp.received[0].recipients).toEqual(['commit@example.com']);

    const event = app.events.sent[0];
    expect(event).toMatchObject({
      id: result.id,
      messageId: result.messageId,
      accepted: ['commit@example.com'],
      rejected: [],
      attempt: 1,
      metadata: { source: 'orders', correlationId: 'c-1' },
    });
    expect(event.sentAt).toBeInstanceOf(Date);
    expect(event.reply).toMatch(/^250/);

    const row = await outbox.get(result.id);
    expect(row).toMatchObject({ status: 'sent', attempts: 1, lockedUntil: null, providerReply: event.reply });
    expect(row.sentAt?.getTime()).toBe(event.sentAt.getTime());
    expect(row.attemptLog).toHaveLength(1);
    expect(row.attemptLog[0]).toMatchObject({ attempt: 1, outcome: 'sent', replyCode: 250 });
    const [{ pendingEvents }] = await em.execute(`select count(*)::int as "pendingEvents" from mail_outbox_event`);
    expect(pendingEvents).toBe(0);
  });

  it('joins the transaction of an explicit EntityManager passed as options.em', async () => {
    const fork = em.fork();
    await fork.begin();
    const result = await outbox.enqueue({ to: 'explicit@example.com', subject: 'Hi', text: 'x' }, { em: fork });
    const [{ visible }] = await em
      .fork()
      .execute(`select count(*)::int as visible from mail_outbox where id = ?`, [result.id]);
    expect(visible).toBe(0);
    await fork.rollback();
    await expect(outbox.get(result.id)).rejects.toThrow('No outbox row');
  });
});
