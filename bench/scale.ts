// `npm run bench:scale`: reliable-mail's outbox at scale, an unpartitioned and a partitioned one side by side in one
// run. Each is filled with BENCH_SCALE_ROWS sent rows (and their attempts) spread over BENCH_SCALE_DAYS whole days
// before today, plus BENCH_SCALE_DUE due rows, then measured through the library's own code: the claim (16 rows,
// released again), enqueues one per transaction and in batches of 500, a simulated day of traffic (a day's mails
// enqueued, then as many claimed and settled sent), the dead rows and autovacuum after it, a day's retention (time
// and WAL) and the sizes. It prints one table, and the figures for 300,000,000 rows extrapolated from it, labelled so.
// Settings: BENCH_PG_URL (a role that may create databases; the bench makes and drops reliable_mail_scale there),
// BENCH_SCALE_ROWS (10,000,000), BENCH_SCALE_DUE (100,000), BENCH_SCALE_DAYS (30), BENCH_SCALE_SYSTEMS (both:
// unpartitioned,partitioned), BENCH_SCALE_KEEP=1 (keep the database). Figures and how to read them:
// docs/benchmarks.md, "Scale".
import 'reflect-metadata';
import { randomUUID } from 'node:crypto';
import { statfsSync } from 'node:fs';
import type { INestApplicationContext, LoggerService } from '@nestjs/common';
import { EventEmitterModule } from '@nestjs/event-emitter';
import { Test } from '@nestjs/testing';
import {
  MailOutboxService,
  OutboxRetention,
  ReliableMailModule,
  type ReliableMailOptions,
} from '@reliable-mail/nestjs';
import pg from 'pg';
import { OutboxDatabase } from '../libs/reliable-mail/src/database/outbox-database.js';
import { claimRows, type ClaimRequest } from '../libs/reliable-mail/src/outbox/sql/claim.js';
import { releaseRows } from '../libs/reliable-mail/src/outbox/sql/release.js';
import { settleInputOf, settleRows } from '../libs/reliable-mail/src/outbox/sql/settle.js';
import { migrateSchema, migrationConnection } from '../libs/reliable-mail/src/schema/migrate-schema.js';
import { tablesIn } from '../libs/reliable-mail/src/schema/outbox-tables.js';
import {
  addDays,
  convertToPartitions,
  dropPartition,
  outboxPartitions,
} from '../libs/reliable-mail/src/schema/partitioned-layout.js';
import { sentSettlementOf } from '../test/support/settlements.js';
import { bodyFor, FROM, mailFor, MESSAGE_ID_DOMAIN, percentile, sleep } from './common.js';
import { admin, createDatabase, dropDatabase, log, phase } from './run/context.js';
import { fmt, table } from './run/report.js';

function countFromEnv(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw.replaceAll('_', ''));
  if (!Number.isSafeInteger(value) || value < 1)
    throw new Error(`${name} must be a whole number >= 1, got ${JSON.stringify(raw)}`);
  return value;
}

const sentRows = countFromEnv('BENCH_SCALE_ROWS', 10_000_000);
const dueRows = countFromEnv('BENCH_SCALE_DUE', 100_000);
const days = countFromEnv('BENCH_SCALE_DAYS', 30);
/** What the extrapolation is to: 10,000,000 mails a day for 30 days. */
const TARGET_ROWS = 300_000_000;
const TARGET_DAY = 10_000_000;
const DAY_MS = 86_400_000;
/** One day of the filled history: the mails of the simulated day of traffic, and what retention takes. */
const dayRows = Math.round(sentRows / days);
const CLAIMS = 200;
const CLAIM_LIMIT = 16;
/** Sends in flight of the simulated day: the claim of a dispatcher's batch, and as many dispatchers. */
const CHURN_CLAIM_LIMIT = 64;
const CHURN_WORKERS = 4;
const SINGLE_ENQUEUES = 2_000;
const SINGLE_PRODUCERS = 16;
const BATCH_SIZE = 500;
const BATCHED_ENQUEUES = 50_000;
const BATCH_PRODUCERS = 4;
/** Rows per fill statement: large enough to be set-based, small enough that one statement's RETURNING fits. */
const FILL_CHUNK = 250_000;
/**
 * Bytes on disk per sent row of one system, its attempt and every index included, as the fill leaves it: measured
 * at 200,000 rows; the check adds a day of traffic per system and a margin of its own.
 */
