import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { CONNECTION_SETTINGS } from '../../libs/reliable-mail/src/database/outbox-database.js';
import { sqlStateOf } from '../../libs/reliable-mail/src/database/statement-refusal.js';
import { claimRows } from '../../libs/reliable-mail/src/outbox/sql/claim.js';
import { partitionsAhead } from '../../libs/reliable-mail/src/outbox/sql/health.js';
import { insertRows } from '../../libs/reliable-mail/src/outbox/sql/insert.js';
import { settleInputOf, settleRows } from '../../libs/reliable-mail/src/outbox/sql/settle.js';
import { retainPartitions } from '../../libs/reliable-mail/src/retention/partition-retention.js';
import { DEFAULT_SCHEMA, tablesIn } from '../../libs/reliable-mail/src/schema/outbox-tables.js';
import { addDays, outboxPartitions } from '../../libs/reliable-mail/src/schema/partitioned-layout.js';
import { sentSettlementOf } from '../support/settlements.js';
import { sqlClientOf } from '../support/sql-client.js';
import { migrate } from '../support/test-app.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';
import { ddlConnection, partitionedSince } from './partition-rows.js';
import { newRow } from '../support/outbox-rows.js';

// Retention of a partitioned outbox drops a day's partitions whole, once it has moved forward every row of that day
// it keeps. Here the oldest day (40 days ago, past a retention of 30) holds sent rows to drop and rows to keep: a
// pending row of a lane nobody drains, a future-dated one, a dead one, a failed one and one sent an hour ago, with
// their attempts, feedback and keys; and due rows that two dispatchers drain from it and from today's partition while
// retention runs. A row being sent keeps its partition until it is settled.

const TABLES = tablesIn(DEFAULT_SCHEMA);
const KEEP_CLOSED_FOR_MS = 30 * 86_400_000;
const DUE_ROWS = 400;

interface Drained {
  claimed: string[];
  refusals: number;
  claims: number[];
  settles: number[];
}

/** One instance's dispatcher, reduced to its statements: claim, send (nothing), settle as sent, until told to stop. */
async function drain(pool: pg.Pool, stop: () => boolean): Promise<Drained> {
  const db = sqlClientOf(pool);
  const drained: Drained = { claimed: [], refusals: 0, claims: [], settles: [] };
  for (;;) {
    const lockToken = randomUUID();
    let rows;
    const claimStarted = performance.now();
    try {
      rows = await claimRows(db, {
        lane: 'default',
        limit: 8,
        lockToken,
        workerId: `w-${lockToken}`,
        leaseMs: 60_000,
        maxAgeMs: 86_400_000 * 100,
      });
    } catch (error) {
      // A claim that found a row moved to another partition as it locked it: the dispatcher's refusal, tried again.
      if (sqlStateOf(error) !== '40001') throw error;
      drained.refusals++;
      continue;
    }
    drained.claims.push(performance.now() - claimStarted);

    if (rows.length === 0) {
      if (stop()) return drained;
      await new Promise((resolve) => setTimeout(resolve, 5));
      continue;
    }
    drained.claimed.push(...rows.map((row) => row.id));
    const settleStarted = performance.now();
    const settled = await settleRows(
      db,
      rows.map((row) => settleInputOf(sentSettlementOf(row))),
      30_000,
    );
    drained.settles.push(performance.now() - settleStarted);
    expect(settled.size).toBe(rows.length);
  }
}

