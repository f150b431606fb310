import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { statementsOnClient } from '../../libs/reliable-mail/src/database/sql-client.js';
import { insertRows } from '../../libs/reliable-mail/src/outbox/sql/insert.js';
import { DEFAULT_SCHEMA, tablesIn } from '../../libs/reliable-mail/src/schema/outbox-tables.js';
import { convertToPartitions } from '../../libs/reliable-mail/src/schema/partitioned-layout.js';
import { migrate } from '../support/test-app.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';
import { ddlConnection, openTransactions } from './partition-rows.js';
import { newRow } from '../support/outbox-rows.js';

// PostgreSQL enforces no unique index that lacks the partition key: a unique index of the keys per partition would
// let two rows with one key into two days' partitions. The keys' own table, written by the outbox's trigger, holds
// them across every partition; a key taken by a transaction not yet committed makes the others wait for it.

const TABLES = tablesIn(DEFAULT_SCHEMA);

describe('an idempotency key in a partitioned outbox', () => {
  let database: TestDatabase;
  let legacyUntil: string;

  beforeAll(async () => {
    database = await createTestDatabase();
    await migrate(database.url);
    const { connection, end } = await ddlConnection(database.url);
    ({ legacyUntil } = await convertToPartitions(connection, TABLES, 3));
    await end();
  });

  afterAll(() => database?.drop());

  it('gives one row to 20 concurrent enqueues across a partition boundary', async () => {
    const clients = await openTransactions(database.url, 20);
    try {
      // Half as an enqueue writes today's rows, half into the next partition (the statement's columns, with the day).
      const inserts = clients.map((client, index) => {
        const row = newRow({ idempotencyKey: 'order-1234' });
        if (index % 2 === 0) return insertRows(statementsOnClient(client, TABLES), [row], false);
        return client
          .query(
            `insert into mail_outbox (id, idempotency_key, content_hash, message_id, payload, max_attempts, lane, partition_day)
             values ($1, $2, $3, $4, $5, 5, 'default', $6) on conflict do nothing returning id`,
            [row.id, row.idempotencyKey, row.contentHash, row.messageId, JSON.stringify(row.payload), legacyUntil],
          )
          .then((result) => result.rows);
      });
      // The first insert of the key holds it until its transaction ends: the others wait, then insert nothing.
      const settled = await Promise.all(
        inserts.map((insert, index) =>
          insert.then(async (rows) => {
            await clients[index].query('commit');
            return rows.length;
          }),
        ),
      );
      expect(settled.reduce((sum, count) => sum + count, 0)).toBe(1);
    } finally {
      await Promise.all(clients.map((client) => client.end()));
    }
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    try {
      const { rows } = await client.query(
        `select (select count(*)::int from mail_outbox where idempotency_key = 'order-1234') as rows,
                (select count(*)::int from mail_idempotency_key where idempotency_key = 'order-1234') as keys`,
      );
      expect(rows).toEqual([{ rows: 1, keys: 1 }]);
    } finally {
      await client.end();
    }
  });
});
