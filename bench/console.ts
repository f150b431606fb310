// npm run bench:console: the web console's reads on an outbox of BENCH_CONSOLE_ROWS rows (1,000,000 by default),
// each run ~50 times with varied parameters through ConsoleReader: p50/p95 per query, and the EXPLAIN (ANALYZE,
// BUFFERS) lines of each statement that show its scans. A database of its own on the server BENCH_PG_URL (or
// DATABASE_URL) names, dropped at the end. The rows: a week of mail, mostly sent, a backlog of pending rows, some
// failed, dead, cancelled, expired and suppressed; 1 to 3 recipients; metadata { orderId, tenant }; attempts, some
// feedback, unconfirmed events, audit entries and instances.
import 'reflect-metadata';
import pg from 'pg';
import { ConsoleReader } from '../libs/reliable-mail/src/console/console-reader.js';
import type { ConsoleFilter } from '../libs/reliable-mail/src/console/console-data.types.js';
import type { SqlClient } from '../libs/reliable-mail/src/database/sql-client.js';
import type { MailOutboxService } from '../libs/reliable-mail/src/outbox/mail-outbox.service.js';
import { migrateSchema, migrationConnection } from '../libs/reliable-mail/src/schema/migrate-schema.js';
import { DEFAULT_SCHEMA, tablesIn } from '../libs/reliable-mail/src/schema/outbox-tables.js';
import { bodyFor, percentile } from './common.js';

const ROWS = Number(process.env.BENCH_CONSOLE_ROWS ?? 1_000_000);
const RUNS = Number(process.env.BENCH_CONSOLE_RUNS ?? 50);
const PENDING = Math.round(ROWS / 50);
const SENDING = 64;
const CUSTOMERS = Math.max(1, Math.round(ROWS / 5));
const tables = tablesIn(DEFAULT_SCHEMA);