const BYTES_PER_ROW = 2_300;
/** Free space the run leaves to everyone else on the server's disk. */
const RESERVE_BYTES = 10 * 2 ** 30;

const DATABASE = 'reliable_mail_scale';
/** The history ends at today's midnight (UTC), so that each of its days is one day's partition whole. */
const midnight = new Date(Math.floor(Date.now() / DAY_MS) * DAY_MS);
const historyStart = () => new Date(midnight.getTime() - days * DAY_MS);

/**
 * One way of keeping the outbox. Each lives in a schema of its own of the bench's database, made through the
 * library's migrations, and is measured through the library's own statements.
 */
interface ScaleSystem {
  readonly name: string;
  readonly schema: string;
  /** Makes the schema, as `reliable-mail migrate` does. */
  migrate(client: pg.Client): Promise<void>;
  /**
   * For the extrapolation: a plain outbox's retention deletes a day's rows one by one, and its vacuum reads every
   * index whole; a partitioned one's retention drops a day's partitions whatever they hold, and vacuum has the day's
   * new rows to see to, in the partitions of that day.
   */
  readonly partitioned: boolean;
}

const unpartitioned: ScaleSystem = {
  name: 'unpartitioned',
  schema: 'scale_unpartitioned',
  partitioned: false,
  async migrate(client) {
    await migrateSchema(migrationConnection(client), this.schema);
  },
};

/** Days after today whose partitions exist, as retention keeps them by default (`retention.partitionsAhead`). */
const PARTITIONS_AHEAD = 3;

/**
 * The partitioned layout, made as an installation converts (`convertToPartitions`) while it is empty; then its
 * first partition (every day before two days ahead, which the conversion keeps the existing rows in) goes, for a
 * partition per day of the history, which the library makes only ahead of today.
 */
const partitioned: ScaleSystem = {
  name: 'partitioned',
  schema: 'scale_partitioned',
  partitioned: true,
  async migrate(client) {
    const connection = migrationConnection(client);
    const t = tablesIn(this.schema);
    await migrateSchema(connection, this.schema);
    await convertToPartitions(connection, t, PARTITIONS_AHEAD);
    const [first] = await outboxPartitions(connection, t);
    if (!(await dropPartition(connection, t, first, 0))) throw new Error(`could not drop ${first.name}`);
    const firstDay = historyStart().toISOString().slice(0, 10);
    for (let day = firstDay; day < first.to; day = addDays(day, 1)) {
      // As createPartitionsAhead makes each day's partitions: its names, which retention finds the others by.
      for (const table of [t.outbox, t.attempt, t.feedback]) {
        const partition = `${table}_p${day.replaceAll('-', '')}`;
        await client.query(`create table ${partition} (like ${table} including all)`);
        await client.query(
          `alter table ${table} attach partition ${partition} for values from ('${day}') to ('${addDays(day, 1)}')`,
        );
      }
    }
  },
};

const ALL_SYSTEMS: ScaleSystem[] = [unpartitioned, partitioned];
const SYSTEMS = (process.env.BENCH_SCALE_SYSTEMS?.split(',') ?? ALL_SYSTEMS.map((system) => system.name)).map(
  (name) => {
    const system = ALL_SYSTEMS.find((candidate) => candidate.name === name.trim());
    if (!system) throw new Error(`unknown system in BENCH_SCALE_SYSTEMS: ${name}`);
    return system;
  },
);

const quietNestLogger: LoggerService = {
  log: () => undefined,
  error: (...parts: unknown[]) => console.error('[reliable-mail]', ...parts),
  warn: (...parts: unknown[]) => console.warn('[reliable-mail]', ...parts),
};

/** An app on the system's schema that only enqueues (its dispatcher off); the bench drives claims and retention. */
async function startApp(
  url: string,
  system: ScaleSystem,
  retention: ReliableMailOptions['retention'] = { enabled: false },
): Promise<INestApplicationContext> {
  const options: ReliableMailOptions = {
    // Nothing is sent: the bench settles the rows it claims itself.
    transport: { host: '127.0.0.1', port: 9, secure: false, ignoreTLS: true },
    from: FROM,
    messageIdDomain: MESSAGE_ID_DOMAIN,
    dispatcher: { enabled: false },
    // Run by the bench (OutboxRetention.run), not on a timer.
    retention: { ...retention, enabled: false },
    database: { url, schema: system.schema, poolSize: SINGLE_PRODUCERS + 4 },
  };
  const moduleRef = await Test.createTestingModule({
    imports: [EventEmitterModule.forRoot(), ReliableMailModule.forRoot(options)],
  })
    .setLogger(quietNestLogger)
    .compile();
  return moduleRef.init();
}

