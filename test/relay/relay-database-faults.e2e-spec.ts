import { afterEach, describe, expect, it } from '@jest/globals';
import { MailOutboxService } from '@reliable-mail/nestjs';
import pg from 'pg';
import { KeepingDestination } from '../support/keeping-destination.js';
import { PrivatePostgres } from '../support/private-postgres.js';
import { SmtpTestServer } from '../support/smtp-test-server.js';
import { createTestApp, migrate, testMailOptions, waitFor } from '../support/test-app.js';

const MAILS = 60;

/** Done to a private cluster of the test's own, never to the server other files share. */
describe('the event relay when the database restarts', () => {
  const cleanups: Array<() => Promise<unknown>> = [];

  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
  });

  it('publishes every event of mails sent before, during and after a crash of PostgreSQL, none lost', async () => {
    const cluster = await PrivatePostgres.start();
    cleanups.push(() => cluster.destroy());
    await migrate(cluster.url);
    const smtp = new SmtpTestServer();
    await smtp.listen();
    cleanups.push(() => smtp.close());
    const destination = new KeepingDestination();
    const app = await createTestApp(
      cluster.url,
      testMailOptions(smtp.url, { relay: { destinations: [destination], pollIntervalMs: 100 } }),
      [],
      { eventRecorder: false },
    );
    cleanups.push(() => app.close());
    const outbox = app.get(MailOutboxService);
    const ids = new Set<string>();
    for (let i = 0; i < MAILS / 2; i++)
      ids.add((await outbox.enqueue({ to: `a${i}@example.com`, subject: 'Hi', text: 'x' })).id);
    await waitFor('some events published', () => destination.published.length >= 5);

    // A crash: what the relay had claimed but not yet confirmed or deferred is claimed again after its lease.
    await cluster.stop('immediate');
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    await cluster.start();
    for (let i = 0; i < MAILS / 2; i++) {
      ids.add((await outbox.enqueue({ to: `b${i}@example.com`, subject: 'Hi', text: 'x' })).id);
    }

    const client = new pg.Client({ connectionString: cluster.url });
    await client.connect();
    try {
      await waitFor(
        'every mail sent and every event confirmed',
        async () => {
          const { rows } = await client.query<{ sent: number; owed: number }>(
            `select (select count(*) from reliable_mail.mail_outbox where status = 'sent')::int as sent,
                    (select count(*) from reliable_mail.mail_relay)::int as owed`,
          );
          return rows[0].sent === MAILS && rows[0].owed === 0;
        },
        120_000,
      );
    } finally {
      await client.end();
    }
    // At least once: an event whose confirmation the crash cut off is published again, never left out.
    expect(new Set(destination.published.map((event) => event.mailId))).toEqual(ids);
  }, 180_000);
});
