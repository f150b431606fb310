import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { CONNECTION_SETTINGS } from '../../libs/reliable-mail/src/database/outbox-database.js';
import { statementsOnClient } from '../../libs/reliable-mail/src/database/sql-client.js';
import { insertRows } from '../../libs/reliable-mail/src/outbox/sql/insert.js';
import { purgeRows } from '../../libs/reliable-mail/src/outbox/sql/purge.js';
import { retainPartitions } from '../../libs/reliable-mail/src/retention/partition-retention.js';
import { DEFAULT_SCHEMA, tablesIn } from '../../libs/reliable-mail/src/schema/outbox-tables.js';
import {
  addDays,
  deleteDroppedKeys,
  type DayPartition,
  dropPartition,
  outboxPartitions,
} from '../../libs/reliable-mail/src/schema/partitioned-layout.js';
import { sqlClientOf } from '../support/sql-client.js';
import { migrate } from '../support/test-app.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';
import { ddlConnection, openTransactions, partitionedDatabase } from './partition-rows.js';
import { newRow } from '../support/outbox-rows.js';

// The idempotency keys of a partitioned outbox live in a table of their own (see versions/0013-partition-days.ts).
// A key outlives its row when the row is purged, or dropped with its day before retention deletes the day's keys
// (outside the drop's lock, which must stay short whatever the number of keys): it must never refuse an enqueue, as
// the plain layout's unique index, which goes with the row, never does. And a row stuck in `sending` holds its own
// day only, never the younger ones.

const TABLES = tablesIn(DEFAULT_SCHEMA);
const KEEP_CLOSED_FOR_MS = 30 * 86_400_000;