// ---- The fill: set-based INSERT … SELECT, a chunk of rows and their attempts per statement ----

/** A UUID version 7 from a timestamp expression: its milliseconds in the first 48 bits, as the library's ids. */
const uuid7 = (at: string) => `encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
    placing substring(int8send((extract(epoch from ${at}) * 1000)::bigint) from 3) from 1 for 6), 52, 1), 53, 1),
    'hex')::uuid`;

/**
 * A mail as the library stores it: ~2 KB of prose (one of 1,024 texts), which lz4 keeps in ~1 KB inline (see
 * 0007-compressed-payloads); `$1` is the texts.
 */
const PAYLOAD = `jsonb_build_object('v', 2, 'from', jsonb_build_object('address', '${FROM}'),
  'to', jsonb_build_array(jsonb_build_object('address', address)), 'cc', '[]'::jsonb, 'bcc', '[]'::jsonb,
  'replyTo', '[]'::jsonb, 'subject', 'Your order #' || g, 'text', ($1::text[])[1 + g % 1024], 'headers', '{}'::jsonb)`;

/**
 * Sent rows `$2 .. $3` of `$4`, evenly spread over the `$5` days before `$6` (today's midnight, UTC), sent two
 * seconds after their enqueue, each with its one attempt, both kept in the day of the enqueue (`partition_day`, which
 * the plain layout has too and reads nowhere).
 */
const fillSent = (schema: string) => {
  const t = tablesIn(schema);
  return `with mails as (
    insert into ${t.outbox} (id, content_hash, message_id, status, lane, payload, recipients, max_attempts, attempts,
                             next_attempt_at, created_at, sent_at, updated_at, accepted_recipients, provider_reply,
                             partition_day)
    select id, md5(g::text), '<' || id || '@${MESSAGE_ID_DOMAIN}>', 'sent', 'default', ${PAYLOAD}, array[address],
           8, 1, at, at, at + interval '2 seconds', at + interval '2 seconds', jsonb_build_array(address),
           '250 2.0.0 OK queued', (at at time zone 'utc')::date
    from (select g, 'user' || g || '@example.com' as address, ${uuid7('at')} as id, at
          from (select g, $6::timestamptz - $5::int * interval '1 day'
                          + (g - 1) * ($5::int * interval '1 day' / $4::int) as at
                from generate_series($2::int, $3::int) g) timed) rows
    returning id, created_at, partition_day
  )
  insert into ${t.attempt} (id, outbox_id, attempt, worker_id, lock_token, started_at, finished_at, outcome, reply_code,
                            reply, duration_ms, recipients, partition_day)
  select ${uuid7('created_at')}, id, 1, 'scale-bench:1', gen_random_uuid(), created_at,
         created_at + interval '2 seconds', 'sent', 250, '250 2.0.0 OK queued', 40, '[]'::jsonb, partition_day
  from mails`;
};

/** Due rows `$2 .. $3` of `$4`, pending in lane default, made due over the hour before `$5` (now). */
const fillDue = (schema: string) => `
  insert into ${tablesIn(schema).outbox} (id, content_hash, message_id, status, lane, payload, recipients, max_attempts,
                                          next_attempt_at, created_at, updated_at)
  select id, md5('due' || g), '<' || id || '@${MESSAGE_ID_DOMAIN}>', 'pending', 'default', ${PAYLOAD},
         array[address], 8, at, at, at
  from (select g, 'due' || g || '@example.com' as address, ${uuid7('at')} as id, at
        from (select g, $5::timestamptz - interval '1 hour' + (g - 1) * (interval '1 hour' / $4::int) as at
              from generate_series($2::int, $3::int) g) timed) rows`;

const TEXTS = Array.from({ length: 1_024 }, (_, seed) => bodyFor(seed));

