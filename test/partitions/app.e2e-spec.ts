import { describe, expect, it, beforeAll } from '@jest/globals';
import { OutboxRetention } from '@reliable-mail/nestjs';
import { DEFAULT_SCHEMA, tablesIn } from '../../libs/reliable-mail/src/schema/outbox-tables.js';
import {
  addDays,
  convertToPartitions,
  outboxPartitions,
  today,
} from '../../libs/reliable-mail/src/schema/partitioned-layout.js';
import { waitFor } from '../support/test-app.js';
import { useTestBed } from '../support/test-bed.js';
import { ddlConnection } from './partition-rows.js';

// The app on a partitioned outbox: it enqueues (with a key, twice), sends and purges (freeing the key) as on a plain
// one; its health fails when fewer than 2 days after today have partitions, and retention's next run makes them again.

const TABLES = tablesIn(DEFAULT_SCHEMA);
const mail = { to: 'ann@example.com', subject: 'Your order', text: 'Thanks' };

describe('an app on a partitioned outbox', () => {
  const bed = useTestBed();

  beforeAll(async () => {
    const { connection, end } = await ddlConnection(bed.databaseUrl);
    await convertToPartitions(connection, TABLES, 3);
    await end();
  });

  it('sends, purges, and fails its health with fewer than 2 days of partitions ahead until retention makes them', async () => {
    const { outbox, admin, health, app } = await bed.start();
    const first = await outbox.enqueue(mail, { idempotencyKey: 'order-1' });
    const again = await outbox.enqueue(mail, { idempotencyKey: 'order-1' });
    expect(again.id).toBe(first.id);
    await waitFor('the mail sent', () => app.events.sent.length === 1);
    expect(bed.smtp.received).toHaveLength(1);
    await waitFor('healthy', async () => (await health.isHealthy()).mail.status === 'up');
    expect((await health.isHealthy()).mail).toMatchObject({ partitions: { daysAhead: 3, min: 2 } });

    // The last two days' partitions gone (a retention that stopped running): one day ahead is left.
    const { connection, end } = await ddlConnection(bed.databaseUrl);
    try {
      for (const partition of (await outboxPartitions(connection, TABLES)).slice(-2)) {
        for (const table of [TABLES.outbox, TABLES.attempt, TABLES.feedback]) {
          await connection.run(`drop table ${table}${partition.name.slice(TABLES.outbox.length)}`);
        }
      }
      const down = await health.isHealthy();
      expect(down.mail).toMatchObject({ status: 'down', partitions: { daysAhead: 1, min: 2 } });
      expect(down.mail.failing).toContain('partitions');

      expect(await app.get(OutboxRetention).run()).toBe(0);
      const partitions = await outboxPartitions(connection, TABLES);
      // Today as the database has it (UTC, its clock), as the partitions are made: not the test's clock.
      expect(partitions.at(-1)!.to).toBe(addDays(await today(connection), 4));
    } finally {
      await end();
    }
    expect((await health.isHealthy()).mail).toMatchObject({ status: 'up', partitions: { daysAhead: 3 } });

    // A purge deletes the row's attempts and feedback with it: no foreign key cascades in a partitioned outbox.
    await bed.execute(
      `insert into mail_outbox_feedback (id, outbox_id, source, recipient, kind, provider_event_id, reported_at, payload,
                                         partition_day)
       select gen_random_uuid(), id, 'postmark', 'ann@example.com', 'delivered', 'e-1', now(), '{}', partition_day
       from mail_outbox where id = $1`,
      [first.id],
    );
    expect(await admin.purge({ ids: [first.id] })).toBe(1);
    const [left] = (await bed.execute(
      `select (select count(*)::int from mail_outbox_attempt where outbox_id = $1) as attempts,
              (select count(*)::int from mail_outbox_feedback where outbox_id = $1) as feedback`,
      [first.id],
    )) as Array<{ attempts: number; feedback: number }>;
    expect(left).toEqual({ attempts: 0, feedback: 0 });
    // Its idempotency key went with it, as in a plain outbox: the key enqueued again is a new mail.
    const afterPurge = await outbox.enqueue(mail, { idempotencyKey: 'order-1' });
    expect(afterPurge.id).not.toBe(first.id);
  });
});
