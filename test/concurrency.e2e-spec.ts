import { describe, expect, it } from '@jest/globals';
import { EntityManager } from '@mikro-orm/postgresql';
import { MailOutboxService, type SmtpTransportOptions } from '@reliable-mail/nestjs';
import { spawnDispatcherProcess, testMailOptions, waitFor } from './support/test-app.js';
import { useTestBed } from './support/test-bed.js';

describe('several dispatchers on one outbox', () => {
  const bed = useTestBed();

  async function enqueueMany(outbox: MailOutboxService, count: number): Promise<string[]> {
    const ids: string[] = [];
    for (let start = 0; start < count; start += 100) {
      const batch = Array.from({ length: Math.min(100, count - start) }, (_, index) =>
        outbox.enqueue({
          to: `customer${start + index}@example.com`,
          subject: `Order ${start + index}`,
          text: 'Thanks',
        }),
      );
      ids.push(...(await Promise.all(batch)).map((result) => result.messageId));
    }
    return ids;
  }

  it('two app instances drain 2,000 emails together and every Message-ID reaches the server exactly once', async () => {
    const smtp = await bed.startSmtp();
    const options = testMailOptions(smtp.url, { dispatcher: { batchSize: 20, concurrency: 8 } });
    const producer = await bed.startApp({ ...options, dispatcher: { ...options.dispatcher, enabled: false } });
    const messageIds = await enqueueMany(producer.get(MailOutboxService), 2_000);

    const instances = [await bed.startApp(options), await bed.startApp(options)];
    await waitFor('2,000 deliveries', () => smtp.received.length >= 2_000, 60_000);
    // Events go out at least once: one whose confirmation outlasts its 1 s lease on a loaded machine comes again,
    // from either instance (a CI run counted past 2,000 and never saw exactly 2,000). Every mail's, counted once.
    const mailsWithSentEvent = () => new Set(instances.flatMap((instance) => instance.events.sent.map((e) => e.id)));
    await waitFor('a sent event for each of the 2,000 mails', () => mailsWithSentEvent().size === 2_000, 30_000);
    await new Promise((resolve) => setTimeout(resolve, 500));

    const copies = smtp.copiesByMessageId();
    expect(smtp.received).toHaveLength(2_000);
    expect([...copies.values()].every((count) => count === 1)).toBe(true);
    expect(new Set(copies.keys())).toEqual(new Set(messageIds));
    // One sent event recorded per mail: a redelivery repeats its eventId, a second settle would record another.
    const sentEventIds = new Set(instances.flatMap((instance) => instance.events.sent.map((e) => e.eventId)));
    expect(sentEventIds.size).toBe(2_000);
    // Both instances did part of the work.
    expect(instances[0].events.sent.length).toBeGreaterThan(0);
    expect(instances[1].events.sent.length).toBeGreaterThan(0);
    const [{ unsent }] = await producer
      .get(EntityManager)
      .execute(`select count(*)::int as unsent from mail_outbox where status <> 'sent'`);
    expect(unsent).toBe(0);
  });

  it('a dispatcher killed with SIGKILL mid-batch loses nothing; a duplicate only follows an attempt recorded as unknown', async () => {
    // Each message takes a while to be accepted, so the kill lands with sends in flight.
    const smtp = await bed.startSmtp({ onData: () => ({ acceptAfterMs: 30 }) });
    // The shortest lease the options allow with the tests' send and statement timeouts (5 + 4 + 5 + 1 s): the
    // successor waits this long for the rows in flight.
    const dispatcher = { concurrency: 8, batchSize: 8, leaseMs: 15_000 };
    const producer = await bed.startApp(testMailOptions(smtp.url, { dispatcher: { enabled: false } }));
    const messageIds = await enqueueMany(producer.get(MailOutboxService), 300);

    const { child } = await spawnDispatcherProcess({
      databaseUrl: bed.databaseUrl,
      smtpUrl: smtp.url,
      options: { dispatcher },
    });
    await waitFor('the first process to deliver 100', () => smtp.received.length >= 100, 60_000);
    child.kill('SIGKILL');
    await new Promise((resolve) => child.once('exit', resolve));
    const deliveredBeforeKill = smtp.received.length;

    await bed.startApp(testMailOptions(smtp.url, { dispatcher }));
    const em = producer.get(EntityManager);
    await waitFor(
      'every row sent',
      async () => {
        const [{ unsent }] = await em.execute(`select count(*)::int as unsent from mail_outbox where status <> 'sent'`);
        return unsent === 0;
      },
      60_000,
    );

    const copies = smtp.copiesByMessageId();
    expect(new Set(copies.keys())).toEqual(new Set(messageIds));
    const duplicated = [...copies].filter(([, count]) => count > 1).map(([messageId]) => messageId);
    const attempts = await em.execute<{ message_id: string; outcomes: string[] }[]>(
      `select o.message_id, array_agg(a.outcome order by a.attempt) as outcomes
       from mail_outbox o join mail_outbox_attempt a on a.outbox_id = o.id group by o.message_id`,
    );
    const outcomesByMessageId = new Map(attempts.map((row) => [row.message_id, row.outcomes]));
    for (const messageId of duplicated) {
      expect(outcomesByMessageId.get(messageId)).toEqual(['unknown', 'sent']);
    }
    // The rows the killed process had in flight were recovered after their lease and recorded as unknown.
    const recovered = [...outcomesByMessageId.values()].filter((outcomes) => outcomes[0] === 'unknown');
    expect(recovered.length).toBeGreaterThan(0);
    expect(duplicated.length).toBeLessThanOrEqual(recovered.length);
    expect(deliveredBeforeKill).toBeLessThan(300);
  });

  it('shutdown lets the send in flight finish and settle, and hands back the rows claimed ahead untouched', async () => {
    const smtp = await bed.startSmtp({ onData: () => ({ acceptAfterMs: 500 }) });
    const app = await bed.startApp(testMailOptions(smtp.url, { lanes: { default: { concurrency: 1 } } }));
    const outbox = app.get(MailOutboxService);
    const first = await outbox.enqueue({ to: 'ann@example.com', subject: 'Hi', text: 'x' });
    const second = await outbox.enqueue({ to: 'bob@example.com', subject: 'Hi', text: 'x' });
    const em = app.get(EntityManager).fork();
    const statuses = async () =>
      (await em.execute<{ status: string }[]>(`select status from mail_outbox order by id`)).map((row) => row.status);
    // One slot: the first is being sent while the second waits, claimed ahead.
    await waitFor('both rows claimed', async () => (await statuses()).join() === 'sending,sending');

    await app.close();
    const admin = (await bed.startApp(testMailOptions(smtp.url, { dispatcher: { enabled: false } }))).get(
      MailOutboxService,
    );
    expect(await admin.get(first.id)).toMatchObject({ status: 'sent', attempts: 1 });
    expect(await admin.get(second.id)).toMatchObject({
      status: 'pending',
      attempts: 0,
      lockedBy: null,
      attemptLog: [],
    });
    expect(app.events.sent.map((event) => event.id)).toEqual([first.id]);
    expect(smtp.received).toHaveLength(1);
  });

  it('shutdown during a send in several SMTP transactions: no further one, what went out is settled, the next instance sends the rest', async () => {
    // Three transactions of two recipients, 0.7 s each: longer than the 1 s the shutdown waits.
    const smtp = await bed.startSmtp({ onData: () => ({ acceptAfterMs: 700 }) });
    const base = testMailOptions(smtp.url, { dispatcher: { shutdownTimeoutMs: 1_000 } });
    const options = {
      ...base,
      transport: { ...(base.transport as SmtpTransportOptions), maxRecipientsPerTransaction: 2 },
    };
    const app = await bed.startApp(options);
    const to = ['ann', 'bob', 'eve', 'joe', 'kim', 'lou'].map((name) => `${name}@example.com`);
    const { id, messageId } = await app.get(MailOutboxService).enqueue({ to, subject: 'Hi', text: 'x' });
    await waitFor('the first transaction written', () => smtp.received.length === 1);
    await app.close();

    const reader = await bed.startApp({ ...options, dispatcher: { ...options.dispatcher, enabled: false } });
    expect(await reader.get(MailOutboxService).get(id)).toMatchObject({
      status: 'pending',
      attempts: 0,
      acceptedRecipients: to.slice(0, 2),
    });
    const next = await bed.startApp(options);
    await waitFor('the row sent', async () => (await next.get(MailOutboxService).get(id)).status === 'sent');
    const copies = smtp.copiesByRecipient(messageId);
    expect(copies.size).toBe(6);
    expect([...copies.values()].every((count) => count === 1)).toBe(true);
  });
});
