// Soak: drains mail for SOAK_MINUTES (default 3) while terminating database backends of its own database at
// random (pg_terminate_backend: the app's pool, reliable-mail's pool and its LISTEN connection all get killed), then
// lets the outbox drain and settle, and prints what it held at the start, after each minute and at the end:
// resident memory, the heap, the pools' connections, open handles, and the outbox. Every mail must be delivered
// exactly once; handles and pools must come back to their start values; resident memory must not grow after the
// first minute. (It does not fall back to its value before the load: the allocator keeps the pages the busiest
// moment needed. A leak shows as growth from one minute to the next, which is what is checked.) Only backends of the soak's own database are terminated, so other users of the server are left
// alone. Needs DATABASE_URL (or PostgreSQL on 127.0.0.1:5432, user postgres).
import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import { MikroOrmModule } from '@mikro-orm/nestjs';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { EventEmitterModule } from '@nestjs/event-emitter';
import { ScheduleModule } from '@nestjs/schedule';
import { MailOutboxService, ReliableMailModule } from '@reliable-mail/nestjs';
import pg from 'pg';
import { SMTPServer } from 'smtp-server';
import { OutboxDatabase } from '../libs/reliable-mail/src/database/outbox-database.js';
import { bodyFor, databaseUrl, FROM, MESSAGE_ID_DOMAIN, sleep } from './common.js';
import { ormConfig } from './reliable-mail-config.js';

const minutes = Number(process.env.SOAK_MINUTES ?? 3);
const ratePerSecond = Number(process.env.SOAK_RATE ?? 100);
/** How often a random backend of the soak's database is terminated. */
const killEveryMs = Number(process.env.SOAK_KILL_EVERY_MS ?? 2_000);

interface Snapshot {
  rssMb: number;
  heapMb: number;
  externalMb: number;
  ormPool: { total: number; idle: number; waiting: number };
  reliableMailPool: { total: number; idle: number; waiting: number } | null;
  handles: Record<string, number>;
  outbox: Record<string, number>;
}

/** An SMTP server that takes everything and counts each Message-ID. */
async function startSink(): Promise<{ port: number; copies: Map<string, number>; close(): Promise<void> }> {
  const copies = new Map<string, number>();
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['AUTH', 'STARTTLS'],
    logger: false,
    onData(stream, _session, callback) {
      let head = '';
      stream.on('data', (chunk: Buffer) => {
        if (head.length < 4_096) head += chunk.toString('latin1');
      });
      stream.on('end', () => {
        // A copy: a match is a slice that would keep the whole header alive in the map, and count as a leak.
        const id = Buffer.from(/^Message-ID:[ \t]*(\S+)/im.exec(head)?.[1] ?? '').toString();
        copies.set(id, (copies.get(id) ?? 0) + 1);
        callback();
      });
    },
  });
  server.on('error', () => undefined);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.server.address() as AddressInfo;
  return { port, copies, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

function handles(): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const kind of process.getActiveResourcesInfo()) counts[kind] = (counts[kind] ?? 0) + 1;
  return counts;
}

async function snapshot(em: EntityManager, database: OutboxDatabase): Promise<Snapshot> {
  global.gc?.();
  const memory = process.memoryUsage();
  const pool = await em.getConnection().getNativeClient();
  const rows = await em
    .fork()
    .execute<{ status: string; count: number }[]>(
      'select status, count(*)::int as count from mail_outbox group by status',
    );
  return {
    rssMb: Math.round(memory.rss / 1_048_576),
    heapMb: Math.round(memory.heapUsed / 1_048_576),
    externalMb: Math.round(memory.external / 1_048_576),
    ormPool: { total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount },
    reliableMailPool: await database.poolFigures(),
    handles: handles(),
    outbox: Object.fromEntries(rows.map((row) => [row.status, row.count])),
  };
}