async function fill(client: pg.Client, system: ScaleSystem): Promise<void> {
  const started = performance.now();
  for (let from = 1; from <= sentRows; from += FILL_CHUNK) {
    const to = Math.min(sentRows, from + FILL_CHUNK - 1);
    await client.query(fillSent(system.schema), [TEXTS, from, to, sentRows, days, midnight]);
    log(
      `  ${system.name}: ${to.toLocaleString('en-US')} sent rows in ` +
        `${((performance.now() - started) / 1000).toFixed(0)} s`,
    );
  }
  for (let from = 1; from <= dueRows; from += FILL_CHUNK) {
    const to = Math.min(dueRows, from + FILL_CHUNK - 1);
    await client.query(fillDue(system.schema), [TEXTS, from, to, dueRows, new Date()]);
  }
}

// ---- What is read from the server ----

interface Sizes {
  /** Heap, TOAST, free space and visibility maps of the outbox (all its partitions). */
  outboxTable: number;
  outboxIndexes: number;
  attemptTable: number;
  attemptIndexes: number;
}

const totalOf = (sizes: Sizes) => sizes.outboxTable + sizes.outboxIndexes + sizes.attemptTable + sizes.attemptIndexes;

/** The tables that hold the rows of table `$n`: itself, or its partitions (pg_partition_tree lists no plain table). */
const leavesOf = (
  parameter: string,
) => `select oid as relid from pg_class where oid = ${parameter}::regclass and relkind <> 'p'
  union all select relid from pg_partition_tree(${parameter}::regclass) where isleaf`;

async function sizesOf(client: pg.Client, schema: string): Promise<Sizes> {
  const t = tablesIn(schema);
  const sizeOf = async (table: string) => {
    const { rows } = await client.query<{ heap: string; indexes: string }>(
      `select coalesce(sum(pg_table_size(relid)), 0) as heap, coalesce(sum(pg_indexes_size(relid)), 0) as indexes
       from (${leavesOf('$1')}) leaves`,
      [table],
    );
    return { heap: Number(rows[0].heap), indexes: Number(rows[0].indexes) };
  };
  const outbox = await sizeOf(t.outbox);
  const attempt = await sizeOf(t.attempt);
  return {
    outboxTable: outbox.heap,
    outboxIndexes: outbox.indexes,
    attemptTable: attempt.heap,
    attemptIndexes: attempt.indexes,
  };
}

interface DeadRows {
  /** Dead row versions in the outbox and its attempts, over every partition. */
  dead: number;
  /** The most dead row versions of one table (or partition) ÷ the count at which autovacuum takes it on. */
  worstShareOfThreshold: number;
  /** Autovacuums of the outbox and its attempts so far. */
  autovacuums: number;
}

async function deadRowsOf(client: pg.Client, schema: string): Promise<DeadRows> {
  const t = tablesIn(schema);
  // autovacuum_vacuum_threshold + autovacuum_vacuum_scale_factor × reltuples: PostgreSQL's own trigger.
  const { rows } = await client.query<{ dead: string; worst: number | null; autovacuums: string }>(
    `select coalesce(sum(s.n_dead_tup), 0) as dead, coalesce(sum(s.autovacuum_count), 0) as autovacuums,
            max(s.n_dead_tup / (current_setting('autovacuum_vacuum_threshold')::float8
                                + current_setting('autovacuum_vacuum_scale_factor')::float8
                                  * greatest(c.reltuples, 0))) as worst
     from (${leavesOf('$1')} union all ${leavesOf('$2')}) leaves
     join pg_stat_user_tables s on s.relid = leaves.relid join pg_class c on c.oid = leaves.relid`,
    [t.outbox, t.attempt],
  );
  return {
    dead: Number(rows[0].dead),
    worstShareOfThreshold: rows[0].worst ?? 0,
    autovacuums: Number(rows[0].autovacuums),
  };
}

/** Closed rows last changed before `cutoff`, through the closed rows' partial index: what retention takes. */
async function closedBefore(client: pg.Client, schema: string, cutoff: Date): Promise<number> {
  const { rows } = await client.query<{ count: string }>(
    `select count(*) as count from ${tablesIn(schema).outbox}
     where status in ('sent', 'cancelled', 'expired', 'suppressed') and updated_at < $1`,
    [cutoff],
  );
  return Number(rows[0].count);
}

