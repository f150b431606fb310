import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it, jest } from '@jest/globals';
import { EntityManager } from '@mikro-orm/postgresql';
import {
  IdempotencyConflictError,
  InvalidOptionsError,
  MailOutboxService,
  MailValidationError,
  OutboxRowNotCancellableError,
  type ReliableMailOptions,
} from '@reliable-mail/nestjs';
import { type WakeUpPlan, WakeUpNotifier } from '../libs/reliable-mail/src/outbox/wake-up.notifier.js';
import { testMailOptions, waitFor } from './support/test-app.js';
import { useTestBed } from './support/test-bed.js';
const mail = { to: 'ann@example.com', subject: 'Your code', text: '123456' };

describe('scheduling, expiry, cancellation, lanes and bulk enqueue', () => {
  const bed = useTestBed();
  const start = bed.start;

  const statusOf = async (em: EntityManager, id: string) =>
    (await em.execute<{ status: string }[]>(`select status from mail_outbox where id = ?`, [id]))[0].status;

  describe('ScheduleModule, needed only where the dispatcher or retention runs', () => {
    it('an instance that only enqueues starts without it; one with the dispatcher (and ScheduleModule) sends the mail', async () => {
      const smtp = await bed.startSmtp();
      const producer = await bed.startApp(testMailOptions(smtp.url, { dispatcher: { enabled: false } }), [], {
        scheduler: false,
      });
      const { id, messageId } = await producer.get(MailOutboxService).enqueue(mail);
      expect((await producer.get(MailOutboxService).get(id)).status).toBe('pending');

      const dispatcher = await bed.startApp(testMailOptions(smtp.url));
      await waitFor('the mail sent', () => dispatcher.events.sent.length === 1);
      expect(smtp.received.map((received) => received.messageId)).toEqual([messageId]);
    });

    it.each<[string, Partial<ReliableMailOptions>, string]>([
      ['the dispatcher', {}, 'dispatcher.enabled'],
      ['retention alone', { dispatcher: { enabled: false }, retention: { enabled: true } }, 'retention.enabled'],
    ])(
      'an instance with %s and without it fails at start with InvalidOptionsError naming the option',
      async (_case, overrides, option) => {
        const start = bed.startApp(testMailOptions(bed.smtpUrl, overrides), [], { scheduler: false });
        await expect(start).rejects.toBeInstanceOf(InvalidOptionsError);
        await expect(start).rejects.toThrow(`"${option}": needs ScheduleModule.forRoot()`);
      },
    );
  });

  describe('scheduling and expiry', () => {
    it('delayMs: the mail reaches the server no earlier than asked', async () => {
      const { outbox, app } = await start();
      const enqueuedAt = Date.now();
      const { messageId } = await outbox.enqueue(mail, { delayMs: 400 });
      await waitFor('the delayed mail', () => app.events.sent.length === 1);
      const [received] = bed.smtp.received;
      expect(received.messageId).toBe(messageId);
      expect(received.receivedAt - enqueuedAt).toBeGreaterThanOrEqual(400);
    });

    it('ttlMs: a mail that cannot go out before it lapses ends as expired, with an event saying so', async () => {
      const { outbox, app } = await start(
        { onData: () => ({ code: 451, text: '4.3.0 Try again later' }) },
        {
          retry: { baseDelayMs: 200, maxDelayMs: 400 },
        },
      );
      const { id } = await outbox.enqueue(mail, { ttlMs: 300 });
      await waitFor('the expiry event', () => app.events.failed.some((event) => event.status === 'expired'), 10_000);
      const row = await outbox.get(id);
      expect(row.status).toBe('expired');
      expect(row.lastError).toMatch(/expired/);
      expect(bed.smtp.received).toHaveLength(0);
    });

    it('a mail whose expiry passed before it was claimed is closed without an SMTP attempt', async () => {
      const smtp = await bed.startSmtp();
      const producer = await bed.startApp(testMailOptions(smtp.url, { dispatcher: { enabled: false } }));
      const { id } = await producer.get(MailOutboxService).enqueue(mail, { ttlMs: 50 });
      await new Promise((resolve) => setTimeout(resolve, 100));
      const dispatcher = await bed.startApp(testMailOptions(smtp.url));
      await waitFor('the expiry event', () => dispatcher.events.failed.length === 1);
      expect(dispatcher.events.failed[0]).toMatchObject({
        id,
        status: 'expired',
        attempt: 0,
        reason: 'expired before it could be sent',
      });
      const row = await producer.get(MailOutboxService).get(id);
      expect(row).toMatchObject({ status: 'expired', attempts: 0, attemptLog: [] });
      expect(bed.smtp.received).toHaveLength(0);
    });

    it.each([
      ['sendAt and delayMs together', { sendAt: new Date(), delayMs: 5 }, 'delayMs'],
      ['an expiry before the send time', { delayMs: 1_000, ttlMs: 500 }, 'expiresAt'],
      ['an unknown lane', { lane: 'urgent' }, 'lane'],
      ['an invalid date', { sendAt: new Date('nope') }, 'sendAt'],
    ])('rejects %s', async (_case, options, field) => {
      const { outbox, em } = await start({}, { dispatcher: { enabled: false } });
      await expect(outbox.enqueue(mail, options)).rejects.toMatchObject({ name: 'MailValidationError', field });
      const [{ count }] = await em.execute(`select count(*)::int as count from mail_outbox`);
      expect(count).toBe(0);
    });
  });

  describe('cancel', () => {
    it('a pending mail is cancelled at once and never sent', async () => {
      const { outbox, em } = await start({}, { dispatcher: { enabled: false } });
      const { id } = await outbox.enqueue(mail, { delayMs: 60_000 });
      await expect(outbox.cancel(id)).resolves.toEqual({ id, status: 'cancelled' });
      await expect(outbox.cancel(id)).resolves.toEqual({ id, status: 'cancelled' });
      expect(await statusOf(em, id)).toBe('cancelled');
    });

    it('a mail being sent finishes its attempt and is then not retried', async () => {
      const { outbox, app, em } = await start({
        onData: () => ({ code: 451, text: '4.3.0 Try again later', delayMs: 300 }),
      });
      const { id } = await outbox.enqueue(mail);
      await waitFor('the send to start', async () => (await statusOf(em, id)) === 'sending');
      await expect(outbox.cancel(id)).resolves.toEqual({ id, status: 'sending' });
      await waitFor('the attempt to settle', () => app.events.failed.length === 1);
      expect(app.events.failed[0]).toMatchObject({
        id,
        status: 'cancelled',
        cause: 'cancelled',
        deferred: [],
        nextAttemptAt: null,
      });
      await new Promise((resolve) => setTimeout(resolve, 200));
      const row = await outbox.get(id);
      expect(row).toMatchObject({ status: 'cancelled', attempts: 1 });
    });

    it('cancelling a sent mail is an error', async () => {
      const { outbox, app } = await start();
      const { id } = await outbox.enqueue(mail);
      await waitFor('the mail to be sent', () => app.events.sent.length === 1);
      await expect(outbox.cancel(id)).rejects.toBeInstanceOf(OutboxRowNotCancellableError);
      await expect(outbox.cancel(id)).rejects.toThrow(`Outbox row ${id} is sent and can no longer be cancelled`);
    });
  });

  describe('lanes', () => {
    it('a critical mail is delivered while most of a bulk backlog is still pending', async () => {
      const { outbox, app } = await start(
        { onData: (message) => (message.recipients[0].startsWith('bulk') ? { acceptAfterMs: 20 } : undefined) },
        { lanes: { critical: { concurrency: 2 }, default: {}, bulk: { concurrency: 2 } } },
      );
      await outbox.enqueueMany(
        Array.from({ length: 1_000 }, (_, index) => ({
          mail: { to: `bulk${index}@example.com`, subject: 'News', text: 'x' },
        })),
        { lane: 'bulk' },
      );
      await waitFor('the bulk lane to be busy', () => bed.smtp.received.length >= 10);
      const { messageId } = await outbox.enqueue(
        { to: 'login@example.com', subject: 'Your code', text: '123456' },
        { lane: 'critical' },
      );
      await waitFor('the critical mail', () => bed.smtp.received.some((message) => message.messageId === messageId));
      const bulkDelivered = bed.smtp.received.filter((message) => message.recipients[0].startsWith('bulk')).length;
      expect(bulkDelivered).toBeLessThan(500);
      await waitFor('its EmailSentEvent', () => app.events.sent.some((event) => event.messageId === messageId));
    });

    it('a dispatcher opens a connection per lane at start: the first login code goes over one, opening none', async () => {
      const smtp = await bed.startSmtp();
      const app = await bed.startApp(testMailOptions(smtp.url, { lanes: { critical: {}, default: {} } }));
      await waitFor('a connection per lane, opened ahead', () => smtp.sessions.length === 2);
      const { messageId } = await app
        .get(MailOutboxService)
        .enqueue({ to: 'login@example.com', subject: 'Your code', text: '123456' }, { lane: 'critical' });
      await waitFor('the login code', () => smtp.received.some((message) => message.messageId === messageId));
      expect(smtp.sessions).toHaveLength(2);
    });

    it('while a critical mail is in hand, a lane of lower priority sends one mail at a time, and all its slots after', async () => {
      let release!: () => void;
      const held = new Promise<void>((resolve) => (release = resolve));
      const isBulk = (message: { recipients: string[] }) => message.recipients[0].startsWith('bulk');
      // Bulk mails at the server, waiting for its answer: how many the bulk lane has in flight.
      let bulkAtServer = 0;
      const { outbox } = await start(
        {
          onData: (message) => {
            if (!isBulk(message)) return { acceptWhen: held };
            bulkAtServer++;
            return { acceptWhen: sleep(100).then(() => bulkAtServer--) };
          },
        },
        { lanes: { critical: { concurrency: 1 }, default: {}, bulk: { concurrency: 4 } } },
      );
      await outbox.enqueueMany(
        Array.from({ length: 1_000 }, (_, index) => ({
          mail: { to: `bulk${index}@example.com`, subject: 'News', text: 'x' },
        })),
        { lane: 'bulk' },
      );
      await waitFor('the bulk lane sending 4 at once', () => bulkAtServer === 4);
      const { messageId } = await outbox.enqueue(
        { to: 'login@example.com', subject: 'Your code', text: '123456' },
        { lane: 'critical' },
      );
      await waitFor('the critical mail at the server', () =>
        bed.smtp.received.some((message) => message.messageId === messageId),
      );
      // The bulk sends under way when the critical mail came finish within 100 ms; from then on, one at a time.
      await sleep(250);
      const whileHeld: number[] = [];
      for (let sample = 0; sample < 15; sample++) {
        whileHeld.push(bulkAtServer);
        await sleep(20);
      }
      expect(Math.max(...whileHeld)).toBe(1);
      release();
      await waitFor('the bulk lane sending 4 at once again', () => bulkAtServer === 4);
    });

    it('"slow down" replies pause the lane instead of burning every message\'s attempts', async () => {
      const throttledUntil = Date.now() + 3_000;
      const { outbox, em } = await start(
        {
          onData: () =>
            Date.now() < throttledUntil ? { code: 421, text: '4.7.0 Rate limit exceeded, slow down' } : undefined,
        },
        { lanes: { default: { concurrency: 2 } }, retry: { baseDelayMs: 10, maxDelayMs: 20 } },
      );
      await outbox.enqueueMany(
        Array.from({ length: 20 }, (_, index) => ({ mail: { ...mail, to: `user${index}@example.com` } })),
      );
      await waitFor('all 20 delivered', () => bed.smtp.received.length === 20, 20_000);
      const [{ failedAttempts }] = await em.execute(
        `select count(*)::int as "failedAttempts" from mail_outbox_attempt where outcome = 'transient'`,
      );
      // Without back-pressure each message would fail every 10-20 ms for 3 s: dozens of attempts, more than one per message.
      expect(failedAttempts).toBeLessThan(20);
    });

    it('an idle dispatcher wakes on the NOTIFY of a committed enqueue, from its own process or another', async () => {
      const { outbox, app, em } = await start({}, { dispatcher: { pollIntervalMs: 600_000 } });
      const producer = await bed.startApp(testMailOptions(bed.smtpUrl, { dispatcher: { enabled: false } }));
      await new Promise((resolve) => setTimeout(resolve, 200));
      await em.transactional(() => outbox.enqueue(mail));
      await waitFor(
        'the mail enqueued in the same process, long before a poll',
        () => app.events.sent.length === 1,
        10_000,
      );
      const producerEm = producer.get(EntityManager);
      await producerEm.transactional(() => producer.get(MailOutboxService).enqueue({ ...mail, to: 'bob@example.com' }));
      await waitFor(
        'the mail enqueued by the other instance, long before a poll',
        () => app.events.sent.length === 2,
        10_000,
      );
    });

    it('enqueues that overlap another open enqueue notify after their commit, and every one of them wakes the dispatcher', async () => {
      const { app } = await start({}, { dispatcher: { pollIntervalMs: 600_000 } });
      const producer = await bed.startApp(testMailOptions(bed.smtpUrl, { dispatcher: { enabled: false } }));
      const outbox = producer.get(MailOutboxService);
      const em = producer.get(EntityManager);
      const plans = jest.spyOn(producer.get(WakeUpNotifier), 'plan');
      const inStatement = () => plans.mock.results.map((result) => (result.value as WakeUpPlan).inStatement);
      await new Promise((resolve) => setTimeout(resolve, 200));

      let commitFirst!: () => void;
      const firstCommitted = em.transactional(async () => {
        await outbox.enqueue({ ...mail, to: 'first@example.com' });
        await new Promise<void>((resolve) => (commitFirst = resolve));
      });
      await waitFor('the first enqueue', () => plans.mock.calls.length === 1);
      await outbox.enqueue({ ...mail, to: 'own-commit@example.com' });
      await em.transactional(() => outbox.enqueue({ ...mail, to: 'callers-commit@example.com' }));
      await waitFor('both overlapping mails, long before a poll', () => app.events.sent.length === 2, 10_000);
      expect(bed.smtp.received.map((received) => received.recipients).sort()).toEqual([
        ['callers-commit@example.com'],
        ['own-commit@example.com'],
      ]);

      commitFirst();
      await firstCommitted;
      await waitFor('the first mail, at its commit', () => app.events.sent.length === 3, 10_000);
      await expect(
        em.transactional(async () => {
          await outbox.enqueue({ ...mail, to: 'rolled-back@example.com' });
          throw new Error('rolled back');
        }),
      ).rejects.toThrow('rolled back');
      await outbox.enqueue({ ...mail, to: 'alone-again@example.com' });
      await waitFor('the last mail', () => app.events.sent.length === 4, 10_000);
      // Once no enqueue is open the next one notifies in its own statement again: nothing was left counted as open.
      expect(inStatement()).toEqual([true, false, false, true, true]);
    });
  });

  describe('enqueueMany', () => {
    const batch = (count: number, prefix = 'user') =>
      Array.from({ length: count }, (_, index) => ({
        mail: { ...mail, to: `${prefix}${index}@example.com` },
        idempotencyKey: `${prefix}-${index}`,
      }));

    it("joins the caller's transaction: a rollback leaves nothing, a commit writes every row", async () => {
      const { outbox, em } = await start({}, { dispatcher: { enabled: false } });
      await expect(
        em.transactional(async () => {
          await outbox.enqueueMany(batch(500));
          throw new Error('rolled back');
        }),
      ).rejects.toThrow('rolled back');
      let [{ count }] = await em.execute(`select count(*)::int as count from mail_outbox`);
      expect(count).toBe(0);

      const results = await em.transactional(() => outbox.enqueueMany(batch(500)));
      expect(results).toHaveLength(500);
      expect(results.every((result) => result.created && result.status === 'pending')).toBe(true);
      [{ count }] = await em.execute(`select count(*)::int as count from mail_outbox`);
      expect(count).toBe(500);
    });

    it('applies the idempotency rules of enqueue, and a conflict keeps nothing of the batch', async () => {
      const { outbox, em } = await start({}, { dispatcher: { enabled: false } });
      const first = await outbox.enqueueMany(batch(3));
      const again = await outbox.enqueueMany([...batch(3), ...batch(2, 'new')]);
      expect(again.slice(0, 3)).toEqual(first.map((result) => ({ ...result, created: false })));
      expect(again.slice(3).every((result) => result.created)).toBe(true);

      const conflicting = [...batch(2, 'other'), { mail: { ...mail, subject: 'Changed' }, idempotencyKey: 'user-0' }];
      await expect(outbox.enqueueMany(conflicting)).rejects.toBeInstanceOf(IdempotencyConflictError);
      const [{ count }] = await em.execute(`select count(*)::int as count from mail_outbox`);
      expect(count).toBe(5);
    });

    it('validates every mail before writing any', async () => {
      const { outbox, em } = await start({}, { dispatcher: { enabled: false } });
      const mails = batch(5);
      mails[3] = { mail: { ...mail, to: 'not-an-address' }, idempotencyKey: 'bad' };
      const attempt = outbox.enqueueMany(mails);
      await expect(attempt).rejects.toBeInstanceOf(MailValidationError);
      await expect(attempt).rejects.toMatchObject({ field: 'mails[3].to' });
      const [{ count }] = await em.execute(`select count(*)::int as count from mail_outbox`);
      expect(count).toBe(0);
    });
  });
});
