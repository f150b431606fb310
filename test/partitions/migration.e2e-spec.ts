import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { claimRows } from '../../libs/reliable-mail/src/outbox/sql/claim.js';
import { partitionsAhead } from '../../libs/reliable-mail/src/outbox/sql/health.js';
import { insertRows } from '../../libs/reliable-mail/src/outbox/sql/insert.js';
import { DEFAULT_SCHEMA, tablesIn } from '../../libs/reliable-mail/src/schema/outbox-tables.js';
import { convertToPartitions, isPartitioned } from '../../libs/reliable-mail/src/schema/partitioned-layout.js';
import { sqlClientOf } from '../support/sql-client.js';
import { migrate } from '../support/test-app.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';
import { ddlConnection } from './partition-rows.js';
import { newRow } from '../support/outbox-rows.js';

// An installation moves to the partitioned layout with `npx reliable-mail migrate --partition` while its app goes on
// enqueueing: the outbox, attempts and feedback become the first partition of partitioned tables of their names,
// nothing copied. This converts an outbox of 20,000 rows (each with an attempt, an event and feedback) while four
// connections enqueue one row at a time, and prints the longest an enqueue waited.

const TABLES = tablesIn(DEFAULT_SCHEMA);
const EXISTING_ROWS = 20_000;