async function walLsn(client: pg.Client): Promise<string> {
  return (await client.query<{ lsn: string }>('select pg_current_wal_lsn() as lsn')).rows[0].lsn;
}

async function walSince(client: pg.Client, lsn: string): Promise<number> {
  const { rows } = await client.query<{ bytes: string }>('select pg_wal_lsn_diff(pg_current_wal_lsn(), $1) as bytes', [
    lsn,
  ]);
  return Number(rows[0].bytes);
}

/** Runs `work` and returns its time (ms) and the WAL written meanwhile, by the whole server. */
async function timedWithWal(client: pg.Client, work: () => Promise<unknown>): Promise<{ ms: number; wal: number }> {
  // A checkpoint first, so that every page the work changes is written to the WAL whole once, as the first change
  // after a checkpoint is: the figure does not depend on when the last one happened.
  await client.query('checkpoint');
  const lsn = await walLsn(client);
  const started = performance.now();
  await work();
  return { ms: performance.now() - started, wal: await walSince(client, lsn) };
}

// ---- The figures of one system ----

interface ClaimFigure {
  p50: number;
  p95: number;
}

interface SystemFigures {
  system: string;
  fillS: number;
  vacuumAnalyzeS: number;
  sizes: Sizes;
  claim: ClaimFigure;
  singlePerS: number;
  batchedPerS: number;
  /** The mails of the simulated day: a day of the history, or the enqueue figures' if they are more. */
  sentToday: number;
  churnS: number;
  claimAfterChurn: ClaimFigure;
  deadAfterChurn: DeadRows;
  /** Outbox and attempts on disk after the day of traffic, less before it. */
  growthFromChurn: number;
  retention: { ms: number; wal: number; deleted: number };
  deadAfterRetention: DeadRows;
  vacuum: { ms: number; wal: number };
  sizesAtEnd: Sizes;
}

/** The dispatcher's claim of `limit` rows of lane default, on the library's pool (prepared, generic plans). */
function claimRequest(limit: number): ClaimRequest {
  return {
    lane: 'default',
    limit,
    lockToken: randomUUID(),
    workerId: 'scale-bench:1',
    leaseMs: 600_000,
    maxAgeMs: 7 * DAY_MS,
  };
}

/** `count` claims of CLAIM_LIMIT rows, each given back unsent at once (the library's release), as a shutdown does. */
async function measureClaims(database: OutboxDatabase, count: number): Promise<ClaimFigure> {
  const times: number[] = [];
  // The first claim prepares and plans the statement on the pool's connection: not counted.
  for (let run = -1; run < count; run++) {
    const started = performance.now();
    const rows = await claimRows(database, claimRequest(CLAIM_LIMIT));
    if (run >= 0) times.push(performance.now() - started);
    if (rows.length < CLAIM_LIMIT) throw new Error(`a claim took ${rows.length} rows, ${CLAIM_LIMIT} were due`);
    await releaseRows(database, rows);
  }
  return { p50: percentile(times, 50)!, p95: percentile(times, 95)! };
}

/** `count` calls of `work(index)` by `producers` at once; returns calls per second. */
async function rate(count: number, producers: number, work: (index: number) => Promise<unknown>): Promise<number> {
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: producers }, async () => {
      for (let index = next++; index < count; index = next++) await work(index);
    }),
  );
  return count / ((performance.now() - started) / 1000);
}

/** Claims and settles `count` rows as sent, CHURN_WORKERS dispatchers at once, through the library's statements. */
async function send(database: OutboxDatabase, count: number): Promise<void> {
  let left = count;
  await Promise.all(
    Array.from({ length: CHURN_WORKERS }, async () => {
      while (left > 0) {
        const limit = Math.min(CHURN_CLAIM_LIMIT, left);
        left -= limit;
        const rows = await claimRows(database, claimRequest(limit));
        if (rows.length === 0) throw new Error('nothing due to send');
        const settlements = rows.map((row) =>
          settleInputOf(
            sentSettlementOf(row, { acceptedRecipients: row.payload.to.map((recipient) => recipient.address) }),
          ),
        );
        await settleRows(database, settlements, 30_000);
      }
    }),
  );
}

