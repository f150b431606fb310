import { beforeAll, describe, expect, it } from '@jest/globals';
import { MailOutboxService } from '@reliable-mail/nestjs';
import pg from 'pg';
import { CONNECTION_SETTINGS } from '../../libs/reliable-mail/src/database/outbox-database.js';
import { retainPartitions } from '../../libs/reliable-mail/src/retention/partition-retention.js';
import { DEFAULT_SCHEMA, tablesIn } from '../../libs/reliable-mail/src/schema/outbox-tables.js';
import { sqlClientOf } from '../support/sql-client.js';
import { testMailOptions, waitFor } from '../support/test-app.js';
import { useTestBed } from '../support/test-bed.js';
import { ddlConnection, partitionedSince } from './partition-rows.js';

// Two running instances (the dispatcher, its claims, sends over SMTP and settles) drain 300 mails of a day past
// retention while retention moves them forward and drops the day: each mail reaches the SMTP server once, and the
// day's old sent rows go with its partitions.

const TABLES = tablesIn(DEFAULT_SCHEMA);
const MAILS = 300;

describe('two instances and retention on a partitioned outbox', () => {
  const bed = useTestBed();
  let oldDay: string;

  beforeAll(async () => {
    oldDay = await partitionedSince(bed.databaseUrl, TABLES, 40);
  });

  it('send every mail of a day being dropped once', async () => {
    const smtp = await bed.startSmtp();
    // An instance that only enqueues; its rows then moved into the day 40 days ago, with 200 sent rows of that day.
    const enqueuer = await bed.startApp(testMailOptions(smtp.url, { dispatcher: { enabled: false } }), [], {
      scheduler: false,
    });
    const enqueued = await enqueuer.get(MailOutboxService).enqueueMany(
      Array.from({ length: MAILS }, (_, index) => ({
        mail: { to: `user${index}@example.com`, subject: 'Your order', text: 'Thanks' },
        idempotencyKey: `order-${index}`,
      })),
      { sendAt: new Date(Date.now() + 60_000) },
    );
    await bed.execute(
      `update mail_outbox set partition_day = $2::date, next_attempt_at = now(), created_at = now() - interval '40 days'
       where id = any($1::uuid[])`,
      [enqueued.map((row) => row.id), oldDay],
    );
    await bed.execute(
      `insert into mail_outbox (id, message_id, status, lane, payload, max_attempts, partition_day, updated_at)
       select gen_random_uuid(), g || '@old.test', 'sent', 'default', '{"to": [], "cc": [], "bcc": []}', 5, $1::date,
              now() - interval '40 days'
       from generate_series(1, 200) g`,
      [oldDay],
    );

    const options = testMailOptions(smtp.url, { retention: { enabled: false } });
    await Promise.all([bed.startApp(options), bed.startApp(options)]);
    const pool = new pg.Pool({ connectionString: bed.databaseUrl, max: 2, options: CONNECTION_SETTINGS });
    const { connection, end } = await ddlConnection(bed.databaseUrl);
    const dropped: string[] = [];
    const oldPartition = `reliable_mail.mail_outbox_p${oldDay.replaceAll('-', '')}`;
    try {
      await waitFor('retention to drop the day', async () => {
        const run = await retainPartitions(connection, sqlClientOf(pool), TABLES, {
          keepClosedForMs: 30 * 86_400_000,
          batchSize: 20,
          partitionsAhead: 3,
        });
        dropped.push(...run.dropped);
        // The empty days after it may go first, while a row of it is being sent.
        return dropped.includes(oldPartition);
      });
      await waitFor('every mail at the server', () => smtp.received.length >= MAILS, 60_000);
    } finally {
      await end();
      await pool.end();
    }
    // Every mail once, and no more after a while.
    await new Promise((resolve) => setTimeout(resolve, 500));
    const copies = smtp.copiesByMessageId();
    expect(copies.size).toBe(MAILS);
    expect([...copies.values()].every((count) => count === 1)).toBe(true);
    const [counts] = (await bed.execute(
      `select (select count(*)::int from mail_outbox where id = any($1::uuid[]) and status = 'sent') as sent,
              (select count(*)::int from mail_outbox where message_id like '%@old.test') as old`,
      [enqueued.map((row) => row.id)],
    )) as Array<{ sent: number; old: number }>;
    expect(counts).toEqual({ sent: MAILS, old: 0 });
  });
});
