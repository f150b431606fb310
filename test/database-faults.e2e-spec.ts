import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from '@jest/globals';
import { EntityManager } from '@mikro-orm/postgresql';
import {
  MailOutboxHealthIndicator,
  MailOutboxService,
  type OutgoingMail,
  type SmtpTransportOptions,
} from '@reliable-mail/nestjs';
import { OutboxDatabase, POOL_CLOSE_TIMEOUT_MS } from '../libs/reliable-mail/src/database/outbox-database.js';
import { Statement } from '../libs/reliable-mail/src/database/sql-client.js';
import { settlementFor } from '../libs/reliable-mail/src/dispatch/settlement.js';
import { resolveOptions } from '../libs/reliable-mail/src/options/resolve-options.js';
import { claimRows, type ClaimRequest } from '../libs/reliable-mail/src/outbox/sql/claim.js';
import { settleInputOf, settleRows, settlementKey } from '../libs/reliable-mail/src/outbox/sql/settle.js';
import { WakeUpNotifier } from '../libs/reliable-mail/src/outbox/wake-up.notifier.js';
import { everyRecipient } from './support/send-outcomes.js';
import { createTestApp, migrate, testMailOptions, waitFor } from './support/test-app.js';
import { PrivatePostgres } from './support/private-postgres.js';
import { SmtpTestServer } from './support/smtp-test-server.js';
import { TcpProxy } from './support/tcp-proxy.js';
import { withClient } from './support/test-database.js';

type App = Awaited<ReturnType<typeof createTestApp>>;

const mail = (index: number): OutgoingMail => ({
  to: `user${index}@example.com`,
  subject: `Order ${index}`,
  text: 'Thanks',
});