describe('the idempotency keys of a partitioned outbox, past their rows', () => {
  let bed: Awaited<ReturnType<typeof partitionedDatabase>>;
  let database: TestDatabase;
  let pool: pg.Pool;
  let oldDay: string;

  beforeAll(async () => {
    bed = await partitionedDatabase(TABLES, 40, 4);
    ({ database, pool, oldDay } = bed);
  });
  afterAll(() => bed?.close());

  /** Sent rows of `day`, closed 40 days ago, with the given keys. */
  const sentRows = (day: string, keys: string[]) =>
    pool.query(
      `insert into mail_outbox (id, idempotency_key, message_id, status, lane, payload, max_attempts, partition_day,
                                updated_at, created_at, sent_at)
       select gen_random_uuid(), key, key || '@keys.test', 'sent', 'default', '{"to": [], "cc": [], "bcc": []}', 5,
              $1, now() - interval '40 days', now() - interval '40 days', now() - interval '40 days'
       from unnest($2::text[]) key`,
      [day, keys],
    );

  const partitionOf = async (day: string): Promise<DayPartition> => {
    const { connection, end } = await ddlConnection(database.url);
    try {
      const partition = (await outboxPartitions(connection, TABLES)).find((one) => one.from === day);
      if (!partition) throw new Error(`no partition from ${day}`);
      return partition;
    } finally {
      await end();
    }
  };

  it('drops a day while its keys are locked, deletes them after, and a key it left refuses no enqueue', async () => {
    await sentRows(oldDay, ['dropped-1', 'dropped-2', 'dropped-3']);
    const partition = await partitionOf(oldDay);
    // A transaction holding one of the day's keys: the drop, which no longer deletes them, does not wait for it.
    const holder = await pool.connect();
    const { connection, end } = await ddlConnection(database.url);
    try {
      await holder.query('begin');
      await holder.query(`select 1 from mail_idempotency_key where idempotency_key = 'dropped-1' for update`);
      expect(await dropPartition(connection, TABLES, partition, KEEP_CLOSED_FOR_MS)).toBe(true);
      await holder.query('commit');

      // The keys are still there, their rows gone: an enqueue of one takes it over, with a new row of today.
      const [row] = await insertRows(sqlClientOf(pool), [newRow({ idempotencyKey: 'dropped-2' })], false);
      expect(row).toBeDefined();
      const { rows: taken } = await pool.query(
        `select k.outbox_id = o.id and k.partition_day = o.partition_day as held_by_new_row
         from mail_idempotency_key k join mail_outbox o on o.idempotency_key = k.idempotency_key
         where k.idempotency_key = 'dropped-2'`,
      );
      expect(taken).toEqual([{ held_by_new_row: true }]);
      // ...which then holds it as any key: a second enqueue is refused.
      expect(await insertRows(sqlClientOf(pool), [newRow({ idempotencyKey: 'dropped-2' })], false)).toEqual([]);

      // The day's keys deleted after the drop, in batches; the one taken over is today's, and stays.
      expect(await deleteDroppedKeys(connection, TABLES, partition, 1)).toBe(2);
      const { rows: keys } = await pool.query(
        `select idempotency_key from mail_idempotency_key where idempotency_key like 'dropped-%'`,
      );
      expect(keys).toEqual([{ idempotency_key: 'dropped-2' }]);
    } finally {
      holder.release();
      await end();
    }
  });

  it('gives a new row to the key of a purged row, as the plain layout does', async () => {
    const db = sqlClientOf(pool);
    await insertRows(db, [newRow({ idempotencyKey: 'purged-1' })], false);
    await pool.query(`update mail_outbox set status = 'sent', sent_at = now() where idempotency_key = 'purged-1'`);
    expect(await purgeRows(db, { idempotencyKey: 'purged-1' })).toBe(1);
    const [second] = await insertRows(db, [newRow({ idempotencyKey: 'purged-1' })], false);
    expect(second).toBeDefined();
    const { rows } = await pool.query(
      `select count(*)::int as rows,
              (select count(*)::int from mail_idempotency_key where idempotency_key = 'purged-1') as keys
       from mail_outbox where idempotency_key = 'purged-1'`,
    );
    expect(rows).toEqual([{ rows: 1, keys: 1 }]);
  });

  it('gives one row to 20 concurrent enqueues of a key whose row is gone', async () => {
    const db = sqlClientOf(pool);
    await insertRows(db, [newRow({ idempotencyKey: 'taken-over' })], false);
    await pool.query(`delete from mail_outbox where idempotency_key = 'taken-over'`);
    const clients = await openTransactions(database.url, 20);
    try {
      // The first to take the key over holds it until it commits: the others wait, then find its row, and skip.
      const settled = await Promise.all(
        clients.map(async (client) => {
          const rows = await insertRows(
            statementsOnClient(client, TABLES),
            [newRow({ idempotencyKey: 'taken-over' })],
            false,
          );
          await client.query('commit');
          return rows.length;
        }),
      );
      expect(settled.reduce((sum, count) => sum + count, 0)).toBe(1);
    } finally {
      await Promise.all(clients.map((client) => client.end()));
    }
    const { rows } = await pool.query(
      `select count(*)::int as rows,
              bool_and(k.outbox_id = o.id and k.partition_day = o.partition_day) as held_by_it
       from mail_outbox o join mail_idempotency_key k using (idempotency_key) where idempotency_key = 'taken-over'`,
    );
    expect(rows).toEqual([{ rows: 1, held_by_it: true }]);
  });

  it('drops the days after one that a row being sent holds, and says which it left', async () => {
    const heldDay = addDays(oldDay, 1);
    const nextDay = addDays(oldDay, 2);
    await sentRows(heldDay, ['held-1']);
    await sentRows(nextDay, ['next-1']);
    await pool.query(
      `insert into mail_outbox (id, message_id, status, lane, payload, max_attempts, partition_day, lock_token,
                                locked_until, updated_at, created_at)
       values (gen_random_uuid(), 'sending@keys.test', 'sending', 'default', '{"to": [], "cc": [], "bcc": []}', 5, $1,
               gen_random_uuid(), now() + interval '1 hour', now() - interval '40 days', now() - interval '40 days')`,
      [heldDay],
    );
    const { connection, end } = await ddlConnection(database.url);
    try {
      const options = { keepClosedForMs: KEEP_CLOSED_FOR_MS, batchSize: 100, partitionsAhead: 3 };
      const { dropped, held } = await retainPartitions(connection, sqlClientOf(pool), TABLES, options);
      const name = (day: string) => `reliable_mail.mail_outbox_p${day.replaceAll('-', '')}`;
      expect(held).toEqual([{ partition: name(heldDay), rows: 1 }]);
      expect(dropped).toContain(name(nextDay));
      const { rows } = await pool.query(
        `select (select count(*)::int from mail_outbox
                 where message_id like '%@keys.test' and partition_day = $1) as held,
                (select count(*)::int from mail_idempotency_key where idempotency_key = 'next-1') as next_keys`,
        [heldDay],
      );
      expect(rows).toEqual([{ held: 2, next_keys: 0 }]);
    } finally {
      await end();
    }
  });
});

describe('the idempotency key of a purged row in a plain outbox', () => {
  let database: TestDatabase;
  let pool: pg.Pool;

  beforeAll(async () => {
    database = await createTestDatabase();
    await migrate(database.url);
    pool = new pg.Pool({ connectionString: database.url, max: 2, options: CONNECTION_SETTINGS });
  });

  afterAll(async () => {
    await pool?.end();
    await database?.drop();
  });

  it('is free for a new row once its row is purged', async () => {
    const db = sqlClientOf(pool);
    expect(await insertRows(db, [newRow({ idempotencyKey: 'purged-1' })], false)).toHaveLength(1);
    await pool.query(`update mail_outbox set status = 'sent', sent_at = now() where idempotency_key = 'purged-1'`);
    expect(await purgeRows(db, { idempotencyKey: 'purged-1' })).toBe(1);
    expect(await insertRows(db, [newRow({ idempotencyKey: 'purged-1' })], false)).toHaveLength(1);
  });
});