async function measure(url: string, system: ScaleSystem): Promise<SystemFigures> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  let app: INestApplicationContext | undefined;
  try {
    const t = tablesIn(system.schema);
    await system.migrate(client);
    const fillStarted = performance.now();
    await phase(`${system.name}: fill`, () => fill(client, system));
    const fillS = (performance.now() - fillStarted) / 1000;
    // A table of a month's mail has long been vacuumed: its pages all-visible and its hint bits set, so that neither
    // the claim nor retention below pays for the fill's fresh pages.
    const vacuumStarted = performance.now();
    await phase(`${system.name}: vacuum analyze`, () => client.query(`vacuum analyze ${t.outbox}, ${t.attempt}`));
    const vacuumAnalyzeS = (performance.now() - vacuumStarted) / 1000;
    const sizes = await sizesOf(client, system.schema);

    app = await startApp(url, system);
    const database = app.get(OutboxDatabase);
    const outbox = app.get(MailOutboxService);
    const claim = await phase(`${system.name}: ${CLAIMS} claims of ${CLAIM_LIMIT}`, () =>
      measureClaims(database, CLAIMS),
    );

    // The simulated day: its first mails are the enqueue figures, the rest enqueued in batches, then as many sent.
    const churnStarted = performance.now();
    const singlePerS = await phase(`${system.name}: ${SINGLE_ENQUEUES} enqueues, 1 per transaction`, () =>
      rate(SINGLE_ENQUEUES, SINGLE_PRODUCERS, (index) => outbox.enqueue(mailFor(index, 'single'))),
    );
    const batch = (start: number, count: number) =>
      outbox.enqueueMany(Array.from({ length: count }, (_, offset) => ({ mail: mailFor(start + offset, 'batched') })));
    const batches = Math.ceil(BATCHED_ENQUEUES / BATCH_SIZE);
    const batchedPerS =
      (await phase(`${system.name}: ${BATCHED_ENQUEUES} enqueues in batches of ${BATCH_SIZE}`, () =>
        rate(batches, BATCH_PRODUCERS, (index) => batch(index * BATCH_SIZE, BATCH_SIZE)),
      )) * BATCH_SIZE;
    const rest = Math.max(0, dayRows - SINGLE_ENQUEUES - batches * BATCH_SIZE);
    await phase(`${system.name}: the rest of a day, ${rest} enqueues in batches`, () =>
      rate(Math.ceil(rest / BATCH_SIZE), BATCH_PRODUCERS, (index) =>
        batch(BATCHED_ENQUEUES + index * BATCH_SIZE, Math.min(BATCH_SIZE, rest - index * BATCH_SIZE)),
      ),
    );
    // At a small BENCH_SCALE_ROWS the enqueue figures alone are more than a day: all of them are sent.
    const sentToday = SINGLE_ENQUEUES + batches * BATCH_SIZE + rest;
    await phase(`${system.name}: a day's ${sentToday} mails claimed and settled sent`, () => send(database, sentToday));
    const churnS = (performance.now() - churnStarted) / 1000;
    const claimAfterChurn = await phase(`${system.name}: claims after the day`, () => measureClaims(database, CLAIMS));
    // Sessions report their counts to the statistics at most once a second, and an idle one within 10 s.
    await sleep(11_000);
    const deadAfterChurn = await deadRowsOf(client, system.schema);
    const growthFromChurn = totalOf(await sizesOf(client, system.schema)) - totalOf(sizes);

    // A day's retention: every row closed before the second oldest day of the history goes, by the library's own
    // path, in an app started now so that its cut-off falls on that day's midnight.
    const cutoff = new Date(midnight.getTime() - (days - 1) * DAY_MS);
    const before = await closedBefore(client, system.schema, cutoff);
    const retentionApp = await startApp(url, system, { keepClosedForMs: Date.now() - cutoff.getTime() });
    let retention: { ms: number; wal: number };
    try {
      retention = await phase(`${system.name}: a day's retention`, () =>
        timedWithWal(client, () => retentionApp.get(OutboxRetention).run()),
      );
    } finally {
      await retentionApp.close();
    }
    const deleted = before - (await closedBefore(client, system.schema, cutoff));
    await sleep(11_000);
    const deadAfterRetention = await deadRowsOf(client, system.schema);
    // What autovacuum would do next, unthrottled: VACUUM of the outbox and its attempts.
    const vacuum = await phase(`${system.name}: vacuum after the day`, () =>
      timedWithWal(client, () => client.query(`vacuum ${t.outbox}, ${t.attempt}`)),
    );
    return {
      system: system.name,
      fillS,
      vacuumAnalyzeS,
      sizes,
      claim,
      singlePerS,
      batchedPerS,
      sentToday,
      churnS,
      claimAfterChurn,
      deadAfterChurn,
      growthFromChurn,
      retention: { ...retention, deleted },
      deadAfterRetention,
      vacuum,
      sizesAtEnd: await sizesOf(client, system.schema),
    };
  } finally {
    await app?.close();
    await client.end();
  }
}