/** Every fault here is done to a private cluster of the test's own, never to the server other files share. */
describe('reliable-mail when the database misbehaves', () => {
  const cleanups: Array<() => Promise<unknown>> = [];
  const later = <T extends { close?(): Promise<unknown>; destroy?(): Promise<unknown> }>(thing: T): T => {
    cleanups.push(() => (thing.close ? thing.close() : thing.destroy!()));
    return thing;
  };

  afterEach(async () => {
    // Apps first, then servers and clusters: the reverse of the order they were made in.
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
  });

  async function privateCluster(): Promise<PrivatePostgres> {
    const cluster = later(await PrivatePostgres.start());
    await migrate(cluster.url);
    return cluster;
  }

  async function smtpServer(): Promise<SmtpTestServer> {
    const server = later(new SmtpTestServer());
    await server.listen();
    return server;
  }

  async function app(databaseUrl: string, options: Parameters<typeof testMailOptions>[1]): Promise<App> {
    const server = await smtpServer();
    return later(await createTestApp(databaseUrl, testMailOptions(server.url, options)));
  }

  it('a hot standby: LISTEN keeps failing for a minute while the pools stay bounded and usable; after promotion wake-ups arrive', async () => {
    const primary = await privateCluster();
    const standby = later(await primary.createStandby());
    const server = await smtpServer();
    // A poll ten minutes away: once promoted, only a wake-up can make the dispatcher send in time.
    const application = later(
      await createTestApp(standby.url, testMailOptions(server.url, { dispatcher: { pollIntervalMs: 600_000 } })),
    );
    const health = application.get(MailOutboxHealthIndicator);
    const em = application.get(EntityManager);
    const ormPool = await em.getConnection().getNativeClient();

    const minuteEnds = Date.now() + 60_000;
    while (Date.now() < minuteEnds) {
      await new Promise((resolve) => setTimeout(resolve, 5_000));
      // The app's own pool is untouched by the listener's failures, and answers an unrelated query.
      expect(ormPool.totalCount).toBeLessThanOrEqual(2);
      await expect(em.fork().execute('select 1 as one')).resolves.toEqual([{ one: 1 }]);
      expect((await application.get(OutboxDatabase).poolFigures())?.total ?? 0).toBeLessThanOrEqual(10);
      const { mail: status } = await health.isHealthy('mail');
      expect(status.dispatcher).toMatchObject({ wakeUp: { listening: false } });
    }
    const { mail: failing } = await health.isHealthy('mail');
    expect((failing.dispatcher as { wakeUp: { failures: number } }).wakeUp.failures).toBeGreaterThan(3);
    expect((failing.dispatcher as { wakeUp: { lastError: string } }).wakeUp.lastError).toMatch(
      /cannot execute LISTEN during recovery/,
    );

    await standby.promote();
    await waitFor(
      'the listener to listen on the promoted server',
      async () => {
        const { mail: status } = await health.isHealthy('mail');
        return (status.dispatcher as { wakeUp: { listening: boolean } }).wakeUp.listening;
      },
      40_000,
    );
    const sent = await application.get(MailOutboxService).enqueue(mail(1));
    await waitFor('the mail woken up by NOTIFY', () => server.received.length === 1, 10_000);
    expect(server.received[0].messageId).toBe(sent.messageId);
  }, 150_000);

  it('connections black-holed mid-drain (the old primary vanished without a reset): the drain finishes, nothing lost or left sending', async () => {
    const cluster = await privateCluster();
    const proxy = later(await TcpProxy.start(cluster.port));
    const server = await smtpServer();
    server.script = { onData: () => ({ acceptAfterMs: 5 }) };
    const proxyUrl = `postgres://postgres@127.0.0.1:${proxy.port}/postgres`;
    const application = later(
      await createTestApp(
        cluster.url,
        testMailOptions(server.url, {
          database: { url: proxyUrl, statementTimeoutMs: 1_000, connectTimeoutMs: 1_000 },
        }),
      ),
    );
    const outbox = application.get(MailOutboxService);
    const enqueued = await outbox.enqueueMany(Array.from({ length: 300 }, (_, index) => ({ mail: mail(index) })));

    await waitFor('a third of the mail sent', () => server.received.length >= 100, 30_000);
    const blackHoledAt = Date.now();
    proxy.blackHole();

    // The bound: the client-side timeout (1 s + 5 s) drops each silent connection, and new ones pass.
    await waitFor('every row sent', () => countByStatus(cluster.url, 'sent').then((sent) => sent === 300), 40_000);
    expect(Date.now() - blackHoledAt).toBeLessThan(40_000);
    expect(await countByStatus(cluster.url, 'sending')).toBe(0);
    const copies = server.copiesByMessageId();
    expect(enqueued.every((row) => copies.get(row.messageId) === 1)).toBe(true);
    expect(proxy.connectionsOpened).toBeGreaterThan(1);
  }, 90_000);

  it('once a statement went unanswered, the idle connections silenced with it are not tried one bound at a time', async () => {
    const cluster = await privateCluster();
    const proxy = later(await TcpProxy.start(cluster.port));
    const server = await smtpServer();
    const application = later(
      await createTestApp(
        cluster.url,
        testMailOptions(server.url, {
          dispatcher: { enabled: false },
          database: { url: `postgres://postgres@127.0.0.1:${proxy.port}/postgres`, statementTimeoutMs: 1_000 },
        }),
      ),
    );
    const database = application.get(OutboxDatabase);
    const select = (text: string) => database.query<{ one: number }>(new Statement(() => ({ text })), []);
    // Five connections, idle in the pool once their statements are answered.
    await Promise.all(Array.from({ length: 5 }, () => select('select pg_sleep(0.2), 1 as one')));
    expect((await database.poolFigures())?.idle).toBe(5);

    proxy.blackHole();
    // The first statement takes an idle connection and waits its whole bound (1 s + 5 s) for an answer.
    await expect(select('select 1 as one')).rejects.toThrow(/timeout/);
    // The next gets a new connection: the four idle ones had not answered since the first went silent, and are given
    // up without a statement on them (one tried would hold this one a whole bound, and then fail it).
    const opened = proxy.connectionsOpened;
    await expect(select('select 1 as one')).resolves.toEqual([{ one: 1 }]);
    expect(proxy.connectionsOpened).toBe(opened + 1);
    expect(await database.poolFigures()).toEqual({ total: 1, idle: 1, waiting: 0 });
  }, 60_000);

  it("a statement cut by its caller's tighter bound on a live server gives up that connection only, not the idle ones", async () => {
    const cluster = await privateCluster();
    const proxy = later(await TcpProxy.start(cluster.port));
    const server = await smtpServer();
    const application = later(
      await createTestApp(
        cluster.url,
        testMailOptions(server.url, {
          dispatcher: { enabled: false },
          database: { url: `postgres://postgres@127.0.0.1:${proxy.port}/postgres`, statementTimeoutMs: 1_000 },
        }),
      ),
    );
    const database = application.get(OutboxDatabase);
    const select = (text: string) => database.query<{ one: number }>(new Statement(() => ({ text })), []);
    await Promise.all(Array.from({ length: 5 }, () => select('select pg_sleep(0.2), 1 as one')));
    const opened = proxy.connectionsOpened;

    // A settle near its lease's end: the caller's bound passes long before the server's own would.
    await expect(
      database.query(new Statement(() => ({ text: 'select pg_sleep(0.5)' })), [], { timeoutMs: 100 }),
    ).rejects.toThrow(/timeout/);
    // The four idle connections answer the next statements: none was given up for a silence nobody saw.
    await expect(Promise.all(Array.from({ length: 4 }, () => select('select 1 as one')))).resolves.toHaveLength(4);
    expect(proxy.connectionsOpened).toBe(opened);
    expect(await database.poolFigures()).toEqual({ total: 4, idle: 4, waiting: 0 });
  }, 60_000);

  it('a statement PostgreSQL refuses keeps its connection: no reconnect for a refusal', async () => {
    const cluster = await privateCluster();
    const proxy = later(await TcpProxy.start(cluster.port));
    const application = await app(cluster.url, {
      dispatcher: { enabled: false },
      database: { url: `postgres://postgres@127.0.0.1:${proxy.port}/postgres` },
    });
    const database = application.get(OutboxDatabase);
    await expect(database.query(new Statement(() => ({ text: 'select 1 as one' })), [])).resolves.toEqual([{ one: 1 }]);
    const opened = proxy.connectionsOpened;

    await expect(database.query(new Statement(() => ({ text: `select 'x'::int as one` })), [])).rejects.toMatchObject({
      code: '22P02',
    });
    await expect(database.query(new Statement(() => ({ text: 'select 1 as one' })), [])).resolves.toEqual([{ one: 1 }]);
    expect(proxy.connectionsOpened).toBe(opened);
    expect(await database.poolFigures()).toEqual({ total: 1, idle: 1, waiting: 0 });
  }, 60_000);

  it('shutdown with the database black-holed and sends in flight ends within dispatcher.shutdownTimeoutMs and the pool-close bound', async () => {
    const cluster = await privateCluster();
    const proxy = later(await TcpProxy.start(cluster.port));
    const server = await smtpServer();
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    server.script = { onData: () => ({ acceptWhen: released }) };
    const shutdownTimeoutMs = 2_000;
    // The timeouts keep their defaults: a statement on a silent connection is given up only after 35 s, and the
    // pool's close must not wait for it (nor for connectTimeoutMs, 10 s). The lease is the shortest they allow.
    const application = await createTestApp(
      cluster.url,
      testMailOptions(server.url, {
        database: { url: `postgres://postgres@127.0.0.1:${proxy.port}/postgres`, statementTimeoutMs: 30_000 },
        dispatcher: { shutdownTimeoutMs, leaseMs: 41_000 },
      }),
    );
    await application
      .get(MailOutboxService)
      .enqueueMany(Array.from({ length: 8 }, (_, index) => ({ mail: mail(index) })));
    await waitFor('8 messages held by the server', () => server.received.length === 8, 15_000);

    proxy.blackHole();
    release();
    const closing = Date.now();
    await application.close();
    expect(Date.now() - closing).toBeLessThan(shutdownTimeoutMs + POOL_CLOSE_TIMEOUT_MS + 1_500);
  }, 60_000);

  it('PostgreSQL crashes and stays down for 10 s while 16 sends are in flight: every mail arrives exactly once', async () => {
    const cluster = await privateCluster();
    // The WAL writer waits its longest between rounds, so a commit that did not flush its own WAL is still in
    // memory when the server crashes: the crash loses it, as it would in production within wal_writer_delay.
    await withClient(cluster.url, async (client) => {
      await client.query(`alter system set wal_writer_delay = '10s'`);
      await client.query('select pg_reload_conf()');
    });
    const server = await smtpServer();
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    server.script = { onData: () => ({ acceptWhen: released }) };
    const application = later(
      await createTestApp(
        cluster.url,
        testMailOptions(server.url, { dispatcher: { leaseMs: 60_000, concurrency: 16 } }),
      ),
    );
    const enqueued = await application
      .get(MailOutboxService)
      .enqueueMany(Array.from({ length: 16 }, (_, index) => ({ mail: mail(index) })));
    await waitFor('16 messages held by the server', () => server.received.length === 16, 15_000);

    await cluster.stop('immediate');
    release();
    await new Promise((resolve) => setTimeout(resolve, 10_000));
    await cluster.start();

    await waitFor('all 16 rows sent', () => countByStatus(cluster.url, 'sent').then((sent) => sent === 16), 30_000);
    expect(server.received).toHaveLength(16);
    const copies = server.copiesByMessageId();
    expect(enqueued.map((row) => copies.get(row.messageId))).toEqual(Array(16).fill(1));
    expect(await attemptOutcomes(cluster.url)).toEqual(['sent']);
  }, 90_000);

  it('a row claimed ahead whose lease cannot be renewed (the database is down) is still sent within its lease, once', async () => {
    const cluster = await privateCluster();
    const server = await smtpServer();
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    server.script = { onData: () => ({ acceptWhen: released }) };
    // One slot: the second row waits, claimed ahead, while the first is held (5 s, within its 8 s send deadline).
    // Waiting more than half a send timeout (4 s) makes it renew its lease before its own send.
    const options = testMailOptions(server.url, {
      lanes: { default: { concurrency: 1 } },
      dispatcher: { leaseMs: 40_000, sendTimeoutMs: 8_000 },
    });
    // The tests' 2 s socket timeout would cut the held conversation first.
    const transport = { ...(options.transport as SmtpTransportOptions), socketTimeout: 10_000 };
    const application = later(await createTestApp(cluster.url, { ...options, transport }));
    const enqueued = await application.get(MailOutboxService).enqueueMany([{ mail: mail(0) }, { mail: mail(1) }]);
    await waitFor('the first message held by the server', () => server.received.length === 1, 15_000);

    await cluster.stop('fast');
    await new Promise((resolve) => setTimeout(resolve, 5_000));
    release();
    // The renewal fails, and some 34 s of lease are left for an 8 s send: the second row goes while the database is
    // down.
    await waitFor('the second message sent during the outage', () => server.received.length === 2, 10_000);
    expect(server.received[1].messageId).toBe(enqueued[1].messageId);
    await cluster.start();

    await waitFor('both rows sent', () => countByStatus(cluster.url, 'sent').then((sent) => sent === 2), 30_000);
    const copies = server.copiesByMessageId();
    expect(enqueued.map((row) => copies.get(row.messageId))).toEqual([1, 1]);
  }, 90_000);

  it("an enqueue's transaction killed by pg_terminate_backend leaves no open transaction behind in the notifier", async () => {
    const cluster = await privateCluster();
    const server = await smtpServer();
    const application = await createTestApp(
      cluster.url,
      testMailOptions(server.url, { dispatcher: { enabled: false } }),
    );
    // MikroORM's pool never gets the killed transaction's connection back (kysely-org/kysely#1990); reliable-mail
    // gives it back at shutdown, so that the close returns (test/shutdown.e2e-spec.ts).
    later(application);
    const em = application.get(EntityManager);
    const outbox = application.get(MailOutboxService);
    const notifier = application.get(WakeUpNotifier);

    const killed = em.transactional(async (tx) => {
      await outbox.enqueue(mail(1));
      const [{ pid }] = await tx.execute<{ pid: number }[]>('select pg_backend_pid() as pid');
      await withClient(cluster.url, (client) => client.query('select pg_terminate_backend($1)', [pid]));
      await tx.execute('select 1');
    });
    await expect(killed).rejects.toThrow();

    // With nothing open, the next enqueue NOTIFYs in its own statement again.
    const next = notifier.plan(null);
    next.abandoned();
    expect(next.inStatement).toBe(true);
  });

  it('two settlements of one row in one batch, one of them stale: only the current one records its event and bounces', async () => {
    const cluster = await privateCluster();
    const application = await app(cluster.url, { dispatcher: { enabled: false } });
    const database = application.get(OutboxDatabase);
    const { id } = await application
      .get(MailOutboxService)
      .enqueue({ to: ['ann@example.com', 'bob@example.com'], subject: 'Hi', text: 'Hello' });
    const claim = (worker: string, leaseMs: number): ClaimRequest => ({
      lane: 'default',
      limit: 1,
      lockToken: randomUUID(),
      workerId: worker,
      leaseMs,
      maxAgeMs: 86_400_000,
    });
    const [stale] = await claimRows(database, claim('worker-a', 1));
    await new Promise((resolve) => setTimeout(resolve, 20));
    const [current] = await claimRows(database, claim('worker-b', 60_000));
    expect(current.id).toBe(id);

    const { retry } = resolveOptions(testMailOptions('smtp://127.0.0.1:1'), 'test', 1);
    const refusal = everyRecipient(['ann@example.com'], 'refused', '550 5.1.1 No such user', 550, '5.1.1');
    const bounced = settlementFor(stale, refusal, retry, new Date(), 5);
    expect(bounced.bounced).toEqual([{ address: 'ann@example.com', reply: '550 5.1.1 No such user' }]);
    const acceptance = everyRecipient(['ann@example.com', 'bob@example.com'], 'accepted', '250 OK', 250);
    const sent = settlementFor(current, acceptance, retry, new Date(), 5);
    const applied = await settleRows(
      database,
      [bounced, sent].map((settlement) => settleInputOf(settlement)),
      30_000,
    );

    expect([...applied.keys()]).toEqual([settlementKey(sent)]);
    const events = await withClient(cluster.url, (client) => client.query('select name from mail_outbox_event'));
    expect(events.rows).toEqual([{ name: 'reliable-mail.email.sent' }]);
    const suppressed = await withClient(cluster.url, (client) => client.query('select address from mail_suppression'));
    expect(suppressed.rows).toEqual([]);
  });
});

async function countByStatus(url: string, status: string): Promise<number> {
  const { rows } = await withClient(url, (client) =>
    client.query<{ count: number }>('select count(*)::int as count from mail_outbox where status = $1', [status]),
  );
  return rows[0].count;
}

/** The distinct attempt outcomes of every row. */
async function attemptOutcomes(url: string): Promise<string[]> {
  const { rows } = await withClient(url, (client) =>
    client.query<{ outcome: string }>('select distinct outcome from mail_outbox_attempt order by outcome'),
  );
  return rows.map((row) => row.outcome);
}
