import { afterEach, describe, expect, it } from '@jest/globals';
import { EntityManager } from '@mikro-orm/postgresql';
import { MailOutboxService, type OutgoingMail, type ReliableMailOptions } from '@reliable-mail/nestjs';
import pg from 'pg';
import { POOL_CLOSE_TIMEOUT_MS } from '../libs/reliable-mail/src/database/outbox-database.js';
import { WakeUpNotifier } from '../libs/reliable-mail/src/outbox/wake-up.notifier.js';
import { createTestApp, migrate, testMailOptions, waitFor } from './support/test-app.js';
import { PrivatePostgres } from './support/private-postgres.js';

type App = Awaited<ReturnType<typeof createTestApp>>;

const mail = (index: number): OutgoingMail => ({ to: `user${index}@example.com`, subject: 'Hi', text: 'Hello' });

/**
 * Shutdown, and the app's own pool (MikroORM's) when a connection of an enqueue is killed (`pg_terminate_backend`):
 * done to a private cluster. The dispatcher is off, and no mail is sent.
 */
describe("shutdown, and the app's pool when an enqueue's connection is killed", () => {
  const cleanups: Array<() => Promise<unknown>> = [];

  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
  });

  async function start(
    options: Partial<ReliableMailOptions> = {},
  ): Promise<{ cluster: PrivatePostgres; app: App; pool: pg.Pool }> {
    const cluster = await PrivatePostgres.start();
    cleanups.push(() => cluster.destroy());
    await migrate(cluster.url);
    const mailOptions = testMailOptions('smtp://127.0.0.1:1', {
      ...options,
      dispatcher: { enabled: false, ...options.dispatcher },
    });
    const app = await createTestApp(cluster.url, mailOptions);
    // Bounded: on the code before the change the close never returns, and the cluster's end frees its sockets.
    cleanups.push(() => within(app.close(), 2_000));
    const pool = await app.get(EntityManager).getConnection().getNativeClient();
    return { cluster, app, pool };
  }

  it('an enqueueMany in a transaction of its own gives its killed connection back, and writes nothing', async () => {
    const { cluster, app, pool } = await start();
    const outbox = app.get(MailOutboxService);
    const locker = new pg.Client({ connectionString: cluster.url });
    await locker.connect();
    cleanups.push(() => locker.end());
    // A lock that holds the batch's insert inside its transaction, where its backend is then killed.
    await locker.query('begin');
    await locker.query('lock table mail_outbox in share mode');
    const enqueued = outbox.enqueueMany([{ mail: mail(1) }, { mail: mail(2) }]);
    const outcome = enqueued.then(
      () => 'written',
      () => 'refused',
    );
    await waitFor('the insert, waiting for the lock, killed', async () => {
      return (await cluster.terminateBackends({ where: "wait_event_type = 'Lock'" })) === 1;
    });
    expect(await outcome).toBe('refused');
    await locker.query('rollback');

    await waitFor('no connection of the app pool left checked out', () => pool.totalCount === pool.idleCount, 5_000);
    const { rows } = await locker.query<{ count: number }>('select count(*)::int as count from mail_outbox');
    expect(rows[0].count).toBe(0);
    // The failed batch is no longer counted as an open enqueue: the next one NOTIFYs in its own statement.
    const next = app.get(WakeUpNotifier).plan(null);
    next.abandoned();
    expect(next.inStatement).toBe(true);
    await expect(outbox.enqueueMany([{ mail: mail(3) }])).resolves.toHaveLength(1);
  }, 60_000);

  it("app.close() returns although the caller's killed transaction never gave its connection back", async () => {
    const { app, pool } = await start();
    const em = app.get(EntityManager);
    const outbox = app.get(MailOutboxService);
    const killed = em.transactional(async (tx) => {
      await outbox.enqueue(mail(1));
      await tx.execute('select pg_terminate_backend(pg_backend_pid())').catch(() => undefined);
      await tx.execute('select 1');
    });
    await expect(killed).rejects.toThrow();
    // MikroORM's failed rollback kept the connection (kysely-org/kysely#1990): the app's pool cannot end alone.
    expect(pool.totalCount - pool.idleCount).toBe(1);

    const closed = await within(
      app.close().then(() => 'closed'),
      10_000,
    );
    expect(closed).toBe('closed');
    expect(pool.totalCount).toBe(0);
  }, 60_000);

  it('a transport whose close never returns holds app.close() no longer than the shutdown bound', async () => {
    const shutdownTimeoutMs = 1_000;
    const { app } = await start({
      transport: {
        send: () => Promise.reject(new Error('no mail is sent here')),
        verify: () => Promise.resolve(),
        close: () => new Promise(() => undefined),
      },
      dispatcher: { shutdownTimeoutMs },
    });
    // The dispatcher's bound, then the pool's close (at most its own bound), and a little for the app's other modules.
    const closed = await within(
      app.close().then(() => 'closed'),
      shutdownTimeoutMs + POOL_CLOSE_TIMEOUT_MS + 2_000,
    );
    expect(closed).toBe('closed');
  }, 60_000);
});

/** What `promise` gives, or 'timed out' after `ms`; the timer does not outlive it. */
async function within<T>(promise: Promise<T>, ms: number): Promise<T | 'timed out'> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timed out'>((resolve) => (timer = setTimeout(resolve, ms, 'timed out')));
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