// ---- The run ----

/** Refuses to start when the server's disk cannot take both systems and a day of traffic each, with room to spare. */
async function checkDisk(): Promise<void> {
  const needed = (sentRows + dueRows + dayRows) * BYTES_PER_ROW * SYSTEMS.length;
  const { rows } = await admin.query<{ data_directory: string }>('show data_directory');
  const dataDirectory = rows[0].data_directory;
  let free: number;
  try {
    const disk = statfsSync(dataDirectory);
    free = disk.bavail * disk.bsize;
  } catch (error) {
    log(
      `disk: cannot read the free space at ${dataDirectory} (${String(error)}): a server on another machine? Going on`,
    );
    return;
  }
  log(
    `disk: about ${gb(needed)} GB needed at ${dataDirectory}, ${gb(free)} GB free, ` +
      `${gb(RESERVE_BYTES)} GB left to others`,
  );
  if (free - needed < RESERVE_BYTES) {
    throw new Error(
      `not enough disk: ${gb(needed)} GB needed for ${sentRows.toLocaleString('en-US')} rows in each of ` +
        `${SYSTEMS.length} systems, ${gb(free)} GB free at ${dataDirectory}, of which ${gb(RESERVE_BYTES)} GB stay ` +
        'free; set BENCH_SCALE_ROWS lower',
    );
  }
}

const gb = (bytes: number) => (bytes / 2 ** 30).toFixed(1);
const mb = (bytes: number) => fmt(bytes / 2 ** 20);
const perMillion = (bytes: number) => mb(bytes / ((sentRows + dueRows) / 1_000_000));
const ms = (value: number) => fmt(value, value < 10 ? 2 : 0);

const isPartitioned = (figure: SystemFigures) => SYSTEMS.find((system) => system.name === figure.system)!.partitioned;

