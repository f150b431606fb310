import { describe, expect, it } from '@jest/globals';
import { EntityManager } from '@mikro-orm/postgresql';
import { MailOutboxService } from '@reliable-mail/nestjs';
import { MailDispatcher } from '../../libs/reliable-mail/src/dispatch/mail.dispatcher.js';
import { createTestApp, testMailOptions, waitFor } from '../support/test-app.js';
import { withClient } from '../support/test-database.js';
import { OWN_SETTINGS, ownStatements, usePgBouncerBed } from './pgbouncer-bed.js';

// Every connection of the apps, reliable-mail's and MikroORM's, goes through a PgBouncer in transaction mode with
// fewer server connections than clients: a session's state (a SET, a prepared statement, a LISTEN) would be met by
// another client's transaction, or missed by the next one of its own.
describe('behind PgBouncer in transaction mode (database.pooler: transaction)', () => {
  const bed = usePgBouncerBed({ poolMode: 'transaction', poolSize: 4 });
  const startApp = bed.startApp;

  const unsent = async () =>
    withClient(bed.database.url, async (client) => {
      const { rows } = await client.query<{ count: number }>(
        `select count(*)::int as count from reliable_mail.mail_outbox where status <> 'sent'`,
      );
      return rows[0].count;
    });

  it('two instances, which migrated the schema at their start, drain 2,000 mails, every Message-ID once', async () => {
    const dispatcher = { batchSize: 20, concurrency: 8 };
    // Started together: the migration's lock is a transaction's, as PgBouncer keeps no session's.
    const [producer, ...instances] = await Promise.all([
      startApp({ dispatcher: { enabled: false } }),
      startApp({ dispatcher }),
      startApp({ dispatcher }),
    ]);
    const outbox = producer.get(MailOutboxService);
    const messageIds: string[] = [];
    for (let start = 0; start < 2_000; start += 100) {
      const batch = Array.from({ length: 100 }, (_, index) =>
        outbox.enqueue({ to: `customer${start + index}@example.com`, subject: `Order ${start + index}`, text: 'x' }),
      );
      messageIds.push(...(await Promise.all(batch)).map((result) => result.messageId));
    }

    // Waits, not a speed: a loaded machine takes its time (the bench measures the pace).
    await waitFor('2,000 deliveries', () => bed.smtp.received.length >= 2_000, 600_000);
    await waitFor('every row settled', async () => (await unsent()) === 0, 120_000);
    const copies = bed.smtp.copiesByMessageId();
    expect(bed.smtp.received).toHaveLength(2_000);
    expect([...copies.values()].every((count) => count === 1)).toBe(true);
    expect(new Set(copies.keys())).toEqual(new Set(messageIds));
    expect(instances.map((instance) => instance.events.sent.length > 0)).toEqual([true, true]);
    // No LISTEN through the pooler: the lanes poll.
    const { listening, lastError } = instances[0].get(MailDispatcher).wakeUpState;
    expect({ listening, lastError }).toEqual({ listening: false, lastError: expect.stringMatching(/^polling only/) });
    // No setting of reliable-mail's stayed on a server session: with the apps closed, so that none of their
    // transactions holds one, one transaction held open on each of the pool's 4.
    await bed.closeApps();
    let read = 0;
    const seen = await Promise.all(
      Array.from({ length: 4 }, () =>
        withClient(bed.throughBouncer, async (client) => {
          await client.query('begin');
          const settings = await client.query<{ name: string; setting: string }>(
            `select name, setting from pg_settings
             where name in ('enable_seqscan', 'plan_cache_mode', 'statement_timeout') order by name`,
          );
          read++;
          await waitFor('every session read', () => read === 4);
          await client.query('commit');
          return settings.rows.map(({ name, setting }) => `${name}=${setting}`).join(' ');
        }),
      ),
    );
    expect(seen).toEqual(Array(4).fill('enable_seqscan=on plan_cache_mode=auto statement_timeout=0'));
  }, 900_000);

  it("reliable-mail's own statements run under its settings, SET LOCAL in a transaction of their own", async () => {
    const app = await startApp({ dispatcher: { enabled: false } });
    expect(await ownStatements(app)).toEqual({ settings: OWN_SETTINGS, pastTimeout: '57014' });
  });

  it("a start through PgBouncer that does not say so (database.pooler 'none') fails at once, naming the option", async () => {
    const options = testMailOptions(bed.smtp.url);
    // Retried, the refusal would outlast the test's own timeout (120 s).
    const database = { ...options.database, url: bed.throughBouncer, startTimeoutMs: 600_000 };
    const start = createTestApp(bed.throughBouncer, { ...options, database });
    await expect(start).rejects.toThrow(/unsupported startup parameter.*database\.pooler 'session' or 'transaction'/);
    await expect(start).rejects.toThrow(
      expect.objectContaining({ message: expect.not.stringContaining('within database.startTimeoutMs') }),
    );
  });

  it("an enqueue through the app's own pool on PgBouncer commits with its business row, or rolls back with it", async () => {
    const app = await startApp({ dispatcher: { enabled: false } });
    const em = app.get(EntityManager);
    const outbox = app.get(MailOutboxService);
    await em.execute('create table if not exists public.orders (id int primary key)');

    const { id } = await em.transactional(async (fork) => {
      await fork.execute('insert into public.orders (id) values (1)');
      return outbox.enqueue({ to: 'kept@example.com', subject: 'Order 1', text: 'x' });
    });
    await expect(
      em.transactional(async (fork) => {
        await fork.execute('insert into public.orders (id) values (2)');
        await outbox.enqueue({ to: 'dropped@example.com', subject: 'Order 2', text: 'x' });
        throw new Error('the order was refused');
      }),
    ).rejects.toThrow('the order was refused');

    const stored = await withClient(bed.database.url, async (client) => ({
      orders: (await client.query<{ id: number }>('select id from public.orders order by id')).rows,
      mails: (await client.query<{ id: string }>('select id from reliable_mail.mail_outbox')).rows,
    }));
    expect(stored.orders).toEqual([{ id: 1 }]);
    expect(stored.mails.map((mail) => mail.id)).toEqual([id]);
  });

  it('with database.listenUrl, PostgreSQL itself, an idle dispatcher behind PgBouncer wakes at the commit', async () => {
    // A poll every 10 minutes: only the NOTIFY, heard on the direct connection, brings the mail out within the wait.
    const app = await startApp({ dispatcher: { pollIntervalMs: 600_000 }, database: { listenUrl: bed.database.url } });
    const dispatcher = app.get(MailDispatcher);
    await waitFor('the listener to listen', () => dispatcher.wakeUpState.listening);
    const { messageId } = await app.get(MailOutboxService).enqueue({ to: 'ann@example.com', subject: 'Hi', text: 'x' });
    await waitFor('the mail', () => bed.smtp.received.some((message) => message.messageId === messageId));
  });
});
