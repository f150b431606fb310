import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { CONNECTION_SETTINGS } from '../../libs/reliable-mail/src/database/outbox-database.js';
import { statementsOnClient } from '../../libs/reliable-mail/src/database/sql-client.js';
import { recordFeedback } from '../../libs/reliable-mail/src/feedback/sql/record-feedback.js';
import { moveForward } from '../../libs/reliable-mail/src/outbox/sql/move-forward.js';
import { DEFAULT_SCHEMA, tablesIn } from '../../libs/reliable-mail/src/schema/outbox-tables.js';
import { addDays } from '../../libs/reliable-mail/src/schema/partitioned-layout.js';
import { feedbackInput } from '../support/feedback-input.js';
import { sqlClientOf } from '../support/sql-client.js';
import type { TestDatabase } from '../support/test-database.js';
import { partitionedDatabase } from './partition-rows.js';

// Feedback is stored in its row's day, to be dropped with it. Retention moving the row forward while the feedback's
// statement has read the old day but not committed would leave the feedback behind, in the day about to be dropped:
// the statement locks the row as it finds it, and the move skips a row another session holds.

const TABLES = tablesIn(DEFAULT_SCHEMA);
const KEEP_CLOSED_FOR_MS = 30 * 86_400_000;

describe('feedback recorded while retention moves its row forward', () => {
  let bed: Awaited<ReturnType<typeof partitionedDatabase>>;
  let database: TestDatabase;
  let pool: pg.Pool;
  let oldDay: string;

  beforeAll(async () => {
    bed = await partitionedDatabase(TABLES, 40, 2);
    ({ database, pool, oldDay } = bed);
  });
  afterAll(() => bed?.close());

  it('stays with its row: the move waits for the feedback to commit, then takes both', async () => {
    // A dead row of the old day, which retention keeps and so moves forward.
    const {
      rows: [{ id }],
    } = await pool.query(
      `insert into mail_outbox (id, message_id, status, lane, payload, max_attempts, partition_day, updated_at,
                                created_at)
       values (gen_random_uuid(), 'dead@feedback.test', 'dead', 'default', '{"to": [], "cc": [], "bcc": []}', 5, $1,
               now() - interval '40 days', now() - interval '40 days')
       returning id`,
      [oldDay],
    );
    const client = new pg.Client({ connectionString: database.url, options: CONNECTION_SETTINGS });
    await client.connect();
    try {
      await client.query('begin');
      const recorded = await recordFeedback(
        statementsOnClient(client, TABLES),
        [feedbackInput({ row_id: id, status: '5.1.1' })],
        30_000,
      );
      expect(recorded.stored.map((one) => one.outboxId)).toEqual([id]);
      // Retention's move, while the feedback is not committed: it skips the row the feedback holds.
      const db = sqlClientOf(pool);
      expect(await moveForward(db, KEEP_CLOSED_FOR_MS, null, addDays(oldDay, 1), 100)).toBe(0);
      await client.query('commit');
      expect(await moveForward(db, KEEP_CLOSED_FOR_MS, null, addDays(oldDay, 1), 100)).toBe(1);
    } finally {
      await client.end();
    }
    const { rows } = await pool.query(
      `select f.partition_day = o.partition_day as same_day, o.partition_day > $2::date as moved
       from mail_outbox o join mail_outbox_feedback f on f.outbox_id = o.id where o.id = $1`,
      [id, oldDay],
    );
    expect(rows).toEqual([{ same_day: true, moved: true }]);
  });
});
