import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { EntityManager } from '@mikro-orm/postgresql';
import {
  type ContentMail,
  type EnqueueManyOptions,
  MailOutboxService,
  MailValidationError,
} from '@reliable-mail/nestjs';
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
    expect(app.events.repeated).toBe(0);
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

  // Each of these reached PostgreSQL, whose error ("timestamp out of range", an Invalid Date, jsonb refusing NUL or
  // half a character) aborted the caller's transaction; a year past 9999 or before 1 only in enqueueMany's JSON.
  it.each<{ name: string; options?: EnqueueManyOptions; mail?: Partial<ContentMail>; field: string }>([
    { name: 'sendAt before 4713 BC', options: { sendAt: new Date(-8.64e15) }, field: 'sendAt' },
    { name: 'sendAt in year 0', options: { sendAt: new Date('0000-06-01T00:00:00Z') }, field: 'sendAt' },
    { name: 'sendAt past the year 9999', options: { sendAt: new Date('+020000-01-01T00:00:00Z') }, field: 'sendAt' },
    { name: 'expiresAt past the year 9999', options: { expiresAt: new Date(8.64e15) }, field: 'expiresAt' },
    { name: 'delayMs: 1e16, an Invalid Date', options: { delayMs: 1e16 }, field: 'delayMs' },
    { name: 'delayMs past the year 9999', options: { delayMs: 2.6e14 }, field: 'delayMs' },
    { name: 'ttlMs: Number.MAX_VALUE', options: { ttlMs: Number.MAX_VALUE }, field: 'ttlMs' },
    { name: 'ttlMs past the year 9999', options: { ttlMs: 2.6e14 }, field: 'ttlMs' },
    { name: 'NUL in an address', mail: { to: 'ann\0@example.com' }, field: 'to' },
    {
      name: 'half a character in a display name',
      mail: { to: { name: 'Ann \uD83D', address: 'ann@example.com' } },
      field: 'to',
    },
    {
      name: 'half a character in a file name',
      mail: { attachments: [{ filename: 'r\uDE00.pdf', contentType: 'application/pdf', content: 'x' }] },
      field: 'attachments[0].filename',
    },
    {
      name: 'NUL in a Content-ID',
      mail: { attachments: [{ filename: 'a.png', contentType: 'image/png', cid: 'logo\0', content: 'x' }] },
      field: 'attachments[0].cid',
    },
    {
      name: 'half a character in a media type parameter',
      mail: { attachments: [{ filename: 'a.txt', contentType: 'text/plain; name="\uD800"', content: 'x' }] },
      field: 'attachments[0].contentType',
    },
    {
      name: 'metadata nested 1,000 deep',
      options: { metadata: nestedObject(1_000) },
      field: expect.stringMatching(/^metadata(\.a)+$/) as never,
    },
  ])(
    '$name: MailValidationError before any SQL, and the business transaction still commits',
    async ({ name, options = {}, mail = {}, field }) => {
      const order = { to: 'order@example.com', subject: 'Order', text: 'Thanks', ...mail } as ContentMail;
      const [{ rowsBefore }] = await em.execute(`select count(*)::int as "rowsBefore" from mail_outbox`);
      for (const many of [false, true]) {
        await em.transactional(async () => {
          await em.execute(`insert into orders (customer) values (?)`, [name]);
          const write = many
            ? outbox.enqueueMany([{ mail: order }, { mail: { ...order, to: 'other@example.com' } }], options)
            : outbox.enqueue(order, options);
          const error = await write.then(
            () => new Error('the mail was written'),
            (thrown: unknown) => thrown,
          );
          expect(error).toBeInstanceOf(MailValidationError);
          // enqueueMany names a mail's field by its place in the batch; an option is shared by the batch.
          expect(error).toMatchObject({ field: many && Object.keys(mail).length > 0 ? `mails[0].${field}` : field });
          await em.execute(`insert into orders (customer) values (?)`, [`${name}, after the refusal`]);
        });
      }
      const [{ orders }] = await em.execute(`select count(*)::int as orders from orders where customer like ?`, [
        `${name}%`,
      ]);
      expect(orders).toBe(4);
      const [{ rowsAfter }] = await em.execute(`select count(*)::int as "rowsAfter" from mail_outbox`);
      expect(rowsAfter).toBe(rowsBefore);
    },
  );

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

function nestedObject(depth: number): Record<string, unknown> {
  let value: Record<string, unknown> = { a: 1 };
  for (let level = 1; level < depth; level++) value = { a: value };
  return value;
}