async function main(): Promise<void> {
  const name = `reliable_mail_soak_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: databaseUrl('postgres') });
  await admin.connect();
  await admin.query(`create database ${name}`);
  const url = databaseUrl(name);
  const sink = await startSink();

  @Module({
    imports: [
      MikroOrmModule.forRoot(ormConfig(url)),
      EventEmitterModule.forRoot(),
      ScheduleModule.forRoot(),
      ReliableMailModule.forRoot({
        transport: { host: '127.0.0.1', port: sink.port, secure: false, ignoreTLS: true },
        from: FROM,
        messageIdDomain: MESSAGE_ID_DOMAIN,
        dispatcher: { pollIntervalMs: 500, leaseMs: 60_000, sendTimeoutMs: 20_000 },
        database: { statementTimeoutMs: 5_000, connectTimeoutMs: 2_000 },
      }),
    ],
  })
  class SoakModule {}

  const orm = await MikroORM.init(ormConfig(url));
  await orm.migrator.up();
  await orm.close();
  const app = await NestFactory.createApplicationContext(SoakModule, { logger: ['error'] });
  const em = app.get(EntityManager);
  const outbox = app.get(MailOutboxService);
  const database = app.get(OutboxDatabase);

  // Warm up, so that the start figures are those of a running app, not of one starting.
  const enqueued: string[] = [];
  const enqueue = async (count: number) => {
    const rows = await outbox.enqueueMany(
      Array.from({ length: count }, (_, index) => ({
        mail: { to: `soak${enqueued.length + index}@example.com`, subject: 'Soak', text: bodyFor(index) },
      })),
    );
    enqueued.push(...rows.map((row) => row.messageId));
  };
  await enqueue(200);
  await sleep(3_000);
  const start = await snapshot(em, database);

  const until = Date.now() + minutes * 60_000;
  let killed = 0;
  let enqueueFailures = 0;
  const killer = setInterval(() => {
    void admin
      .query(
        `select pg_terminate_backend(pid) from pg_stat_activity
         where datname = $1 and pid <> pg_backend_pid() order by random() limit 1`,
        [name],
      )
      .then(({ rowCount }) => (killed += rowCount ?? 0))
      .catch(() => undefined);
  }, killEveryMs);
  const minutely: Snapshot[] = [];
  let nextMinute = Date.now() + 60_000;
  while (Date.now() < until) {
    // One batch a second: the producer retries what a killed connection failed, as a business caller would.
    await enqueue(ratePerSecond).catch(() => enqueueFailures++);
    await sleep(1_000);
    if (Date.now() >= nextMinute) {
      minutely.push(await snapshot(em, database));
      nextMinute += 60_000;
    }
  }
  clearInterval(killer);

  const drainedBy = Date.now() + 120_000;
  while (Date.now() < drainedBy) {
    const [{ open }] = await em
      .fork()
      .execute<{ open: number }[]>(
        `select count(*)::int as open from mail_outbox where status in ('pending', 'sending')`,
      );
    if (open === 0) break;
    await sleep(1_000);
  }
  await sleep(35_000); // idle connections close, timers settle
  const end = await snapshot(em, database);

  const lost = enqueued.filter((id) => !sink.copies.has(id)).length;
  const duplicated = enqueued.filter((id) => (sink.copies.get(id) ?? 0) > 1).length;
  console.log(
    JSON.stringify({ minutes, ratePerSecond, killEveryMs, backendsKilled: killed, enqueueFailures }, null, 2),
  );
  console.table({
    start: flatten(start),
    ...Object.fromEntries(minutely.map((figures, index) => [`minute ${index + 1}`, flatten(figures)])),
    end: flatten(end),
  });
  console.log(`mail: ${enqueued.length} enqueued, ${lost} not delivered, ${duplicated} delivered more than once`);

  await app.close();
  await sink.close();
  await admin.query(`drop database ${name} with (force)`);
  await admin.end();
  // Back to where it started: no kind of handle more numerous, no connection left waiting, nothing left open.
  const grown = Object.entries(end.handles).filter(([kind, count]) => count > (start.handles[kind] ?? 0));
  const settled =
    grown.length === 0 &&
    end.ormPool.waiting === 0 &&
    (end.reliableMailPool?.waiting ?? 0) === 0 &&
    !end.outbox.pending &&
    !end.outbox.sending;
  console.log(settled ? 'settled: back to the start values' : `NOT settled: ${JSON.stringify({ grown, end })}`);
  // The first minute's figure is the steady state; 10% above it leaves room for the allocator's noise.
  const steadyRssMb = minutely[0]?.rssMb;
  const rssGrew = steadyRssMb !== undefined && end.rssMb > steadyRssMb * 1.1;
  if (steadyRssMb !== undefined) {
    console.log(
      `resident memory: ${steadyRssMb} MB after the first minute, ${end.rssMb} MB at the end${rssGrew ? ': GREW' : ''}`,
    );
  }
  if (lost > 0 || duplicated > 0 || !settled || rssGrew) process.exitCode = 1;
}

function flatten(snapshot: Snapshot): Record<string, string | number> {
  return {
    rssMb: snapshot.rssMb,
    heapMb: snapshot.heapMb,
    externalMb: snapshot.externalMb,
    ormPool: `${snapshot.ormPool.total} (${snapshot.ormPool.idle} idle, ${snapshot.ormPool.waiting} waiting)`,
    reliableMailPool: snapshot.reliableMailPool
      ? `${snapshot.reliableMailPool.total} (${snapshot.reliableMailPool.idle} idle, ${snapshot.reliableMailPool.waiting} waiting)`
      : 'none',
    handles: Object.entries(snapshot.handles)
      .map(([kind, count]) => `${kind} ${count}`)
      .join(', '),
    outbox: Object.entries(snapshot.outbox)
      .map(([status, count]) => `${status} ${count}`)
      .join(', '),
  };
}

await main();
