// Claim time: EXPLAIN (ANALYZE, BUFFERS) of reliable-mail's claim statement on an empty outbox, then on one with
// `claimRows` sent rows (and their attempts) plus a tenth as many due rows, each run in a transaction that is
// rolled back. The SQL is the library's own CLAIM statement, so it is always the current one.
import { randomUUID } from 'node:crypto';
import { MikroORM } from '@mikro-orm/postgresql';
import pg from 'pg';
import { CONNECTION_SETTINGS } from '../libs/reliable-mail/src/database/outbox-database.js';
import { CLAIM, claimValues } from '../libs/reliable-mail/src/outbox/sql/claim.js';
import { bodyFor, now, percentile } from './common.js';
import { ormConfig } from './reliable-mail-config.js';
import { DEFAULT_SCHEMA, tablesIn } from '../libs/reliable-mail/src/schema/outbox-tables.js';

export interface ClaimMeasurement {
  label: string;
  limit: number;
  /** Median of the measured runs. */
  executionMs: number;
  planningMs: number;
  /** Wall time of the statement itself (no EXPLAIN), median, client side. */
  wallMs: number;
  rowsClaimed: number;
  sharedHit: number;
  sharedRead: number;
  runs: number[];
}

export interface ClaimResult {
  sql: string;
  empty: ClaimMeasurement[];
  /** The due rows alone, before any sent row is added: against `loaded`, what a million sent rows cost the claim. */
  dueOnly: ClaimMeasurement[];
  loaded: ClaimMeasurement[];
  /** Loaded, with `suppressions` addresses on the suppression list. */
  withSuppressions: ClaimMeasurement[];
  suppressions: number;
  sentRows: number;
  dueRows: number;
  populateMs: number;
  analyzeMs: number;
  tableSizes: Record<string, string>;
  planText: { empty: string; loaded: string; withSuppressions: string | null };
}

/** The claim statement exactly as the dispatcher sends it, with its parameters. */
function claimStatement(lane: string, limit: number): { sql: string; params: unknown[] } {
  const request = {
    lane,
    limit,
    lockToken: randomUUID(),
    workerId: 'bench-claim:1',
    leaseMs: 600_000,
    maxAgeMs: 86_400_000,
  };
  return { sql: CLAIM.in(tablesIn(DEFAULT_SCHEMA)).text, params: claimValues(request) };
}

/** Inlines the `$n` parameters, so that EXPLAIN can run the statement as it is planned with them. */
function inline(sql: string, params: unknown[]): string {
  return sql.replace(/\$(\d+)/g, (_placeholder, position: string) => {
    const value = params[Number(position) - 1];
    if (typeof value === 'number') return String(value);
    if (typeof value === 'string') return `'${value.replace(/'/g, "''")}'`;
    // The lane's unsubscribe category, none for a transactional lane: each use of it in the statement is cast.
    if (value === null) return 'null';
    throw new Error(`unexpected parameter ${JSON.stringify(value)}`);
  });
}

function claimSql(limit: number): string {
  const { sql, params } = claimStatement('default', limit);
  return inline(sql, params);
}

interface PlanNode {
  'Actual Rows'?: number;
  'Shared Hit Blocks'?: number;
  'Shared Read Blocks'?: number;
}

async function measure(
  client: pg.Client,
  label: string,
  limit: number,
  runs = 5,
): Promise<{ measurement: ClaimMeasurement; planText: string }> {
  const sql = claimSql(limit);
  const explained: { execution: number; planning: number; rows: number; hit: number; read: number }[] = [];
  const wall: number[] = [];
  for (let run = 0; run <= runs; run++) {
    await client.query('begin');
    try {
      const { rows } = await client.query(`explain (analyze, buffers, format json) ${sql}`);
      const [plan] = rows[0]['QUERY PLAN'] as { Plan: PlanNode; 'Execution Time': number; 'Planning Time': number }[];
      if (run > 0) {
        explained.push({
          execution: plan['Execution Time'],
          planning: plan['Planning Time'],
          rows: plan.Plan['Actual Rows'] ?? 0,
          hit: plan.Plan['Shared Hit Blocks'] ?? 0,
          read: plan.Plan['Shared Read Blocks'] ?? 0,
        });
      }
    } finally {
      await client.query('rollback');
    }
    await client.query('begin');
    try {
      const started = performance.now();
      await client.query(sql);
      if (run > 0) wall.push(performance.now() - started);
    } finally {
      await client.query('rollback');
    }
  }
  await client.query('begin');
  let planText: string;
  try {
    const { rows } = await client.query(`explain (analyze, buffers) ${sql}`);
    planText = rows.map((row) => row['QUERY PLAN']).join('\n');
  } finally {
    await client.query('rollback');
  }
  const median = (values: number[]) => +(percentile(values, 50) ?? 0).toFixed(3);
  return {
    measurement: {
      label,
      limit,
      executionMs: median(explained.map((e) => e.execution)),
      planningMs: median(explained.map((e) => e.planning)),
      wallMs: median(wall),
      rowsClaimed: explained[0]?.rows ?? 0,
      sharedHit: explained[0]?.hit ?? 0,
      sharedRead: explained[0]?.read ?? 0,
      runs: explained.map((e) => +e.execution.toFixed(3)),
    },
    planText,
  };
}

