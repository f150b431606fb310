// npm run bench:insert: what PostgreSQL spends on one enqueue's transaction (begin, the insert, commit) by the shape
// of the insert, with the library's own statements sent unprepared as a caller's stack sends them. BENCH_INSERT_N
// transactions (4,000) on 16 pg clients, BENCH_INSERT_ROUNDS rounds (4) of each way in turn:
// - keyed: a mail with an idempotency key (ON CONFLICT DO NOTHING and RETURNING);
// - keyless: a mail without one (a plain INSERT);
// - keyless, two indexes: the same into a copy of the outbox with only its primary key and due index.
// Prints each round's rate and PostgreSQL's CPU per transaction, from /proc.
import pg from 'pg';
import { statementsOnClient } from '../libs/reliable-mail/src/database/sql-client.js';
import { insertRows } from '../libs/reliable-mail/src/outbox/sql/insert.js';
import { migrateSchema, migrationConnection } from '../libs/reliable-mail/src/schema/migrate-schema.js';
import { DEFAULT_SCHEMA, type OutboxTables, tablesIn } from '../libs/reliable-mail/src/schema/outbox-tables.js';
import { cpuSnapshot, cpuSpent, databaseUrl, intFromEnv, sleep } from './common.js';
import { benchRow } from './outbox-rows.js';

const count = intFromEnv('BENCH_INSERT_N', 4_000);
const rounds = intFromEnv('BENCH_INSERT_ROUNDS', 4);
const CLIENTS = 16;
const DATABASE = 'bench_insert';
/** A schema whose outbox keeps only the indexes an insert of a pending row must write. */
const TWO_INDEXES = 'bench_two_indexes';

const admin = new pg.Client({ connectionString: databaseUrl('postgres') });
await admin.connect();
await admin.query(`drop database if exists ${DATABASE} with (force)`);
await admin.query(`create database ${DATABASE}`);
const pool = new pg.Pool({ connectionString: databaseUrl(DATABASE), max: CLIENTS });
pool.on('error', (error) => console.error('[bench:insert pool]', String(error)));
try {
  const setup = await pool.connect();
  try {
    await migrateSchema(migrationConnection(setup));
    await setup.query(`create schema ${TWO_INDEXES}`);
    await setup.query(`create table ${TWO_INDEXES}.mail_outbox
      (like ${DEFAULT_SCHEMA}.mail_outbox including defaults including constraints including compression)`);
    await setup.query(`alter table ${TWO_INDEXES}.mail_outbox add primary key (id)`);
    await setup.query(`create index on ${TWO_INDEXES}.mail_outbox (lane, next_attempt_at) where status = 'pending'`);
  } finally {
    setup.release();
  }

  /** `count` transactions of one insert each, on `CLIENTS` clients at once; the rate and PostgreSQL's CPU each. */
  const measure = async (tables: OutboxTables, keyed: boolean) => {
    let next = 0;
    const before = cpuSnapshot({});
    const started = performance.now();
    await Promise.all(
      Array.from({ length: CLIENTS }, async () => {
        const client = await pool.connect();
        try {
          const statements = statementsOnClient(client, tables);
          while (next < count) {
            const row = benchRow(next++, 'insert', keyed);
            await client.query('begin');
            await insertRows(statements, [row], false);
            await client.query('commit');
          }
        } finally {
          client.release();
        }
      }),
    );
    const seconds = (performance.now() - started) / 1_000;
    const postgres = cpuSpent(before, cpuSnapshot({})).postgres;
    await pool.query(`truncate ${tables.outbox} cascade`);
    const perTransaction = postgres === null ? '-' : `${Math.round((postgres / count) * 1_000)} µs`;
    return `${Math.round(count / seconds).toLocaleString('en-US')}/s, PostgreSQL ${perTransaction}`;
  };

  const ways = [
    { name: 'keyed (ON CONFLICT, RETURNING)', tables: tablesIn(DEFAULT_SCHEMA), keyed: true },
    { name: 'keyless (plain INSERT)', tables: tablesIn(DEFAULT_SCHEMA), keyed: false },
    { name: 'keyless, two indexes', tables: tablesIn(TWO_INDEXES), keyed: false },
  ];
  await measure(tablesIn(DEFAULT_SCHEMA), false); // warm-up: connections, catalog caches, the JIT
  console.log(`${count} transactions (begin, one insert, commit), ${CLIENTS} clients, ${rounds} rounds`);
  for (let round = 0; round < rounds; round++) {
    for (const way of ways) console.log(`${way.name.padEnd(34)} ${await measure(way.tables, way.keyed)}`);
  }
} finally {
  await pool.end();
  // pg's pool.end() resolves before its connections have closed on the server; let them go before the drop.
  await sleep(500);
  await admin.query(`drop database if exists ${DATABASE} with (force)`);
  await admin.end();
}
