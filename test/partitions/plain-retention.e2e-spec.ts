import { describe, expect, it } from '@jest/globals';
import { OutboxRetention } from '@reliable-mail/nestjs';
import { OutboxDatabase } from '../../libs/reliable-mail/src/database/outbox-database.js';
import { useTestBed } from '../support/test-bed.js';

// Retention asks which layout the outbox has at each run. A plain outbox, the default, deletes rows through the pool:
// the question goes through the pool too, and a connection of its own (for a partitioned outbox's DDL) is not opened.

describe('retention of a plain outbox', () => {
  const bed = useTestBed();

  it('runs through the pool, without a connection of its own', async () => {
    const { app } = await bed.start();
    await bed.execute(
      `insert into mail_outbox (id, message_id, status, lane, payload, max_attempts, sent_at, updated_at)
       values (gen_random_uuid(), 'old@plain.test', 'sent', 'default', '{"to": [], "cc": [], "bcc": []}', 5,
               now() - interval '40 days', now() - interval '40 days')`,
    );
    // Counted as they are opened: the connections retention would open outside the pool.
    const database = app.get(OutboxDatabase);
    const client = database.client.bind(database);
    let opened = 0;
    database.client = () => {
      opened++;
      return client();
    };
    expect(await app.get(OutboxRetention).run()).toBe(1);
    expect(opened).toBe(0);
  });
});