const PAYLOAD_SQL = `jsonb_build_object(
  'v', 1, 'from', jsonb_build_object('address', 'bench@example.com'),
  'to', jsonb_build_array(jsonb_build_object('address', 'user' || g || '@example.com')),
  'cc', '[]'::jsonb, 'bcc', '[]'::jsonb, 'replyTo', '[]'::jsonb,
  'subject', 'Bench #' || g, 'text', $1::text, 'headers', '{}'::jsonb)`;

/** A time-ordered id like the library's uuidv7: 48 bits of milliseconds, then hash bits. */
const UUID7_SQL = (ts: string, seed = 'g::text') =>
  `(lpad(to_hex((extract(epoch from ${ts}) * 1000)::bigint), 12, '0') || '7' || substr(md5(${seed}), 1, 3) || '8' || substr(md5(${seed}), 4, 15))::uuid`;

export async function runClaimBenchmark(
  databaseUrl: string,
  sentRows: number,
  suppressions: number,
  deadline: number,
  log: (line: string) => void,
): Promise<ClaimResult> {
  const orm = await MikroORM.init(ormConfig(databaseUrl));
  try {
    await orm.migrator.up();
  } finally {
    await orm.close();
  }
  // Run under the dispatcher's own connection settings (sequential scans off among them), though with the parameters
  // inlined, so planned for their values rather than generically as the dispatcher's prepared claim is. With the
  // defaults, a suppression list of 1,000 analysed addresses was read whole for each claimed row, 12 pages each
  // (limit 64 at 20,000 sent rows: 39.5 ms and 2,278 buffers, against 6.5 ms and 1,638).
  const client = new pg.Client({ connectionString: databaseUrl, options: CONNECTION_SETTINGS });
  await client.connect();
  try {
    const remaining = () => Math.max(1_000, Math.round(deadline - now()));
    await client.query(`set statement_timeout = ${remaining()}`);
    const empty = [await measure(client, 'empty', 64), await measure(client, 'empty', 1)];
    log(`  claim on an empty outbox: ${empty[0].measurement.executionMs} ms (limit 64)`);

    const dueRows = Math.max(1, Math.round(sentRows / 10));
    // One fixed instant for both inserts of a chunk, so that an attempt's outbox_id matches its row's id.
    const base = `'${new Date().toISOString()}'::timestamptz`;
    const body = bodyFor(1);
    const populateStarted = performance.now();
    await client.query(`set statement_timeout = ${remaining()}`);
    await client.query(
      `insert into reliable_mail.mail_outbox (id, content_hash, message_id, status, lane, payload, max_attempts, next_attempt_at, created_at, updated_at)
       select ${UUID7_SQL(`${base} - interval '1 hour' + g * interval '1 millisecond'`)}, md5('due' || g), '<due-' || g || '@bench.example.com>',
              'pending', 'default', ${PAYLOAD_SQL}, 8, ${base} - interval '1 hour' + g * interval '1 millisecond',
              ${base} - interval '1 hour' + g * interval '1 millisecond', ${base} - interval '1 hour' + g * interval '1 millisecond'
       from generate_series(${sentRows + 1}::int, ${sentRows + dueRows}::int) g`,
      [body],
    );
    await client.query('analyze reliable_mail.mail_outbox, reliable_mail.mail_outbox_attempt');
    const dueOnly = [await measure(client, 'due', 64), await measure(client, 'due', 1)];
    log(
      `  claim with ${dueRows.toLocaleString('en-US')} due rows and no sent row: ${dueOnly[0].measurement.executionMs} ms (limit 64)`,
    );
    const chunk = 100_000;
    for (let from = 1; from <= sentRows; from += chunk) {
      const to = Math.min(sentRows, from + chunk - 1);
      await client.query(`set statement_timeout = ${remaining()}`);
      await client.query(
        `insert into reliable_mail.mail_outbox (id, content_hash, message_id, status, lane, payload, max_attempts, attempts, next_attempt_at,
                                  created_at, sent_at, updated_at, provider_reply, provider_message_id)
         select ${UUID7_SQL(`${base} - interval '30 days' + g * interval '1 second'`)}, md5(g::text),
                '<sent-' || g || '@bench.example.com>', 'sent', (array['default', 'bulk', 'critical'])[1 + g % 3],
                ${PAYLOAD_SQL}, 8, 1, ${base} - interval '30 days' + g * interval '1 second',
                ${base} - interval '30 days' + g * interval '1 second', ${base} - interval '30 days' + g * interval '1 second' + interval '2 seconds',
                ${base} - interval '30 days' + g * interval '1 second' + interval '2 seconds', '250 OK: queued', 'provider-' || g
         from generate_series(${from}::int, ${to}::int) g`,
        [body],
      );
      await client.query(
        `insert into reliable_mail.mail_outbox_attempt (id, outbox_id, attempt, worker_id, lock_token, started_at, finished_at, outcome, reply_code, reply, duration_ms)
         select ${UUID7_SQL(`${base} - interval '30 days' + g * interval '1 second'`, `'attempt' || g`)},
                ${UUID7_SQL(`${base} - interval '30 days' + g * interval '1 second'`)}, 1, 'bench:1', gen_random_uuid(),
                ${base} - interval '30 days' + g * interval '1 second', ${base} - interval '30 days' + g * interval '1 second' + interval '2 seconds',
                'sent', 250, '250 OK: queued', 40
         from generate_series(${from}::int, ${to}::int) g`,
      );
      log(
        `  populated ${to.toLocaleString('en-US')} / ${sentRows.toLocaleString('en-US')} sent rows (+ attempts) in ${((performance.now() - populateStarted) / 1000).toFixed(1)} s`,
      );
    }
    const populateMs = performance.now() - populateStarted;
    log(
      `  populated ${sentRows.toLocaleString('en-US')} sent + ${dueRows.toLocaleString('en-US')} due rows in ${(populateMs / 1000).toFixed(1)} s`,
    );
    const analyzeStarted = performance.now();
    await client.query(
      'analyze reliable_mail.mail_outbox, reliable_mail.mail_outbox_attempt, reliable_mail.mail_suppression',
    );
    const analyzeMs = performance.now() - analyzeStarted;
    const { rows: sizes } = await client.query<{ name: string; size: string }>(
      `select c.relname as name, pg_size_pretty(pg_total_relation_size(c.oid)) as size from pg_class c
       where c.relname in ('mail_outbox', 'mail_outbox_attempt', 'mail_outbox_due_index', 'mail_outbox_lease_index', 'mail_outbox_pkey')`,
    );
    await client.query(`set statement_timeout = ${remaining()}`);
    const loaded = [await measure(client, 'loaded', 64), await measure(client, 'loaded', 1)];
    log(
      `  claim with ${sentRows.toLocaleString('en-US')} sent + ${dueRows.toLocaleString('en-US')} due rows: ${loaded[0].measurement.executionMs} ms (limit 64)`,
    );
    let suppressed: typeof loaded = [];
    if (suppressions > 0) {
      await client.query(
        `insert into reliable_mail.mail_suppression (address, reason, source)
         select 'bounced' || g || '@example.com', '550 5.1.1 no such user', 'bounce' from generate_series(1, $1::int) g`,
        [suppressions],
      );
      await client.query('analyze reliable_mail.mail_suppression');
      suppressed = [await measure(client, 'loaded+suppressions', 64), await measure(client, 'loaded+suppressions', 1)];
      log(
        `  the same with ${suppressions.toLocaleString('en-US')} addresses on the suppression list: ${suppressed[0].measurement.executionMs} ms (limit 64)`,
      );
    }
    return {
      sql: claimSql(64),
      empty: empty.map((m) => m.measurement),
      dueOnly: dueOnly.map((m) => m.measurement),
      loaded: loaded.map((m) => m.measurement),
      withSuppressions: suppressed.map((m) => m.measurement),
      suppressions,
      sentRows,
      dueRows,
      populateMs,
      analyzeMs,
      tableSizes: Object.fromEntries(sizes.map((row) => [row.name, row.size])),
      planText: {
        empty: empty[0].planText,
        loaded: loaded[0].planText,
        withSuppressions: suppressed[0]?.planText ?? null,
      },
    };
  } finally {
    await client.end();
  }
}
