// Soak: drains mail for SOAK_MINUTES (default 3) while terminating database backends of its own database at
// random (pg_terminate_backend: the app's pool, reliable-mail's pool and its LISTEN connection all get killed), then
// lets the outbox drain and settle, and prints what it held at the start, after each minute and at the end:
// resident memory, the heap, the pools' connections, open handles, and the outbox. Every mail must be delivered
// exactly once; handles and pools must come back to their start values; resident memory and the heap after a GC
// must not grow after the first minute. (Resident memory does not fall back to its value before the load: the
// allocator keeps the pages the busiest moment needed. A leak shows as growth from one minute to the next, which is
// what is checked.) Then `app.close()` must return, and the whole run ends, verdict printed, within a bound it
// states at its start. Only backends of the soak's own database are terminated, so other users of the server are
// left alone. Needs DATABASE_URL (or PostgreSQL on 127.0.0.1:5432, user postgres).
import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { writeHeapSnapshot } from 'node:v8';
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
/** A folder to write a V8 heap snapshot into at each figure (start, each minute, end), for finding what grows. */
const heapSnapshotDir = process.env.SOAK_HEAP_SNAPSHOTS;
const WARM_UP_MAILS = 200;
const DRAIN_LIMIT_MS = 120_000;
/** After the drain: idle connections close (the pools' 30 s idle timeout), timers settle. */
const IDLE_MS = 35_000;
/** How long `app.close()` may take; it returns in well under a second when nothing hangs. */
const CLOSE_LIMIT_MS = 30_000;
/** Setting up, the snapshots' queries and the teardown, with room for a machine shared with other work. */
const OVERHEAD_MS = 90_000;
/** The run ends, verdict printed, within this: the load, the drain's limit, the idle wait, the close's limit. */
const RUN_LIMIT_MS = minutes * 60_000 + DRAIN_LIMIT_MS + IDLE_MS + CLOSE_LIMIT_MS + OVERHEAD_MS;

interface Snapshot {
  rssMb: number;
  heapMb: number;
  externalMb: number;
  ormPool: { total: number; idle: number; waiting: number };
  reliableMailPool: { total: number; idle: number; waiting: number } | null;
  handles: Record<string, number>;
  outbox: Record<string, number>;
}

/**
 * What was enqueued and what arrived, in arrays sized for the whole run before it starts. Strings per mail (an
 * array of the Message-IDs enqueued, a Map of those received) grew the heap this process measures by ~200 bytes a
 * mail, 1.2 MB a minute at 100 mails/s: all of the growth the soak used to report, hiding whether the app's own
 * heap held. Mail n goes to soak<n>@example.com; its Message-ID's UUID is kept as 16 bytes.
 */
class Ledger {
  private readonly messageIds: Uint8Array;
  /** 1 once the enqueue of mail n returned (its transaction committed). */
  private readonly enqueued: Uint8Array;
  /** Copies of mail n that arrived, up to 255. */
  private readonly copies: Uint8Array;
  /** Arrivals that name no mail of the run, or carry another Message-ID than the one its enqueue returned. */
  strangers = 0;
  private next = 0;

  constructor(readonly capacity: number) {
    this.messageIds = new Uint8Array(capacity * 16);
    this.enqueued = new Uint8Array(capacity);
    this.copies = new Uint8Array(capacity);
  }

  /** Numbers for a batch of new mails; a failed batch's numbers are not reused (its commit may have happened). */
  take(count: number): number {
    if (this.next + count > this.capacity) throw new Error(`the ledger holds ${this.capacity} mails`);
    const first = this.next;
    this.next += count;
    return first;
  }

  enqueuedAs(mail: number, messageId: string): void {
    this.enqueued[mail] = 1;
    uuidBytes(messageId, this.messageIds, mail * 16);
  }

  arrived(recipient: string, messageId: string): void {
    const mail = Number(/^soak(\d+)@/.exec(recipient)?.[1] ?? NaN);
    const bytes = new Uint8Array(16);
    if (!(mail < this.next) || !uuidBytes(messageId, bytes, 0)) {
      this.strangers++;
      return;
    }
    if (this.enqueued[mail] && !bytes.every((byte, index) => byte === this.messageIds[mail * 16 + index])) {
      this.strangers++;
      return;
    }
    if (this.copies[mail] < 255) this.copies[mail]++;
  }

  figures(): { enqueued: number; lost: number; duplicated: number; committedUnreported: number } {
    let enqueued = 0;
    let lost = 0;
    let duplicated = 0;
    let committedUnreported = 0;
    for (let mail = 0; mail < this.next; mail++) {
      if (this.enqueued[mail]) enqueued++;
      if (this.enqueued[mail] && this.copies[mail] === 0) lost++;
      if (this.copies[mail] > 1) duplicated++;
      if (!this.enqueued[mail] && this.copies[mail] > 0) committedUnreported++;
    }
    return { enqueued, lost, duplicated, committedUnreported };
  }
}