describe('converting a plain outbox to the partitioned layout', () => {
  let database: TestDatabase;
  let pool: pg.Pool;

  beforeAll(async () => {
    database = await createTestDatabase();
    await migrate(database.url);
    pool = new pg.Pool({ connectionString: database.url, max: 8 });
    await pool.query(
      `insert into mail_outbox (id, idempotency_key, content_hash, message_id, status, lane, payload, max_attempts,
                                sent_at, updated_at)
       select gen_random_uuid(), case when g % 2 = 0 then 'key-' || g end, case when g % 2 = 0 then 'hash' end,
              g || '@migration.test', case when g % 100 = 0 then 'pending' else 'sent' end, 'default',
              jsonb_build_object('to', jsonb_build_array(jsonb_build_object('address', 'ann@example.com')),
                                 'cc', '[]'::jsonb, 'bcc', '[]'::jsonb, 'text', repeat('x', 200)),
              5, now(), now() - interval '2 days'
       from generate_series(1, ${EXISTING_ROWS}) g;
       insert into mail_outbox_attempt (id, outbox_id, attempt, worker_id, lock_token, outcome)
       select gen_random_uuid(), id, 1, 'w', gen_random_uuid(), 'sent' from mail_outbox;
       insert into mail_outbox_event (outbox_id, name, payload, locked_until)
       select id, 'reliable-mail.email.sent', '{}', now() + interval '1 hour' from mail_outbox;
       insert into mail_outbox_feedback (id, outbox_id, source, recipient, kind, provider_event_id, reported_at, payload)
       select gen_random_uuid(), case when random() < 0.5 then id end, 'postmark', 'ann@example.com', 'delivered',
              'e' || message_id, now(), '{}' from mail_outbox;
       create table public.before_outbox as select id from mail_outbox;
       create table public.before_attempt as select id from mail_outbox_attempt;
       create table public.before_event as select id from mail_outbox_event;
       create table public.before_feedback as select id, outbox_id from mail_outbox_feedback;
       analyze`,
    );
  });

  afterAll(async () => {
    await pool?.end();
    await database?.drop();
  });

  it('keeps every row, attempt, event and feedback, with enqueues running throughout', async () => {
    const db = sqlClientOf(pool);
    let phase: 'before' | 'converting' | 'after' | 'done' = 'before';
    const waits = { before: [] as number[], converting: [] as number[], after: [] as number[] };
    const enqueued: string[] = [];
    const enqueuer = async (worker: number) => {
      for (let n = 0; (phase as string) !== 'done'; n++) {
        const started = performance.now();
        const during = phase;
        const [row] = await insertRows(db, [newRow({ idempotencyKey: `live-${worker}-${n}` })], false);
        if (during !== 'done') waits[during].push(performance.now() - started);
        enqueued.push(row.id);
      }
    };
    const enqueuers = [0, 1, 2, 3].map(enqueuer);
    await sleep(300);
    const { connection, end } = await ddlConnection(database.url);
    phase = 'converting';
    const started = performance.now();
    let legacyUntil: string;
    let tookMs: number;
    try {
      ({ legacyUntil } = await convertToPartitions(connection, TABLES, 3));
      tookMs = performance.now() - started;
      phase = 'after';
      await sleep(300);
    } finally {
      phase = 'done';
      await Promise.all(enqueuers);
    }

    const longest = (list: number[]) => Math.max(...list).toFixed(1);
    console.log(
      `conversion of ${EXISTING_ROWS} rows took ${tookMs.toFixed(0)} ms; longest enqueue wait: ` +
        `${longest(waits.converting)} ms during it (${waits.converting.length} enqueues), ` +
        `${longest(waits.before)} ms before (${waits.before.length}), ${longest(waits.after)} ms after (${waits.after.length})`,
    );
    expect(waits.converting.length).toBeGreaterThan(0);
    expect(waits.after.length).toBeGreaterThan(0);

    const { rows: layout } = await pool.query(
      `select c.relname, c.relkind from pg_class c
       where c.oid in ('mail_outbox'::regclass, 'mail_outbox_attempt'::regclass, 'mail_outbox_feedback'::regclass)
       order by 1`,
    );
    expect(layout).toEqual([
      { relname: 'mail_outbox', relkind: 'p' },
      { relname: 'mail_outbox_attempt', relkind: 'p' },
      { relname: 'mail_outbox_feedback', relkind: 'p' },
    ]);
    expect(await partitionsAhead(sqlClientOf(pool))).toBe(3);
    await end();

    const { rows: lost } = await pool.query(
      `select (select count(*)::int from before_outbox b where not exists (select 1 from mail_outbox o where o.id = b.id)) as rows,
              (select count(*)::int from before_attempt b where not exists (select 1 from mail_outbox_attempt a where a.id = b.id)) as attempts,
              (select count(*)::int from before_event b where not exists (select 1 from mail_outbox_event e where e.id = b.id)) as events,
              (select count(*)::int from before_feedback b
               where not exists (select 1 from mail_outbox_feedback f where f.id = b.id and f.outbox_id is not distinct from b.outbox_id)) as feedback,
              (select count(*)::int from before_outbox) as before`,
    );
    expect(lost).toEqual([{ rows: 0, attempts: 0, events: 0, feedback: 0, before: EXISTING_ROWS }]);
    const { rows: live } = await pool.query(
      `select count(*)::int as count from mail_outbox where id = any($1::uuid[])`,
      [enqueued],
    );
    expect(live[0].count).toBe(enqueued.length);
    expect(new Set(enqueued).size).toBe(enqueued.length);

    // The old tables' indexes became their partitions of the parent's, none built again under the switch's lock: only
    // the unique ones without the day stay unattached.
    const { rows: unattached } = await pool.query(
      `select c.relname from pg_index x join pg_class c on c.oid = x.indexrelid join pg_class t on t.oid = x.indrelid
       where t.relname like '%_legacy' and not exists (select 1 from pg_inherits i where i.inhrelid = c.oid)
       order by 1`,
    );
    expect(unattached.map((row: { relname: string }) => row.relname)).toEqual([
      'mail_outbox_attempt_pkey_legacy',
      'mail_outbox_feedback_event_unique_legacy',
      'mail_outbox_feedback_pkey_legacy',
      'mail_outbox_idempotency_key_unique_legacy',
      'mail_outbox_pkey_legacy',
    ]);
    const { rows: doubled } = await pool.query(
      `select count(*)::int as count from pg_index x join pg_class t on t.oid = x.indrelid
       where t.relname like '%_legacy' group by x.indrelid, x.indkey::text, pg_get_expr(x.indpred, x.indrelid)
       having count(*) > 1 and bool_and(not x.indisunique)`,
    );
    expect(doubled).toEqual([]);

    // The existing rows are in the first partition, every day before legacyUntil; the keys they held are still taken.
    const { rows: where } = await pool.query(
      `select tableoid::regclass::text as partition, count(*)::int as count from mail_outbox
       where id in (select id from before_outbox) group by 1`,
    );
    expect(where).toEqual([{ partition: 'mail_outbox_legacy', count: EXISTING_ROWS }]);
    expect(legacyUntil > new Date().toISOString().slice(0, 10)).toBe(true);
    expect(
      await insertRows(db, [newRow({ idempotencyKey: 'key-2' }), newRow({ idempotencyKey: 'live-0-0' })], false),
    ).toEqual([]);

    // The dispatcher's statements run on it: a claim of the existing pending rows writes each attempt in its row's day.
    const claimed = await claimRows(db, {
      lane: 'default',
      limit: 50,
      lockToken: '00000000-0000-4000-8000-000000000001',
      workerId: 'w',
      leaseMs: 60_000,
      maxAgeMs: 86_400_000,
    });
    expect(claimed.length).toBe(50);
    const { rows: misplaced } = await pool.query(
      `select count(*)::int as count from mail_outbox_attempt a join mail_outbox o on o.id = a.outbox_id
       where a.id = any($1::uuid[]) and a.partition_day <> o.partition_day`,
      [claimed.map((row) => row.attemptId)],
    );
    expect(misplaced).toEqual([{ count: 0 }]);
  }, 120_000);
});

describe('a conversion that fails', () => {
  let database: TestDatabase;

  beforeAll(async () => {
    database = await createTestDatabase();
    await migrate(database.url);
  });

  afterAll(() => database?.drop());

  it('leaves the outbox plain, without the checks that would refuse the rows of the days after', async () => {
    const { connection, end } = await ddlConnection(database.url);
    try {
      // A table of the keys' name already there: the switch fails after the preparation's checks were validated.
      await connection.run(`create table reliable_mail.mail_idempotency_key (idempotency_key text)`);
      await expect(convertToPartitions(connection, TABLES, 3)).rejects.toThrow('already exists');
      const [left] = await connection.run<{ partitioned: boolean; checks: number }>(
        `select (select relkind = 'p' from pg_class where oid = 'reliable_mail.mail_outbox'::regclass) as partitioned,
                (select count(*)::int from pg_constraint where conname like '%_before_partitions') as checks`,
      );
      expect(left).toEqual({ partitioned: false, checks: 0 });
      await connection.run(`drop table reliable_mail.mail_idempotency_key`);
      await convertToPartitions(connection, TABLES, 3);
      expect(await isPartitioned(connection, TABLES)).toBe(true);
    } finally {
      await end();
    }
  });
});
