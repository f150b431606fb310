import { afterEach, describe, expect, it } from '@jest/globals';
import { MailOutboxService, type OutgoingMail } from '@reliable-mail/nestjs';
import { MailDispatcher } from '../libs/reliable-mail/src/dispatch/mail.dispatcher.js';
import { resolveOptions } from '../libs/reliable-mail/src/options/resolve-options.js';
import { createTestApp, migrate, testLogger, testMailOptions, waitFor } from './support/test-app.js';
import { PrivatePostgres } from './support/private-postgres.js';
import { SmtpTestServer } from './support/smtp-test-server.js';
import { TcpProxy } from './support/tcp-proxy.js';
import { withClient } from './support/test-database.js';

const MAILS = 1_000;
const SEND_TIMEOUT_MS = 2_000;
const STATEMENT_TIMEOUT_MS = 1_000;
/** A statement's bound: the server's `statement_timeout`, and the client's 5 s more for a server gone silent. */
const STATEMENT_BOUND_MS = STATEMENT_TIMEOUT_MS + 5_000;
/** The shortest lease the options accept for these timeouts: the send, a statement's bound, the settle's 1 s. */
const SHORTEST_LEASE_MS = SEND_TIMEOUT_MS + STATEMENT_BOUND_MS + 1_000;
const DEFAULT_LEASE_MS = resolveOptions(
  { transport: 'smtp://127.0.0.1:1', from: 'shop@example.com', messageIdDomain: 'test.example.com' },
  'test',
  1,
).dispatcher.leaseMs;
/**
 * Longer than a statement's bound, so that no statement on a silent connection can wait the partition out, and than
 * the shortest lease, so that what the worker sent before it arrives once another worker has claimed its rows again.
 */
const PARTITION_MS = SHORTEST_LEASE_MS + 3_000;

const mail = (index: number): OutgoingMail => ({
  to: `user${index}@example.com`,
  subject: `Order ${index}`,
  text: 'Thanks',
});

interface RowAttempts {
  message_id: string;
  status: string;
  locked_by: string | null;
  sent: number;
  unknown: number;
}

/**
 * One of two workers is cut off from the database mid-drain, on a private cluster, for longer than a statement's
 * bound: all its connections (the LISTEN one included) go silent, new ones reach nothing, and what it sends
 * meanwhile arrives when the partition heals, as TCP delivers it. The sends it has under way cannot be settled until
 * then. Whatever the lease, no row may end up with two attempts recorded as sent, and a row may only be sent twice
 * after an attempt recorded as unknown.
 */