/** The UUID of `<uuid@domain>` into `target` at `offset`; false when the text holds none. */
function uuidBytes(messageId: string, target: Uint8Array, offset: number): boolean {
  const hex = /^<([0-9a-f]{8})-([0-9a-f]{4})-([0-9a-f]{4})-([0-9a-f]{4})-([0-9a-f]{12})@/i.exec(messageId);
  if (!hex) return false;
  const digits = hex.slice(1).join('');
  for (let index = 0; index < 16; index++)
    target[offset + index] = parseInt(digits.slice(index * 2, index * 2 + 2), 16);
  return true;
}

/** An SMTP server that takes everything and tells the ledger what arrived. */
async function startSink(ledger: Ledger): Promise<{ port: number; close(): Promise<void> }> {
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['AUTH', 'STARTTLS'],
    logger: false,
    onData(stream, session, callback) {
      let head = '';
      stream.on('data', (chunk: Buffer) => {
        if (head.length < 4_096) head += chunk.toString('latin1');
      });
      stream.on('end', () => {
        const recipient = session.envelope.rcptTo[0]?.address ?? '';
        ledger.arrived(recipient, /^Message-ID:[ \t]*(\S+)/im.exec(head)?.[1] ?? '');
        callback();
      });
    },
  });
  server.on('error', () => undefined);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.server.address() as AddressInfo;
  return { port, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

function handles(): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const kind of process.getActiveResourcesInfo()) counts[kind] = (counts[kind] ?? 0) + 1;
  return counts;
}

/** A query of the soak's own, on the app's pool: the killer terminates its backend too, so it is tried again. */
async function soakQuery<R>(em: EntityManager, sql: string): Promise<R[]> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await em.fork().execute<R[]>(sql);
    } catch (error) {
      if (attempt === 5) throw error;
      await sleep(200);
    }
  }
}

async function snapshot(em: EntityManager, database: OutboxDatabase, label: string): Promise<Snapshot> {
  if (heapSnapshotDir) writeHeapSnapshot(join(heapSnapshotDir, `${label}.heapsnapshot`));
  global.gc?.();
  const memory = process.memoryUsage();
  const pool = await em.getConnection().getNativeClient();
  const rows = await soakQuery<{ status: string; count: number }>(
    em,
    'select status, count(*)::int as count from reliable_mail.mail_outbox group by status',
  );
  return {
    rssMb: Math.round(memory.rss / 1_048_576),
    heapMb: Math.round(memory.heapUsed / 104_857.6) / 10,
    externalMb: Math.round(memory.external / 1_048_576),
    ormPool: { total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount },
    reliableMailPool: await database.poolFigures(),
    handles: handles(),
    outbox: Object.fromEntries(rows.map((row) => [row.status, row.count])),
  };
}

