import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { EntityManager } from '@mikro-orm/postgresql';
import {
  IdempotencyConflictError,
  InvalidOptionsError,
  MailOutboxAdmin,
  MailOutboxService,
  MailValidationError,
  type OutgoingMail,
  type ReliableMailOptions,
} from '@reliable-mail/nestjs';
import { OutboxDatabase } from '../libs/reliable-mail/src/database/outbox-database.js';
import { claimRows } from '../libs/reliable-mail/src/outbox/sql/claim.js';
import { releaseRows } from '../libs/reliable-mail/src/outbox/sql/release.js';
import { releaseUnansweredClaims } from '../libs/reliable-mail/src/outbox/sql/release-unanswered.js';
import { settleInputOf, settleRows } from '../libs/reliable-mail/src/outbox/sql/settle.js';
import { settlementFor } from '../libs/reliable-mail/src/dispatch/settlement.js';
import { everyRecipient } from './support/send-outcomes.js';
import { resolveOptions } from '../libs/reliable-mail/src/options/resolve-options.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';
import { createTestApp, migrate, testMailOptions } from './support/test-app.js';

const { retry: retryPolicy } = resolveOptions(testMailOptions('smtp://127.0.0.1:1'), 'test', 1);
const mail: OutgoingMail = { to: 'ann@example.com', subject: 'Your order', text: 'Thanks' };