describe('a worker whose database connections go silent mid-drain', () => {
  const cleanups: Array<() => Promise<unknown>> = [];

  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
  });

  it.each([
    // A settle the partition holds up past its lease gives up; its row is claimed again and sent a second time.
    { lease: 'the shortest lease the options accept', leaseMs: SHORTEST_LEASE_MS, secondCopies: 'after unknown' },
    // The lease outlasts the partition: every settle is written once it heals.
    { lease: 'the default lease', leaseMs: DEFAULT_LEASE_MS, secondCopies: 'none' },
  ])(
    'at $lease: every mail delivered, no row with two sent attempts, second copies: $secondCopies',
    async ({ lease, leaseMs, secondCopies }) => {
      const cluster = await PrivatePostgres.start();
      cleanups.push(() => cluster.destroy());
      await migrate(cluster.url);
      const proxy = await TcpProxy.start(cluster.port);
      cleanups.push(() => proxy.close());
      const smtp = new SmtpTestServer();
      await smtp.listen();
      cleanups.push(() => smtp.close());
      // Sends take a while: the cut lands with sends of the worker under way, and the other worker is still
      // draining when the partition heals, so a claim the silent one sent meanwhile finds rows to take.
      smtp.script = { onData: () => ({ acceptAfterMs: 200 }) };

      const options = (workerId: string) =>
        testMailOptions(smtp.url, {
          dispatcher: { leaseMs, sendTimeoutMs: SEND_TIMEOUT_MS, workerId },
          database: { statementTimeoutMs: STATEMENT_TIMEOUT_MS, connectTimeoutMs: 1_000 },
        });
      // Every connection of the first worker goes through the proxy: the app's own, reliable-mail's pool, LISTEN.
      const silent = await createTestApp(`postgres://postgres@127.0.0.1:${proxy.port}/postgres`, options('silent'));
      // Its ORM pool may keep a connection that never answers again: its close is bounded.
      cleanups.push(() => Promise.race([silent.close(), new Promise((resolve) => setTimeout(resolve, 10_000))]));
      const healthy = await createTestApp(cluster.url, options('healthy'));
      cleanups.push(() => healthy.close());
      // The mail comes from an instance that only enqueues, through a connection of its own.
      const producerOptions = options('producer');
      const producer = await createTestApp(cluster.url, {
        ...producerOptions,
        dispatcher: { ...producerOptions.dispatcher, enabled: false },
      });
      cleanups.push(() => producer.close());
      const outbox = producer.get(MailOutboxService);

      const enqueued = await outbox.enqueueMany(Array.from({ length: MAILS }, (_, index) => ({ mail: mail(index) })));
      await waitFor('the silent worker sending', () => lockedBy(cluster.url, 'silent').then((count) => count > 0));
      await waitFor('a fifth of the mail delivered', () => smtp.received.length >= MAILS / 5, 30_000);
      const heldAtCut = await lockedBy(cluster.url, 'silent');
      const warningsBefore = testLogger.warnings.length;
      const cutAt = Date.now();
      proxy.partition();
      await new Promise((resolve) => setTimeout(resolve, PARTITION_MS));
      proxy.heal();

      // Generous. At the short lease, the rows whose settle could not be written in time were claimed again during
      // the partition; at the default one, nothing waits for a lease of 10 minutes.
      const drained = await waitFor(
        'every row sent',
        () => countSent(cluster.url).then((sent) => sent === MAILS),
        60_000,
      )
        .then(() => true)
        .catch(() => false);
      const drainedInMs = Date.now() - cutAt;

      const rows = await attemptsByRow(cluster.url);
      const copies = smtp.copiesByMessageId();
      const duplicated = rows.filter((row) => (copies.get(row.message_id) ?? 0) > 1);
      const figures = {
        lease: `${leaseMs} ms`,
        heldBySilentWorkerAtCut: heldAtCut,
        drainedAfterCutMs: drained ? drainedInMs : null,
        notSent: rows.filter((row) => row.status !== 'sent').map((row) => `${row.status} ${row.locked_by}`),
        delivered: smtp.received.length,
        duplicated: duplicated.length,
        duplicatedWithoutUnknownAttempt: duplicated.filter((row) => row.unknown === 0).length,
        rowsWithTwoSentAttempts: rows.filter((row) => row.sent > 1).length,
        rowsWithUnknownAttempt: rows.filter((row) => row.unknown > 0).length,
        handedBackFromUnansweredClaims: testLogger.warnings
          .slice(warningsBefore)
          .filter((warning) => (warning as { msg?: string }).msg?.startsWith('handed back rows of a claim'))
          .reduce((sum: number, warning) => sum + (warning as { count: number }).count, 0),
        silentWorkerListening: silent.get(MailDispatcher).wakeUpState.listening,
      };
      process.stdout.write(`silent worker at ${lease}: ${JSON.stringify(figures)}\n`);

      expect(drained).toBe(true);
      expect(heldAtCut).toBeGreaterThan(0);
      expect(rows.every((row) => row.status === 'sent')).toBe(true);
      expect(enqueued.every((row) => (copies.get(row.messageId) ?? 0) >= 1)).toBe(true);
      expect(figures.rowsWithTwoSentAttempts).toBe(0);
      expect(figures.duplicatedWithoutUnknownAttempt).toBe(0);
      if (secondCopies === 'none') expect(figures.duplicated).toBe(0);

      // Its connections, the LISTEN one too, now go silent for good: the worker, alone since the other stopped,
      // still sends what comes next, by polling on new connections while its listener has not yet found out.
      await healthy.close();
      proxy.blackHole();
      const silencedAt = Date.now();
      const next = await outbox.enqueueMany(Array.from({ length: 20 }, (_, index) => ({ mail: mail(MAILS + index) })));
      await waitFor(
        'the worker to send again',
        () => next.every((row) => smtp.copiesByMessageId().get(row.messageId) === 1),
        STATEMENT_BOUND_MS + 30_000,
      );
      process.stdout.write(
        `silent worker at ${lease}, its connections silent again: all 20 sent after ${Date.now() - silencedAt} ms, ` +
          `listening ${silent.get(MailDispatcher).wakeUpState.listening}\n`,
      );
    },
    240_000,
  );
});

async function lockedBy(url: string, workerId: string): Promise<number> {
  const { rows } = await withClient(url, (client) =>
    client.query<{ count: number }>(
      `select count(*)::int as count from mail_outbox where status = 'sending' and locked_by = $1`,
      [workerId],
    ),
  );
  return rows[0].count;
}

async function countSent(url: string): Promise<number> {
  const { rows } = await withClient(url, (client) =>
    client.query<{ count: number }>(`select count(*)::int as count from mail_outbox where status = 'sent'`),
  );
  return rows[0].count;
}

async function attemptsByRow(url: string): Promise<RowAttempts[]> {
  const { rows } = await withClient(url, (client) =>
    client.query<RowAttempts>(
      `select o.message_id, o.status, o.locked_by,
              count(*) filter (where a.outcome = 'sent')::int as sent,
              count(*) filter (where a.outcome = 'unknown')::int as unknown
       from mail_outbox o left join mail_outbox_attempt a on a.outbox_id = o.id
       group by o.id`,
    ),
  );
  return rows;
}