async function main(): Promise<void> {
  const startedAt = Date.now();
  console.log(`the soak ends, its verdict printed, within ${Math.ceil(RUN_LIMIT_MS / 60_000)} minutes`);
  // A run that passes its bound (a close or a query that hangs) says so and fails instead of waiting for ever.
  setTimeout(() => {
    console.log(`NOT finished within ${Math.ceil(RUN_LIMIT_MS / 60_000)} minutes`);
    process.exit(1);
  }, RUN_LIMIT_MS).unref();

  const name = `reliable_mail_soak_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: databaseUrl('postgres') });
  await admin.connect();
  await admin.query(`create database ${name}`);
  const url = databaseUrl(name);
  // Every batch of the run, at most one a second, and the warm-up's.
  const ledger = new Ledger(WARM_UP_MAILS + (Math.ceil(minutes * 60) + 2) * ratePerSecond);
  const sink = await startSink(ledger);

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
  const beforeApp = handles();
  const app = await NestFactory.createApplicationContext(SoakModule, { logger: ['error'] });
  const em = app.get(EntityManager);
  const outbox = app.get(MailOutboxService);
  const database = app.get(OutboxDatabase);

  // Batches alternate between the two ways an app enqueues: in a transaction of reliable-mail's own (enqueueMany
  // outside a transaction) and in the caller's (`em.transactional`). A batch whose connection is killed fails and
  // is not retried: its numbers are counted as not enqueued.
  let batches = 0;
  const enqueue = async (count: number) => {
    const first = ledger.take(count);
    const mails = Array.from({ length: count }, (_, index) => ({
      mail: { to: `soak${first + index}@example.com`, subject: 'Soak', text: bodyFor(first + index) },
    }));
    const rows =
      batches++ % 2 === 0
        ? await outbox.enqueueMany(mails)
        : await em.fork().transactional((tx) => outbox.enqueueMany(mails, { em: tx }));
    rows.forEach((row, index) => ledger.enqueuedAs(first + index, row.messageId));
  };
  await enqueue(WARM_UP_MAILS);
  await sleep(3_000);
  // Warmed up, so that the start figures are those of a running app, not of one starting.
  const start = await snapshot(em, database, 'start');

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
    // One batch a second.
    await enqueue(ratePerSecond).catch(() => enqueueFailures++);
    await sleep(1_000);
    if (Date.now() >= nextMinute) {
      minutely.push(await snapshot(em, database, `minute-${minutely.length + 1}`));
      nextMinute += 60_000;
    }
  }
  clearInterval(killer);

  const drainedBy = Date.now() + DRAIN_LIMIT_MS;
  while (Date.now() < drainedBy) {
    const [{ open }] = await soakQuery<{ open: number }>(
      em,
      `select count(*)::int as open from reliable_mail.mail_outbox where status in ('pending', 'sending')`,
    );
    if (open === 0) break;
    await sleep(1_000);
  }
  await sleep(IDLE_MS);
  const end = await snapshot(em, database, 'end');

  const mail = ledger.figures();
  console.log(
    JSON.stringify({ minutes, ratePerSecond, killEveryMs, backendsKilled: killed, enqueueFailures }, null, 2),
  );
  console.table({
    start: flatten(start),
    ...Object.fromEntries(minutely.map((figures, index) => [`minute ${index + 1}`, flatten(figures)])),
    end: flatten(end),
  });
  console.log(
    `mail: ${mail.enqueued} enqueued, ${mail.lost} not delivered, ${mail.duplicated} delivered more than once, ` +
      `${mail.committedUnreported} delivered whose enqueue had failed (committed, the reply lost), ` +
      `${ledger.strangers} that the run did not send`,
  );

  // Connections of the app's pool still checked out now were killed in a caller's transaction and never given back
  // (MikroORM, kysely-org/kysely#1990): reliable-mail gives them back at shutdown, so that the close returns.
  const checkedOut = end.ormPool.total - end.ormPool.idle;
  console.log(`the app's pool: ${checkedOut} connections checked out and never given back`);
  const closingAt = Date.now();
  let closeTimer: NodeJS.Timeout | undefined;
  const closeLimit = new Promise<false>((resolve) => (closeTimer = setTimeout(resolve, CLOSE_LIMIT_MS, false)));
  const closed = await Promise.race([app.close().then(() => true), closeLimit]);
  clearTimeout(closeTimer);
  const closeMs = Date.now() - closingAt;
  console.log(
    closed
      ? `app.close(): returned in ${closeMs} ms`
      : `app.close(): NOT returned after ${CLOSE_LIMIT_MS / 1000} s (the verdict goes on without it)`,
  );
  await sleep(1_000); // the sockets the close ended finish closing
  const afterClose = handles();
  console.log(`handles before the app: ${JSON.stringify(beforeApp)}; after its close: ${JSON.stringify(afterClose)}`);
  await sink.close();
  await admin.query(`drop database ${name} with (force)`);
  await admin.end();
  // Back to where it started: no more sockets than at the start, no connection left waiting, no row left open, and
  // once the app is closed, nothing of it left: no handle of any kind more than before it was created. (Timers are
  // left out of the first comparison: each idle pool connection and each lane between two polls holds one.)
  const grown = Object.entries(end.handles).filter(
    ([kind, count]) => kind !== 'Timeout' && kind !== 'Immediate' && count > (start.handles[kind] ?? 0),
  );
  const leftOpen = Object.entries(afterClose).filter(([kind, count]) => count > (beforeApp[kind] ?? 0));
  const settled =
    grown.length === 0 &&
    leftOpen.length === 0 &&
    end.ormPool.waiting === 0 &&
    (end.reliableMailPool?.waiting ?? 0) === 0 &&
    !end.outbox.pending &&
    !end.outbox.sending;
  console.log(
    settled ? 'settled: back to the start values' : `NOT settled: ${JSON.stringify({ grown, leftOpen, end })}`,
  );
  // The first minute's figures are the steady state; 10% above them leaves room for the allocator's noise.
  const steady = minutely[0];
  const rssGrew = steady !== undefined && end.rssMb > steady.rssMb * 1.1;
  const heapGrew = steady !== undefined && end.heapMb > steady.heapMb * 1.1;
  if (steady !== undefined) {
    console.log(
      `resident memory: ${steady.rssMb} MB after the first minute, ${end.rssMb} MB at the end${rssGrew ? ': GREW' : ''}`,
    );
    console.log(
      `heap after a GC: ${steady.heapMb} MB after the first minute, ${end.heapMb} MB at the end${heapGrew ? ': GREW' : ''}`,
    );
  }
  const held =
    mail.lost === 0 && mail.duplicated === 0 && ledger.strangers === 0 && settled && closed && !rssGrew && !heapGrew;
  console.log(
    `verdict: ${held ? 'PASSED' : 'FAILED'} after ${Math.round((Date.now() - startedAt) / 1000)} s ` +
      `(bound ${Math.round(RUN_LIMIT_MS / 1000)} s)`,
  );
  // Whatever a third party left open (a close that did not return) does not keep the process.
  process.exit(held ? 0 : 1);
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

await main().catch((error: unknown) => {
  console.log(`verdict: FAILED, the soak itself failed: ${String(error)}`);
  process.exit(1);
});