describe('retention of a partitioned outbox', () => {
  let database: TestDatabase;
  let pool: pg.Pool;
  let oldDay: string;
  const kept: Record<string, string> = {};

  beforeAll(async () => {
    database = await createTestDatabase();
    await migrate(database.url);
    // Partitioned since 40 days ago, up to 3 days ahead.
    oldDay = await partitionedSince(database.url, TABLES, 40);

    pool = new pg.Pool({ connectionString: database.url, max: 6, options: CONNECTION_SETTINGS });
    const old = (status: string, lane: string, extra: string) =>
      `insert into mail_outbox (id, idempotency_key, message_id, status, lane, payload, max_attempts, partition_day,
                                next_attempt_at, updated_at, created_at)
       values (gen_random_uuid(), 'kept-' || $1, $1 || '@retention.test', '${status}', '${lane}',
               '{"to": [{"address": "ann@example.com"}], "cc": [], "bcc": []}', 5, '${oldDay}', ${extra})
       returning id`;
    const keptRows = {
      pending: old('pending', 'undrained', `now(), now() - interval '40 days', now() - interval '40 days'`),
      futureDated: old(
        'pending',
        'default',
        `now() + interval '1 day', now() - interval '40 days', now() - interval '40 days'`,
      ),
      dead: old('dead', 'default', `now(), now() - interval '40 days', now() - interval '40 days'`),
      failed: old('failed', 'default', `now(), now() - interval '40 days', now() - interval '40 days'`),
      sentAnHourAgo: old('sent', 'default', `now(), now() - interval '1 hour', now() - interval '40 days'`),
      beingSent: old('pending', 'slow', `now(), now() - interval '40 days', now() - interval '40 days'`),
    };
    for (const [name, statement] of Object.entries(keptRows)) {
      const { rows } = await pool.query(statement, [name]);
      kept[name] = rows[0].id;
      await pool.query(
        `insert into mail_outbox_attempt (id, outbox_id, attempt, worker_id, lock_token, outcome, partition_day)
         values (gen_random_uuid(), $1, 1, 'w', gen_random_uuid(), 'transient', $2);
         insert into mail_outbox_feedback (id, outbox_id, source, recipient, kind, provider_event_id, reported_at,
                                           payload, partition_day)
         values (gen_random_uuid(), $1, 'postmark', 'ann@example.com', 'delayed', $1::text, now(), '{}', $2)`
          .replaceAll('$1', `'${rows[0].id}'`)
          .replaceAll('$2', `'${oldDay}'`),
      );
    }
    await pool.query(
      `insert into mail_outbox (id, idempotency_key, message_id, status, lane, payload, max_attempts, partition_day,
                                updated_at, created_at, sent_at)
       select gen_random_uuid(), 'old-' || g, g || '@old.test', 'sent', 'default', '{"to": [], "cc": [], "bcc": []}', 5,
              '${oldDay}', now() - interval '40 days', now() - interval '40 days', now() - interval '40 days'
       from generate_series(1, 300) g;
       insert into mail_outbox (id, idempotency_key, message_id, status, lane, payload, max_attempts, partition_day)
       select gen_random_uuid(), 'due-' || g, g || '@due.test', 'pending', 'default',
              '{"to": [{"address": "bob@example.com"}], "cc": [], "bcc": []}', 5, '${oldDay}'
       from generate_series(1, ${DUE_ROWS / 2}) g`,
    );
    await insertRows(
      sqlClientOf(pool),
      Array.from({ length: DUE_ROWS / 2 }, (_, index) => newRow({ idempotencyKey: `today-${index}` })),
      false,
    );
  });

  afterAll(async () => {
    await pool?.end();
    await database?.drop();
  });

  it('drops a past day while two instances drain: nothing lost or sent twice, and what it keeps survives', async () => {
    // A row of the old day being sent by a third instance (claimed, its lease running) is not moved, and keeps its
    // day's partitions: its settle finds it where its claim left it.
    const db = sqlClientOf(pool);
    const lockToken = randomUUID();
    const [beingSent] = await claimRows(db, {
      lane: 'slow',
      limit: 1,
      lockToken,
      workerId: 'w-slow',
      leaseMs: 60_000,
      maxAgeMs: 86_400_000 * 100,
    });
    expect(beingSent.id).toBe(kept.beingSent);
    const { connection: ddl, end: endDdl } = await ddlConnection(database.url);
    const options = { keepClosedForMs: KEEP_CLOSED_FOR_MS, batchSize: 50, partitionsAhead: 3 };
    // The nine empty days after it, past retention too, are dropped all the same: a row stuck in `sending` holds its
    // own day only.
    const partitionOf = (day: string) => `reliable_mail.mail_outbox_p${day.replaceAll('-', '')}`;
    const youngerDays = Array.from({ length: 9 }, (_, index) => addDays(oldDay, index + 1));
    expect(await retainPartitions(ddl, db, TABLES, options)).toEqual({
      made: [],
      dropped: youngerDays.map(partitionOf),
      held: [{ partition: partitionOf(oldDay), rows: 1 }],
    });
    await endDdl();
    const settledSlow = await settleRows(db, [settleInputOf(sentSettlementOf(beingSent))], 30_000);
    expect(settledSlow.size).toBe(1);

    let draining = true;
    // Each with the settings of reliable-mail's own connections, as the dispatcher's pool has them.
    const instances = [0, 1].map(
      () => new pg.Pool({ connectionString: database.url, max: 2, options: CONNECTION_SETTINGS }),
    );
    const drainers = instances.map((instance) => drain(instance, () => !draining));
    const { connection, end } = await ddlConnection(database.url);
    const runs: string[][] = [];
    const runTimes: number[] = [];
    try {
      // Each run as the retention timer makes it; a day that still holds a row being sent waits for the next.
      for (let run = 0; run < 200 && !runs.flat().length; run++) {
        const runStarted = performance.now();
        const { dropped } = await retainPartitions(connection, db, TABLES, options);
        runs.push(dropped);
        runTimes.push(performance.now() - runStarted);
      }
    } finally {
      draining = false;
    }
    const drained = await Promise.all(drainers);
    await Promise.all(instances.map((instance) => instance.end()));
    const longest = (list: number[]) => Math.max(...list).toFixed(1);
    console.log(
      `retention runs until the drop: ${runs.length} (${runTimes.map((ms) => ms.toFixed(0)).join(', ')} ms); ` +
        `claims refused as a row moved under them: ${drained.map((one) => one.refusals).join(', ')}; ` +
        `rows each instance sent: ${drained.map((one) => one.claimed.length).join(', ')}; ` +
        `longest claim ${longest(drained.flatMap((one) => one.claims))} ms, ` +
        `longest settle ${longest(drained.flatMap((one) => one.settles))} ms`,
    );
    // The old day, once its row being sent was settled.
    expect(runs.flat()).toEqual([partitionOf(oldDay)]);
    const partitions = await outboxPartitions(connection, TABLES);
    expect(partitions[0].from).toBe(addDays(oldDay, 10));
    const { rows: leftOver } = await pool.query(
      `select count(*)::int as tables from pg_class where relname like any(array['mail_outbox%_p${oldDay.replaceAll('-', '')}'])`,
    );
    expect(leftOver).toEqual([{ tables: 0 }]);
    expect(await partitionsAhead(sqlClientOf(pool))).toBe(3);
    await end();

    // Sent once each: no row claimed twice, every due row sent, one attempt each.
    const claimed = drained.flatMap((one) => one.claimed);
    expect(new Set(claimed).size).toBe(claimed.length);
    const { rows: due } = await pool.query(
      `select count(*)::int as rows, count(*) filter (where status = 'sent')::int as sent,
              sum((select count(*) from mail_outbox_attempt a where a.outbox_id = o.id))::int as attempts
       from mail_outbox o where message_id like '%@due.test' or idempotency_key like 'today-%'`,
    );
    expect(due).toEqual([{ rows: DUE_ROWS, sent: DUE_ROWS, attempts: DUE_ROWS }]);
    expect(claimed.length).toBe(DUE_ROWS);

    // What retention keeps survived, in today's partition, with its attempts, feedback and key; the rest went.
    const { rows: survivors } = await pool.query(
      `select o.idempotency_key, o.status, o.partition_day = (now() at time zone 'utc')::date as moved,
              (select count(*)::int from mail_outbox_attempt a where a.outbox_id = o.id and a.partition_day = o.partition_day) as attempts,
              (select count(*)::int from mail_outbox_feedback f where f.outbox_id = o.id and f.partition_day = o.partition_day) as feedback,
              (select count(*)::int from mail_idempotency_key k where k.outbox_id = o.id and k.partition_day = o.partition_day) as keys
       from mail_outbox o where o.id = any($1::uuid[]) order by o.idempotency_key`,
      [Object.values(kept)],
    );
    expect(survivors).toEqual(
      ['kept-beingSent', 'kept-dead', 'kept-failed', 'kept-futureDated', 'kept-pending', 'kept-sentAnHourAgo'].map(
        (key) => ({
          idempotency_key: key,
          status:
            { 'kept-dead': 'dead', 'kept-failed': 'failed', 'kept-sentAnHourAgo': 'sent', 'kept-beingSent': 'sent' }[
              key
            ] ?? 'pending',
          moved: true,
          // The row being sent has its claim's attempt besides the one set up.
          attempts: key === 'kept-beingSent' ? 2 : 1,
          feedback: 1,
          keys: 1,
        }),
      ),
    );
    const { rows: gone } = await pool.query(
      `select (select count(*)::int from mail_outbox where message_id like '%@old.test') as rows,
              (select count(*)::int from mail_idempotency_key where idempotency_key like 'old-%') as keys,
              (select count(*)::int from mail_idempotency_key where idempotency_key like 'due-%') as due_keys`,
    );
    expect(gone).toEqual([{ rows: 0, keys: 0, due_keys: DUE_ROWS / 2 }]);
    // A kept row's key, moved with it, still stops a second enqueue.
    expect(await insertRows(sqlClientOf(pool), [newRow({ idempotencyKey: 'kept-pending' })], false)).toEqual([]);
  }, 120_000);
});