function report(figures: SystemFigures[], autovacuum: string): string {
  const row = (label: string, value: (figure: SystemFigures) => string) => [label, ...figures.map(value)];
  const scale = TARGET_ROWS / sentRows;
  const measured = table(
    ['figure', ...figures.map((figure) => figure.system)],
    [
      row('fill, s (sent + due rows and attempts)', (f) => fmt(f.fillS)),
      row('vacuum analyze after the fill, s', (f) => fmt(f.vacuumAnalyzeS)),
      row('outbox row, bytes (table ÷ rows)', (f) => fmt(f.sizes.outboxTable / (sentRows + dueRows))),
      row('outbox table, MB per million rows', (f) => perMillion(f.sizes.outboxTable)),
      row('outbox indexes, MB per million rows', (f) => perMillion(f.sizes.outboxIndexes)),
      row('attempts table / indexes, MB per million rows', (f) =>
        [f.sizes.attemptTable, f.sizes.attemptIndexes].map(perMillion).join(' / '),
      ),
      row('all of it, GB', (f) => gb(totalOf(f.sizes))),
      row(`claim of ${CLAIM_LIMIT}, p50 / p95 ms`, (f) => `${ms(f.claim.p50)} / ${ms(f.claim.p95)}`),
      row(`enqueue 1 per tx, /s (${SINGLE_PRODUCERS} at once)`, (f) => fmt(f.singlePerS)),
      row(`enqueue ×${BATCH_SIZE}, /s (${BATCH_PRODUCERS} at once)`, (f) => fmt(f.batchedPerS)),
      row('a day: mails enqueued, then sent / s', (f) => `${fmt(f.sentToday)} / ${fmt(f.churnS)}`),
      row('claim after the day, p50 / p95 ms', (f) => `${ms(f.claimAfterChurn.p50)} / ${ms(f.claimAfterChurn.p95)}`),
      row('dead row versions after the day', (f) => fmt(f.deadAfterChurn.dead)),
      row('… most of one table ÷ its autovacuum trigger', (f) => fmt(f.deadAfterChurn.worstShareOfThreshold, 2)),
      row('autovacuums of outbox and attempts so far', (f) => fmt(f.deadAfterChurn.autovacuums)),
      row('growth on disk from the day, MB', (f) => mb(f.growthFromChurn)),
      row("a day's retention: rows gone", (f) => fmt(f.retention.deleted)),
      row("a day's retention: s / WAL MB", (f) => `${fmt(f.retention.ms / 1000, 1)} / ${mb(f.retention.wal)}`),
      row('dead row versions after retention', (f) => fmt(f.deadAfterRetention.dead)),
      row('vacuum then: s / WAL MB', (f) => `${fmt(f.vacuum.ms / 1000, 1)} / ${mb(f.vacuum.wal)}`),
      row('all of it at the end, GB', (f) => gb(totalOf(f.sizesAtEnd))),
    ],
  );
  const extrapolated = table(
    [
      `EXTRAPOLATED to ${TARGET_ROWS.toLocaleString('en-US')} rows (×${fmt(scale, 1)})`,
      ...figures.map((f) => f.system),
    ],
    [
      row('outbox table, GB (linear)', (f) => gb(f.sizes.outboxTable * scale)),
      row('outbox indexes, GB (linear)', (f) => gb(f.sizes.outboxIndexes * scale)),
      row('attempts table + indexes, GB (linear)', (f) => gb((f.sizes.attemptTable + f.sizes.attemptIndexes) * scale)),
      row('dead row versions after a day (linear in its mails)', (f) =>
        fmt((f.deadAfterChurn.dead * TARGET_DAY) / f.sentToday),
      ),
      row("a day's retention, s / WAL GB", (f) => {
        const factor = isPartitioned(f) ? 1 : TARGET_DAY / f.retention.deleted;
        return `${fmt((f.retention.ms / 1000) * factor, 1)} / ${gb(f.retention.wal * factor)}`;
      }),
      row('vacuum after a day, s / WAL GB', (f) => {
        const factor = isPartitioned(f) ? TARGET_DAY / f.sentToday : scale;
        return `${fmt((f.vacuum.ms / 1000) * factor)} / ${gb(f.vacuum.wal * factor)}`;
      }),
    ],
  );
  return [
    `${sentRows.toLocaleString('en-US')} sent rows over ${days} days + ${dueRows.toLocaleString('en-US')} due; ` +
      `a day = ${dayRows.toLocaleString('en-US')} mails; autovacuum ${autovacuum}; ` +
      "WAL is the whole server's",
    '',
    measured,
    '',
    extrapolated,
    '',
    'Extrapolated, not measured: sizes linearly with the rows, dead rows with the mails of a day; unpartitioned,',
    'retention with the rows it deletes (10,000,000 a day) and vacuum with all the rows (it reads every index whole);',
    "partitioned, retention as measured (a day's partitions dropped whatever they hold) and vacuum with a day's rows.",
    'Claim and enqueue times are taken as measured: the claim reads the partial indexes of due rows, and enqueues',
    'write at the right-hand edge of time-ordered keys.',
  ].join('\n');
}

async function main(): Promise<void> {
  log(
    `bench:scale: ${sentRows.toLocaleString('en-US')} sent rows over ${days} days, ` +
      `${dueRows.toLocaleString('en-US')} due, systems ${SYSTEMS.map((system) => system.name).join(', ')}`,
  );
  await checkDisk();
  const autovacuum = (await admin.query<{ autovacuum: string }>('show autovacuum')).rows[0].autovacuum;
  const url = await createDatabase(DATABASE);
  try {
    const figures: SystemFigures[] = [];
    for (const system of SYSTEMS) figures.push(await measure(url, system));
    log(`\n${report(figures, autovacuum)}`);
  } finally {
    // BENCH_SCALE_KEEP=1 keeps the database for a look at it afterwards.
    if (!process.env.BENCH_SCALE_KEEP) await dropDatabase(DATABASE);
  }
}

let stopping = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    stopping = true;
    log(`\n${signal}: dropping ${DATABASE}`);
    void dropDatabase(DATABASE)
      .catch(() => undefined)
      .finally(() => process.exit(130));
  });
}

try {
  await main();
} catch (error) {
  log(`bench:scale failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  process.exitCode = 1;
} finally {
  if (!stopping) await admin.end();
}
