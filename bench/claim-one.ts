// npm run bench:claim-one: what the claim of one idle mail costs, the step that sets reliable-mail's idle latency
// apart from graphile-worker's. On one client with the dispatcher's connection settings, BENCH_CLAIM_ONE_ROUNDS
// rounds (3) of BENCH_CLAIM_ONE_N mails (300) for each way, each mail inserted after a pause and then taken right
// after, as an idle mail is (the producer's commit wakes the worker, whose claim follows), one of four ways:
// - the library's claim (CLAIM, prepared, as the dispatcher runs it), its commit waiting for the WAL flush;
// - the same claim with synchronous_commit off for it, to show what the flush costs;
// - a plain UPDATE ... RETURNING that locks the due row and hands it back, as graphile-worker fetches a job;
// - the same plain update with synchronous_commit off.
// Each of the four ways takes a mail in turn, each turn starting with the next way, so that no way is always the
// first of a turn (in a first version the claim was, after a longer pause than the others had).
// Prints each way's median round trip per round, then the median execution time of the claim from EXPLAIN ANALYZE.
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { CONNECTION_SETTINGS } from '../libs/reliable-mail/src/database/outbox-database.js';
import { statementsOnClient } from '../libs/reliable-mail/src/database/sql-client.js';
import { CLAIM, claimValues } from '../libs/reliable-mail/src/outbox/sql/claim.js';
import { insertRows } from '../libs/reliable-mail/src/outbox/sql/insert.js';
import { migrateSchema, migrationConnection } from '../libs/reliable-mail/src/schema/migrate-schema.js';
import { DEFAULT_SCHEMA, tablesIn } from '../libs/reliable-mail/src/schema/outbox-tables.js';
import { databaseUrl, intFromEnv, percentile, sleep } from './common.js';
import { benchRow } from './outbox-rows.js';

const count = intFromEnv('BENCH_CLAIM_ONE_N', 300);
const rounds = intFromEnv('BENCH_CLAIM_ONE_ROUNDS', 3);
const DATABASE = 'bench_claim_one';
const TABLES = tablesIn(DEFAULT_SCHEMA);
/** The wait before each mail: the lone idle mail finds the server and the client idle, as here. */
const PAUSE_MS = 5;

const claimText = CLAIM.in(TABLES).text;
const plainUpdate = `update ${TABLES.outbox} o
  set status = 'sending', lock_token = $2, locked_by = 'bench', locked_until = now() + interval '1 minute',
      attempts = o.attempts + 1, updated_at = now()
  from (select id from ${TABLES.outbox} where status = 'pending' and lane = $1 and next_attempt_at <= now()
        order by next_attempt_at limit 16 for update skip locked) due
  where o.id = due.id returning o.*`;

const admin = new pg.Client({ connectionString: databaseUrl('postgres') });
await admin.connect();
await admin.query(`drop database if exists ${DATABASE} with (force)`);
await admin.query(`create database ${DATABASE}`);
const client = new pg.Client({ connectionString: databaseUrl(DATABASE), options: CONNECTION_SETTINGS });
await client.connect();
try {
  await migrateSchema(migrationConnection(client));
  const statements = statementsOnClient(client, TABLES);
  const claimRequest = () =>
    claimValues({
      lane: 'default',
      limit: 16,
      lockToken: randomUUID(),
      workerId: 'bench',
      leaseMs: 60_000,
      maxAgeMs: 86_400_000,
    });
  const claim = () => client.query({ name: 'claim', text: claimText, values: claimRequest() });
  const plain = () => client.query({ name: 'plain', text: plainUpdate, values: ['default', randomUUID()] });
  /** A way to take the mail: its statement, and the session setting it runs under (set before the clock starts). */
  const ways: { name: string; take: () => Promise<pg.QueryResult>; synchronousCommit: 'on' | 'off' }[] = [
    { name: 'claim', take: claim, synchronousCommit: 'on' },
    { name: 'claim, commit not flushed', take: claim, synchronousCommit: 'off' },
    { name: 'plain UPDATE ... RETURNING', take: plain, synchronousCommit: 'on' },
    { name: 'plain, commit not flushed', take: plain, synchronousCommit: 'off' },
  ];
  /** One mail inserted after the pause, then taken one way: the take's round trip in ms. It must take that mail. */
  const takeOne = async (way: (typeof ways)[number], index: number) => {
    await sleep(PAUSE_MS);
    const row = benchRow(index, 'claim-one');
    await insertRows(statements, [row], false);
    // For every way, the flushed ones too, so that each makes the same round trips before its take.
    await client.query(`set synchronous_commit = ${way.synchronousCommit}`);
    let taken: pg.QueryResult;
    let ms: number;
    try {
      const started = performance.now();
      taken = await way.take();
      ms = performance.now() - started;
    } finally {
      await client.query('reset synchronous_commit');
    }
    const takenIds = taken.rows.map((takenRow: { id: string }) => takenRow.id);
    if (takenIds.length !== 1 || takenIds[0] !== row.id)
      throw new Error(`${way.name} took [${takenIds.join(', ')}], not the one mail inserted (${row.id})`);
    return ms;
  };
  for (const way of ways) await takeOne(way, 0); // prepares each statement and warms the caches
  console.log(`the claim of one idle mail, ${count} per way and round, median round trip:`);
  for (let round = 0; round < rounds; round++) {
    const times = ways.map((): number[] => []);
    for (let index = 0; index < count; index++) {
      for (let turn = 0; turn < ways.length; turn++) {
        const at = (index + turn) % ways.length;
        times[at].push(await takeOne(ways[at], index));
      }
    }
    console.log(ways.map((way, at) => `${way.name} ${percentile(times[at], 50)!.toFixed(3)} ms`).join(', '));
  }
  // Each EXPLAIN ANALYZE claims the one row inserted before it, and commits the claim as the dispatcher does.
  const executions: number[] = [];
  for (let index = 0; index < 20; index++) {
    await insertRows(statements, [benchRow(index, 'claim-one')], false);
    const { rows } = await client.query<{ 'QUERY PLAN': string }>(
      `explain (analyze, timing off) execute claim('default', 16, '${randomUUID()}', 'bench', 60000, 86400000, null)`,
    );
    const line = rows.map((row) => row['QUERY PLAN']).find((text) => text.startsWith('Execution Time'));
    executions.push(Number(/([\d.]+) ms/.exec(line ?? '')?.[1]));
  }
  console.log(`the claim's execution (EXPLAIN ANALYZE, median of 20): ${percentile(executions, 50)!.toFixed(3)} ms`);
} finally {
  await client.end();
  await admin.query(`drop database if exists ${DATABASE} with (force)`);
  await admin.end();
}