describe('the outbox API without a dispatcher', () => {
  let database: TestDatabase;
  let app: Awaited<ReturnType<typeof createTestApp>>;
  let outbox: MailOutboxService;
  let em: EntityManager;

  const rowCount = async () =>
    (await em.execute<{ count: number }[]>(`select count(*)::int as count from mail_outbox`))[0].count;

  beforeAll(async () => {
    database = await createTestDatabase();
    await migrate(database.url);
    app = await createTestApp(database.url, testMailOptions('smtp://127.0.0.1:1', { dispatcher: { enabled: false } }));
    outbox = app.get(MailOutboxService);
    em = app.get(EntityManager);
  });

  beforeEach(async () => {
    await em.execute('delete from mail_outbox');
  });

  afterAll(async () => {
    await app?.close();
    await database?.drop();
  });

  describe('idempotency', () => {
    it('the same key with the same content returns the existing row and inserts nothing', async () => {
      const first = await outbox.enqueue(mail, { idempotencyKey: 'order-1' });
      const second = await outbox.enqueue({ ...mail }, { idempotencyKey: 'order-1', metadata: { retry: true } });
      expect(first.created).toBe(true);
      expect(second).toEqual({ ...first, created: false });
      expect(await rowCount()).toBe(1);
    });

    it('the same key with different content throws IdempotencyConflictError and changes nothing', async () => {
      const first = await outbox.enqueue(mail, { idempotencyKey: 'order-2' });
      const attempt = outbox.enqueue({ ...mail, subject: 'Another subject' }, { idempotencyKey: 'order-2' });
      await expect(attempt).rejects.toBeInstanceOf(IdempotencyConflictError);
      await expect(attempt).rejects.toMatchObject({ idempotencyKey: 'order-2', existingId: first.id });
      expect(await rowCount()).toBe(1);
      expect((await outbox.get(first.id)).payload.subject).toBe('Your order');
    });

    it('concurrent enqueues with one key, each in its own transaction, insert one row', async () => {
      const results = await Promise.all(
        Array.from({ length: 10 }, () =>
          em.fork().transactional(async (tx) => {
            const result = await outbox.enqueue(mail, { idempotencyKey: 'order-3', em: tx });
            await tx.execute('select pg_sleep(0.05)');
            return result;
          }),
        ),
      );
      expect(new Set(results.map((result) => result.id)).size).toBe(1);
      expect(results.filter((result) => result.created)).toHaveLength(1);
      expect(await rowCount()).toBe(1);
    });
  });

  describe('bad input gives a typed error and writes nothing', () => {
    it.each<[string, OutgoingMail, string]>([
      ['an invalid address', { ...mail, to: 'not-an-address' }, 'to'],
      ['an invalid address in a list', { ...mail, to: ['ann@example.com', 'bob@'] }, 'to[1]'],
      ['no recipient', { subject: 'x', text: 'y' }, 'to'],
      ['no subject', { to: 'ann@example.com', text: 'y' } as OutgoingMail, 'subject'],
      ['no body', { to: 'ann@example.com', subject: 'x' }, 'text'],
      [
        'a header with a line break',
        { ...mail, headers: { 'X-Order': '1\r\nBcc: eve@example.com' } },
        'headers.X-Order',
      ],
      ['a Message-ID header', { ...mail, headers: { 'Message-ID': '<mine@example.com>' } }, 'headers.Message-ID'],
    ])('%s', async (_case, badMail, field) => {
      const attempt = outbox.enqueue(badMail);
      await expect(attempt).rejects.toBeInstanceOf(MailValidationError);
      await expect(attempt).rejects.toMatchObject({ field });
      expect(await rowCount()).toBe(0);
    });

    it('an empty idempotency key', async () => {
      await expect(outbox.enqueue(mail, { idempotencyKey: '' })).rejects.toMatchObject({ field: 'idempotencyKey' });
      expect(await rowCount()).toBe(0);
    });

    it.each<[string, Parameters<MailOutboxService['enqueue']>[1], string]>([
      ['a NUL in the idempotency key', { idempotencyKey: 'order\u00001' }, 'idempotencyKey'],
      ['a lone surrogate in the idempotency key', { idempotencyKey: 'order-\ud800' }, 'idempotencyKey'],
      ['a NUL in metadata', { metadata: { note: 'a\u0000b' } }, 'metadata.note'],
      ['a lone surrogate in a metadata key', { metadata: { ['\udc00']: 1 } }, 'metadata key "\\udc00"'],
      ['a function in metadata', { metadata: { callback: () => 1 } }, 'metadata.callback'],
    ])("%s: refused, and the caller's transaction goes on and commits", async (_case, options, field) => {
      await em.transactional(async (tx) => {
        await expect(outbox.enqueue(mail, options)).rejects.toMatchObject({ field });
        // PostgreSQL never saw the value, so the transaction is not aborted: its next statement works.
        await outbox.enqueue(mail, { em: tx });
      });
      expect(await rowCount()).toBe(1);
    });
  });

  it.each<[string, Partial<ReliableMailOptions>, string]>([
    ['a transport that is not an SMTP URL', { transport: 'http://mail.example.com' }, 'transport'],
    ['a sender without an address', { from: 'shop' }, 'from'],
    ['a Message-ID domain with a space', { messageIdDomain: 'bad domain' }, 'messageIdDomain'],
    ['a batch size of 0', { dispatcher: { batchSize: 0 } }, 'dispatcher.batchSize'],
    ['a lease shorter than the SMTP timeouts', { dispatcher: { leaseMs: 1_000 } }, 'dispatcher.leaseMs'],
    ['a negative attempt limit', { retry: { maxAttempts: -1 } }, 'retry.maxAttempts'],
  ])('bad options fail at start-up naming the option: %s', async (_case, overrides, option) => {
    const start = createTestApp(database.url, testMailOptions('smtp://127.0.0.1:1', overrides));
    await expect(start).rejects.toBeInstanceOf(InvalidOptionsError);
    await expect(createTestApp(database.url, testMailOptions('smtp://127.0.0.1:1', overrides))).rejects.toThrow(
      `"${option}"`,
    );
  });

  it('a settle with a stale lock token changes nothing', async () => {
    const database = app.get(OutboxDatabase);
    const { id } = await outbox.enqueue(mail);
    const [stale] = await claimRows(database, {
      lane: 'default',
      limit: 1,
      leaseMs: 1,
      maxAgeMs: 86_400_000,
      workerId: 'worker-a',
      lockToken: randomUUID(),
    });
    await new Promise((resolve) => setTimeout(resolve, 20));
    const [fresh] = await claimRows(database, {
      lane: 'default',
      limit: 1,
      leaseMs: 60_000,
      maxAgeMs: 86_400_000,
      workerId: 'worker-b',
      lockToken: randomUUID(),
    });
    expect(fresh.id).toBe(id);

    const sent = everyRecipient(['ann@example.com'], 'accepted', '250 OK', 250);
    const staleResult = await settleRows(
      database,
      [settleInputOf(settlementFor(stale, sent, retryPolicy, new Date(), 5))],
      1_000,
    );
    expect(staleResult.size).toBe(0);
    let row = await outbox.get(id);
    expect(row).toMatchObject({ status: 'sending', lockedBy: 'worker-b', attempts: 2, sentAt: null });
    const [{ events }] = await em.execute(`select count(*)::int as events from mail_outbox_event`);
    expect(events).toBe(0);
    // The stale worker's attempt stays as the claim that took the row over marked it: the second send was made
    // because its outcome was unknown, and a late write must not make both attempts `sent`.
    expect(row.attemptLog.map((attempt) => [attempt.workerId, attempt.outcome])).toEqual([
      ['worker-a', 'unknown'],
      ['worker-b', 'started'],
    ]);

    const freshResult = await settleRows(
      database,
      [settleInputOf(settlementFor(fresh, sent, retryPolicy, new Date(), 5))],
      1_000,
    );
    expect([...freshResult.keys()]).toEqual([`${id}/${fresh.lockToken}`]);
    row = await outbox.get(id);
    expect(row).toMatchObject({ status: 'sent', lockedBy: null, attempts: 2 });
  });

  it('a row whose lease keeps running out is closed as dead once no attempt is left, without another send', async () => {
    const database = app.get(OutboxDatabase);
    const { id } = await outbox.enqueue(mail);
    await em.execute(`update mail_outbox set max_attempts = 1 where id = ?`, [id]);
    const [first] = await claimRows(database, {
      lane: 'default',
      limit: 1,
      leaseMs: 1,
      maxAgeMs: 86_400_000,
      workerId: 'worker-a',
      lockToken: randomUUID(),
    });
    expect(first).toMatchObject({ id, skipReason: null });
    await new Promise((resolve) => setTimeout(resolve, 20));
    const [again] = await claimRows(database, {
      lane: 'default',
      limit: 1,
      leaseMs: 60_000,
      maxAgeMs: 86_400_000,
      workerId: 'worker-b',
      lockToken: randomUUID(),
    });
    expect(again).toMatchObject({ id, skipReason: 'dead', attemptId: null });
    const row = await outbox.get(id);
    expect(row.attemptLog.map((attempt) => attempt.outcome)).toEqual(['unknown']);
  });

  it.each([
    { handBack: 'released unstarted (claimed ahead, then shutdown)', release: 'rows' },
    { handBack: 'handed back as the rows of a claim whose answer was lost', release: 'unanswered' },
  ])(
    'a reclaimed row with no attempt left, $handBack, is closed as dead at its next claim, not sent once more',
    async ({ release }) => {
      const database = app.get(OutboxDatabase);
      const { id } = await outbox.enqueue(mail);
      await em.execute(`update mail_outbox set max_attempts = 1 where id = ?`, [id]);
      const claim = (leaseMs: number) =>
        claimRows(database, {
          lane: 'default',
          limit: 1,
          leaseMs,
          maxAgeMs: 86_400_000,
          workerId: 'worker-a',
          lockToken: randomUUID(),
        });
      await claim(1);
      await new Promise((resolve) => setTimeout(resolve, 20));
      // Its worker died: the claim that takes it over finds no attempt left, and the row is given back unsent.
      const [reclaimed] = await claim(60_000);
      expect(reclaimed).toMatchObject({ id, skipReason: 'dead' });
      if (release === 'rows') await releaseRows(database, [reclaimed]);
      else await releaseUnansweredClaims(database, 'default', [reclaimed.lockToken]);
      expect(await outbox.get(id)).toMatchObject({ status: 'pending', attempts: 1 });

      const [next] = await claim(60_000);
      expect(next).toMatchObject({ id, skipReason: 'dead', attemptId: null });
    },
  );

  it('a claim names the recipients an earlier attempt may have reached: unknown ones, or all when it recorded none', async () => {
    const database = app.get(OutboxDatabase);
    const { id } = await outbox.enqueue({ ...mail, cc: ['bob@example.com', 'carl@example.com'] });
    const claim = (leaseMs: number) =>
      claimRows(database, {
        lane: 'default',
        limit: 1,
        leaseMs,
        maxAgeMs: 86_400_000,
        workerId: 'worker-a',
        lockToken: randomUUID(),
      });
    const [first] = await claim(60_000);
    expect(first.possiblyTakenBefore).toEqual([]);
    const outcome = everyRecipient(['ann@example.com', 'bob@example.com', 'carl@example.com'], 'deferred', '451', 451);
    if (outcome.kind !== 'attempted') throw new Error('unreachable');
    outcome.recipients[0] = { ...outcome.recipients[0], status: 'accepted', reply: '250 OK' };
    outcome.recipients[1] = { ...outcome.recipients[1], status: 'unknown', replyCode: null, reply: 'no answer' };
    await settleRows(database, [settleInputOf(settlementFor(first, outcome, retryPolicy, new Date(), 5))], 1_000);
    await em.execute(`update mail_outbox set next_attempt_at = now() where id = ?`, [id]);

    const [retry] = await claim(1);
    expect(retry.possiblyTakenBefore).toEqual(['bob@example.com']);
    // Its worker dies mid-send: the attempt it leaves recorded nobody, so any recipient may have it.
    await new Promise((resolve) => setTimeout(resolve, 20));
    const [reclaimed] = await claim(60_000);
    expect([...reclaimed.possiblyTakenBefore].sort()).toEqual([
      'ann@example.com',
      'bob@example.com',
      'carl@example.com',
    ]);

    // Requeued, its attempts start from zero: the earlier ones still count.
    await em.execute(`update mail_outbox set status = 'dead', lock_token = null, locked_until = null where id = ?`, [
      id,
    ]);
    await app.get(MailOutboxAdmin).requeue({ ids: [id] }, 'relay fixed');
    const [requeued] = await claim(60_000);
    expect(requeued.attempts).toBe(1);
    expect(requeued.possiblyTakenBefore).toHaveLength(3);
  });

  it('a requeued row counts its age from the requeue', async () => {
    const database = app.get(OutboxDatabase);
    const { id } = await outbox.enqueue(mail);
    await em.execute(`update mail_outbox set status = 'dead', created_at = now() - interval '2 days' where id = ?`, [
      id,
    ]);
    await app.get(MailOutboxAdmin).requeue({ ids: [id] }, 'relay fixed');
    const [claimed] = await claimRows(database, {
      lane: 'default',
      limit: 1,
      leaseMs: 60_000,
      maxAgeMs: 86_400_000,
      workerId: 'worker-a',
      lockToken: randomUUID(),
    });
    expect(Date.now() - claimed.ageFrom.getTime()).toBeLessThan(60_000);
  });
});