function serverUrl(database: string): string {
  const url = new URL(process.env.BENCH_PG_URL ?? process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432');
  url.pathname = `/${database}`;
  return url.toString();
}

/** A time-ordered id as the library makes them: 48 bits of milliseconds, then bits of a hash of `seed`. */
const uuid7 = (time: string, seed: string) =>
  `(lpad(to_hex(floor(extract(epoch from ${time}) * 1000)::bigint), 12, '0') || '7' || substr(md5(${seed}), 1, 3)
    || '8' || substr(md5(${seed}), 4, 15))::uuid`;

/** Row g's creation: a week of rows, the newest now. */
const CREATED = `($2::timestamptz - ($1::int - g) * (interval '7 days' / $1::int))`;

const STATUS = `case when g > $1::int - ${SENDING} then 'sending'
  when g > $1::int - ${PENDING} then 'pending'
  when (g * 7919) % 1000 < 5 then 'dead' when (g * 7919) % 1000 < 15 then 'failed'
  when (g * 7919) % 1000 < 17 then 'cancelled' when (g * 7919) % 1000 < 18 then 'expired'
  when (g * 7919) % 1000 < 23 then 'suppressed' else 'sent' end`;

const POPULATE_OUTBOX = `insert into ${tables.outbox} (id, idempotency_key, message_id, status, lane, payload, metadata,
    attempts, max_attempts, next_attempt_at, last_error, provider_message_id, provider_message_ids, created_at,
    sent_at, updated_at, traceparent, recipients)
  select id, case when g % 4 = 0 then 'order-' || g end, '<' || id || '@bench.example.com>', status,
    case when g % 20 = 0 then 'critical' when g % 20 < 6 then 'bulk' else 'default' end,
    jsonb_build_object('v', 1, 'from', jsonb_build_object('address', 'bench@example.com'),
      'to', jsonb_build_array(jsonb_build_object('address',
              case when g % 7 = 0 then 'Customer' else 'customer' end || (g % ${CUSTOMERS}) || '@Example.com')),
      'cc', case when g % 3 = 0 then jsonb_build_array(jsonb_build_object('address', 'support' || (g % 1000) || '@example.org'))
                 else '[]'::jsonb end,
      'bcc', case when g % 10 = 0 then '[{"address": "audit@example.com"}]'::jsonb else '[]'::jsonb end,
      'replyTo', '[]'::jsonb, 'headers', '{}'::jsonb, 'subject', 'Your order #' || g, 'text', $3::text),
    case when (g * 7919) % 10 <> 9 then jsonb_build_object('orderId', g, 'tenant', 'tenant-' || (g % 50)) end,
    case status when 'pending' then (g % 10 = 0)::int when 'dead' then 3 when 'sent' then 1 + (g % 20 = 0)::int else 1 end,
    8, case when status = 'pending' and g % 10 = 0 then $2::timestamptz + interval '10 minutes' else created end,
    case status when 'failed' then '550 5.1.1 no such user' when 'dead' then '421 4.7.0 try again later' end,
    case when status = 'sent' then 'provider-' || g end,
    case when status = 'sent' and g % 10 = 0 then array['ses-' || g || '-a', 'ses-' || g || '-b'] end,
    created, case when status = 'sent' then created + latency end,
    case when status in ('pending', 'sending') then created else created + latency end,
    '00-' || md5(g::text) || '-' || substr(md5('span' || g), 1, 16) || '-01',
    array_remove(array[lower(case when g % 7 = 0 then 'Customer' else 'customer' end || (g % ${CUSTOMERS}) || '@Example.com'),
      case when g % 3 = 0 then 'support' || (g % 1000) || '@example.org' end,
      case when g % 10 = 0 then 'audit@example.com' end], null)
  from (select g, ${CREATED} as created, ${uuid7(CREATED, 'g::text')} as id, ${STATUS} as status,
               (200 + g * 13 % 5000) * interval '1 millisecond' as latency
        from generate_series($4::bigint, $5::bigint) g) r`;

/** Each attempt of a row: the last ends as the row did, the ones before in a retry. */
const POPULATE_ATTEMPTS = `insert into ${tables.attempt} (id, outbox_id, attempt, worker_id, lock_token, started_at,
    finished_at, outcome, reply_code, reply, duration_ms)
  select ${uuid7(`o.created_at + (n - 1) * interval '1 minute'`, `o.id::text || n`)}, o.id, n, 'bench:1', gen_random_uuid(),
    o.created_at + (n - 1) * interval '1 minute',
    case when o.status <> 'sending' then o.created_at + (n - 1) * interval '1 minute' + interval '150 milliseconds' end,
    case when o.status = 'sending' then 'started' when n < o.attempts or o.status in ('pending', 'dead') then 'transient'
         when o.status = 'sent' then 'sent' else 'permanent' end,
    case when o.status = 'sent' and n = o.attempts then 250 else 451 end, '250 OK', 150
  from ${tables.outbox} o cross join generate_series(1, o.attempts) n
  where o.id >= $1::uuid and o.id < $2::uuid`;

const POPULATE_FEEDBACK = `insert into ${tables.feedback} (id, outbox_id, source, recipient, kind, bounce_type,
    provider_event_id, provider_message_id, reported_at, received_at, payload)
  select ${uuid7(`o.sent_at + interval '5 seconds'`, `'feedback' || o.id`)}, o.id, 'ses', lower(o.payload->'to'->0->>'address'),
    kind, case when kind = 'bounced' then 'hard' end, 'event-' || o.id, o.provider_message_id,
    o.sent_at + interval '4 seconds', o.sent_at + interval '5 seconds', '{}'::jsonb
  from (select o.*, case when (o.attempts + get_byte(uuid_send(o.id), 15)) % 20 = 0 then 'delivered'
                         when get_byte(uuid_send(o.id), 14) < 2 then 'bounced'
                         when get_byte(uuid_send(o.id), 13) = 0 then 'complained' end as kind
        from ${tables.outbox} o where o.status = 'sent') o
  where kind is not null`;

async function populate(client: pg.Client): Promise<void> {
  const base = new Date().toISOString();
  const body = bodyFor(1);
  const started = performance.now();
  const chunk = 100_000;
  for (let from = 1; from <= ROWS; from += chunk) {
    const to = Math.min(ROWS, from + chunk - 1);
    await client.query(POPULATE_OUTBOX, [ROWS, base, body, from, to]);
    process.stdout.write(
      `\r  outbox rows ${to.toLocaleString('en-US')} (${((performance.now() - started) / 1000).toFixed(0)} s)`,
    );
  }
  const { rows: bounds } = await client.query<{ id: string }>(
    `select id from (select id, row_number() over (order by id) as n from ${tables.outbox}) r
     where n % ${chunk} = 1 order by id`,
  );
  const edges = [...bounds.map((row) => row.id), 'ffffffff-ffff-ffff-ffff-ffffffffffff'];
  for (let index = 0; index + 1 < edges.length; index++) {
    await client.query(POPULATE_ATTEMPTS, [edges[index], edges[index + 1]]);
  }
  await client.query(POPULATE_FEEDBACK);
  // Events of the newest sent rows that no listener confirmed yet, audit entries naming up to 20 rows each, the
  // suppression list, and three instances (one of them gone).
  await client.query(
    `insert into ${tables.event} (outbox_id, name, payload, locked_until)
     select id, 'email.sent', '{}'::jsonb, updated_at + interval '1 minute'
     from ${tables.outbox} where status = 'sent' order by id desc limit 2000`,
  );
  await client.query(
    `insert into ${tables.audit} (id, actor, action, reason, filter, outbox_ids, created_at)
     select ${uuid7(`now() - (2000 - a) * interval '5 minutes'`, `'audit' || a`)}, 'ops@example.com', 'requeue', 'bench',
            jsonb_build_object('status', 'dead'),
            array(select dead.ids[1 + (a * 31 + k * 7) % cardinality(dead.ids)] from generate_series(0, a % 20) k),
            now() - (2000 - a) * interval '5 minutes'
     from generate_series(1, 2000) a, (select array_agg(id) as ids from ${tables.outbox} where status = 'dead') dead`,
  );
  await client.query(
    `insert into ${tables.suppression} (address, reason, source)
     select 'bounced' || s || '@example.com', '550 5.1.1 no such user', 'bounce' from generate_series(1, 10000) s`,
  );
  await client.query(
    `insert into ${tables.instance} (id, host, pid, started_at, heartbeat_at, heartbeat_ms, lanes)
     select 'bench-' || i, 'host-' || i, 1000 + i, now() - interval '1 day', now() - (case when i = 3 then 300 else 5 end) * interval '1 second', 10000,
            '{"default": {"state": "running", "reason": null, "until": null, "inFlight": 4}}'::jsonb
     from generate_series(1, 3) i`,
  );
  console.log(`\n  populated in ${((performance.now() - started) / 1000).toFixed(0)} s`);
  const vacuumed = performance.now();
  await client.query('vacuum analyze');
  console.log(`  vacuum analyze in ${((performance.now() - vacuumed) / 1000).toFixed(0)} s`);
}

/** A SqlClient on a pool that keeps what ran last, to EXPLAIN it afterwards with the same values. */
function recordingClient(pool: pg.Pool) {
  const ran: Array<{ text: string; values: unknown[] }> = [];
  const db: SqlClient = {
    query: async <R>(statement: Parameters<SqlClient['query']>[0], values: readonly unknown[]) => {
      const { text } = statement.in(tables);
      ran.push({ text, values: [...values] });
      return (await pool.query<R & pg.QueryResultRow>(text, [...values])).rows;
    },
  };
  return { db, ran };
}

/** The plan's lines that name a scan, and the times: which index each statement took, and what it cost. */
async function planLines(pool: pg.Pool, text: string, values: unknown[]): Promise<string[]> {
  const { rows } = await pool.query<{ 'QUERY PLAN': string }>(`explain (analyze, buffers) ${text}`, values);
  const lines = rows.map((row) => row['QUERY PLAN']);
  const scans = lines.filter((line) => /Scan|Result|Limit|One-Time/.test(line)).slice(0, 9);
  return [...scans, ...lines.filter((line) => /^(Planning|Execution) Time/.test(line))];
}

interface Case {
  name: string;
  run: (index: number) => Promise<unknown>;
}

async function measure(pool: pg.Pool, ran: Array<{ text: string; values: unknown[] }>, cases: Case[]) {
  const results: Array<{ name: string; p50: number; p95: number; plans: string[][] }> = [];
  for (const { name, run } of cases) {
    await run(RUNS); // warm: the pool's connections, the pages of the first read
    const times: number[] = [];
    for (let index = 0; index < RUNS; index++) {
      const started = performance.now();
      await run(index);
      times.push(performance.now() - started);
    }
    ran.length = 0;
    await run(RUNS + 1);
    const plans = [];
    for (const { text, values } of ran.splice(0)) plans.push(await planLines(pool, text, values));
    const result = { name, p50: percentile(times, 50)!, p95: percentile(times, 95)! };
    console.log(
      `${name.padEnd(44)} p50 ${result.p50.toFixed(1).padStart(6)} ms   p95 ${result.p95.toFixed(1).padStart(6)} ms`,
    );
    for (const plan of plans) console.log(plan.map((line) => `      ${line}`).join('\n'));
    results.push({ ...result, plans });
  }
  return results;
}

async function main(): Promise<void> {
  const name = `bench_console_${process.pid}`;
  const admin = new pg.Client({ connectionString: serverUrl('postgres') });
  await admin.connect();
  await admin.query(`create database ${name}`);
  const pool = new pg.Pool({ connectionString: serverUrl(name), max: 6 });
  // The drop at the end ends the pool's connections that are still closing.
  pool.on('error', () => undefined);
  try {
    const client = new pg.Client({ connectionString: serverUrl(name) });
    client.on('error', () => undefined);
    await client.connect();
    await migrateSchema(migrationConnection(client));
    console.log(`console benchmark: ${ROWS.toLocaleString('en-US')} rows, ${RUNS} runs per query`);
    await populate(client);
    const { rows: sizes } = await client.query<{ relname: string; size: string }>(
      `select relname, pg_size_pretty(pg_relation_size(c.oid)) as size from pg_class c
       join pg_namespace n on n.oid = c.relnamespace where n.nspname = '${DEFAULT_SCHEMA}' and c.relkind in ('r', 'i')
       order by pg_relation_size(c.oid) desc`,
    );
    console.log(`  sizes: ${sizes.map((row) => `${row.relname} ${row.size}`).join(', ')}`);
    const { rows: ids } = await client.query<{ id: string; provider_message_id: string | null; ses: string | null }>(
      `select id, provider_message_id, provider_message_ids[1] as ses from ${tables.outbox}
       where get_byte(uuid_send(id), 15) < 3 and provider_message_ids is not null limit 200`,
    );
    const { rows: audited } = await client.query<{ id: string }>(
      `select distinct unnest(outbox_ids) as id from ${tables.audit} limit 100`,
    );
    const { rows: sentRows } = await client.query<{ sent: string }>(
      `select count(*) as sent from ${tables.outbox} where status = 'sent'`,
    );
    await client.end();

    const { db, ran } = recordingClient(pool);
    const reader = new ConsoleReader({ statements: async () => db } as unknown as MailOutboxService);
    const pick = <T>(values: T[], index: number): T => values[(index * 7) % values.length];
    const customer = (index: number) =>
      `${index % 2 ? 'CUSTOMER' : 'customer'}${(index * 3_989) % CUSTOMERS}@example.COM`;
    const day = 86_400_000;
    const now = Date.now();
    const mails = (filter: (index: number) => ConsoleFilter) => (index: number) => reader.mails(filter(index));
    let next: string | null = null;
    const cases: Case[] = [
      { name: 'overview(6)', run: () => reader.overview(6) },
      { name: 'overview(24)', run: () => reader.overview(24) },
      { name: 'mails: no filter', run: mails(() => ({})) },
      {
        name: 'mails: page after page (next)',
        run: async () => {
          const page = await reader.mails({}, next ? { before: next } : {});
          next = page.next;
        },
      },
      { name: 'mails: status dead', run: mails(() => ({ status: 'dead' })) },
      { name: 'mails: status cancelled', run: mails(() => ({ status: 'cancelled' })) },
      { name: 'mails: status pending', run: mails(() => ({ status: 'pending' })) },
      { name: 'mails: status failed, lane critical', run: mails(() => ({ status: 'failed', lane: 'critical' })) },
      { name: 'mails: lane bulk', run: mails(() => ({ lane: 'bulk' })) },
      { name: 'mails: recipient (to, any case)', run: mails((i) => ({ recipient: customer(i) })) },
      {
        name: 'mails: recipient (cc, ~330 mails)',
        run: mails((i) => ({ recipient: `support${(i * 37) % 1000}@example.org` })),
      },
      { name: 'mails: recipient (bcc of 1 in 10)', run: mails(() => ({ recipient: 'AUDIT@example.com' })) },
      { name: 'mails: idempotency key', run: mails((i) => ({ idempotencyKey: `order-${(i * 104_729) % ROWS}` })) },
      { name: 'mails: metadata orderId', run: mails((i) => ({ metadata: { orderId: (i * 104_729) % ROWS } })) },
      { name: 'mails: metadata tenant (1 in 50)', run: mails((i) => ({ metadata: { tenant: `tenant-${i % 50}` } })) },
      {
        name: 'mails: tenant and status dead',
        run: mails((i) => ({ metadata: { tenant: `tenant-${i % 50}` }, status: 'dead' })),
      },
      {
        name: 'mails: createdAfter (0-7 days ago)',
        run: mails((i) => ({ createdAfter: new Date(now - ((i % 7) + 0.5) * day) })),
      },
      {
        name: 'mails: createdBefore (0-7 days ago)',
        run: mails((i) => ({ createdBefore: new Date(now - ((i % 7) + 0.5) * day) })),
      },
      {
        name: 'mails: an hour 1-6 days ago, status dead',
        run: mails((i) => ({
          status: 'dead',
          createdAfter: new Date(now - ((i % 6) + 1) * day),
          createdBefore: new Date(now - ((i % 6) + 1) * day + 3_600_000),
        })),
      },
      { name: 'mails: messageId', run: mails((i) => ({ messageId: `<${pick(ids, i).id}@bench.example.com>` })) },
      {
        name: 'mails: providerMessageId',
        run: mails((i) => ({ providerMessageId: pick(ids, i).provider_message_id ?? 'none' })),
      },
      {
        name: 'mails: providerMessageId (request id)',
        run: mails((i) => ({ providerMessageId: pick(ids, i).ses ?? 'none' })),
      },
      { name: 'timeline', run: (i) => reader.timeline(pick(ids, i).id) },
      { name: 'timeline (audited row)', run: (i) => reader.timeline(pick(audited, i).id) },
    ];
    const results = await measure(pool, ran, cases);
    const overview = await reader.overview(6);
    const sent = overview.counts.filter((count) => count.status === 'sent');
    console.log(
      `sent rows: ${sentRows[0].sent} counted by SQL, ${sent.reduce((sum, count) => sum + count.count, 0)} in the overview` +
        ` (${sent.every((count) => count.estimated) ? 'estimated' : 'counted'})`,
    );
    const slow = results.filter((r) => r.p95 > (r.name.startsWith('timeline') ? 50 : 100));
    console.log(
      slow.length === 0 ? 'every query within its target' : `over target: ${slow.map((r) => r.name).join(', ')}`,
    );
  } finally {
    await pool.end();
    await admin.query(`drop database if exists ${name} with (force)`);
    await admin.end();
  }
}

await main();
