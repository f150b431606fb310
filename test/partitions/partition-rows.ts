import pg from 'pg';
import { CONNECTION_SETTINGS } from '../../libs/reliable-mail/src/database/outbox-database.js';
import { migrationConnection, type MigrationConnection } from '../../libs/reliable-mail/src/schema/migrate-schema.js';
import type { OutboxTables } from '../../libs/reliable-mail/src/schema/outbox-tables.js';
import {
  addDays,
  convertToPartitions,
  createPartitionsAhead,
  type Day,
  outboxPartitions,
  today,
} from '../../libs/reliable-mail/src/schema/partitioned-layout.js';
import { migrate } from '../support/test-app.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

/** A connection of its own for DDL (a conversion, partitions, their drop), as the CLI and retention open one. */
export async function ddlConnection(
  url: string,
): Promise<{ connection: MigrationConnection; end: () => Promise<void> }> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  return { connection: migrationConnection(client), end: () => client.end() };
}

/**
 * A partitioned outbox whose days start `daysBack` days ago, up to 3 days ahead: converted while empty, its partitions
 * dropped and the first day's made, as though it had been partitioned since then. Returns the first day.
 */
export async function partitionedSince(url: string, tables: OutboxTables, daysBack: number): Promise<Day> {
  const { connection, end } = await ddlConnection(url);
  try {
    await convertToPartitions(connection, tables, 3);
    const first = addDays(await today(connection), -daysBack);
    const partitioned = [tables.outbox, tables.attempt, tables.feedback];
    for (const { name } of await outboxPartitions(connection, tables)) {
      for (const table of partitioned) await connection.run(`drop table ${table}${name.slice(tables.outbox.length)}`);
    }
    for (const table of partitioned) {
      const partition = `${table}_p${first.replaceAll('-', '')}`;
      await connection.run(`create table ${partition} (like ${table} including all)`);
      await connection.run(
        `alter table ${table} attach partition ${partition} for values from ('${first}') to ('${addDays(first, 1)}')`,
      );
    }
    await createPartitionsAhead(connection, tables, 3);
    return first;
  } finally {
    await end();
  }
}

/** A database of its own, migrated and partitioned since `daysBack` days ago, and a pool with the library's settings. */
export async function partitionedDatabase(
  tables: OutboxTables,
  daysBack: number,
  poolSize: number,
): Promise<{ database: TestDatabase; pool: pg.Pool; oldDay: Day; close: () => Promise<void> }> {
  const database = await createTestDatabase();
  await migrate(database.url);
  const oldDay = await partitionedSince(database.url, tables, daysBack);
  const pool = new pg.Pool({ connectionString: database.url, max: poolSize, options: CONNECTION_SETTINGS });
  return { database, pool, oldDay, close: async () => (await pool.end(), await database.drop()) };
}

/** `count` connections to `url`, each in a transaction it began: enqueues that race one another. */
export function openTransactions(url: string, count: number): Promise<pg.Client[]> {
  return Promise.all(
    Array.from({ length: count }, async () => {
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      await client.query('begin');
      return client;
    }),
  );
}
