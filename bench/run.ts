// `npm run bench`: reliable-mail against a bare SMTP ceiling, pg-boss and graphile-worker, on the same work.
// Prints a table and writes bench/results/<timestamp>.json. Settings: see bench/README.md (BENCH_N, BENCH_BULK,
// BENCH_CLAIM_ROWS, BENCH_SYSTEMS, BENCH_SKIP_CLAIM, BENCH_SKIP_CRITICAL, timeouts).
import 'reflect-metadata';
import { mkdirSync, writeFileSync } from 'node:fs';
import pg from 'pg';
import { type ClaimResult, runClaimBenchmark } from './claim.js';
import {
  Child,
  cpuSnapshot,
  cpuSpent,
  databaseUrl,
  type IpcPush,
  now,
  percentile,
  queueMessageId,
  settings,
  sleep,
  SYSTEMS,
  type SystemName,
} from './common.js';
import { GraphileWorkerProducer, PgBossProducer, type Producer, ReliableMailProducer } from './producers.js';

interface SinkStats {
  received: number;
  unique: number;
  duplicates: number;
  duplicatedIds: [string, number][];
  withoutMessageId: number;
  errors: number;
  lastError: string | null;
  firstAt: number | null;
  lastAt: number | null;
  perMessageId?: Record<string, number>;
}

interface EnqueueFigure {
  emails: number;
  seconds: number;
  perSecond: number;
  timedOut: boolean;
}

interface LatencyFigure {
  sent: number;
  arrived: number;
  p50: number | null;
  p95: number | null;
  p99: number | null;
  max: number | null;
  /** Each email's latency in ms, in the order they were enqueued (null: never arrived). */
  series: (number | null)[];
}

interface SystemResult {
  system: SystemName;
  enqueueSingle?: EnqueueFigure;
  enqueueBatched?: EnqueueFigure;
  drain?: {
    emails: number;
    seconds: number;
    perSecond: number;
    received: number;
    lost: number;
    duplicates: number;
    unexpected: number;
    timedOut: boolean;
    peakRssMb: number | null;
    /** The worker process's RSS once connected, before it started: what the drain added is the difference. */
    readyRssMb: number | null;
    vmHwmMb: number | null;
    /** CPU time per email during the drain, ms: the worker process, the sink and all of PostgreSQL (null off Linux). */
    cpuMsPerEmail: Record<string, number | null>;
    workerStats?: unknown;
  };
  idle?: LatencyFigure;
  /** reliable-mail only: the drain again, with addresses on the suppression list (none of them a recipient). */
  drainWithSuppressions?: SystemResult['drain'];
  error?: string;
}

interface CriticalResult {
  bulk: number;
  bulkEnqueue: EnqueueFigure;
  critical: LatencyFigure;
  bulkSentBeforeLastCritical: number | null;
  bulkPendingWhenLastCriticalArrived: number | null;
  bulkPendingInDbAfterLastCritical: number | null;
  timedOut: boolean;
  error?: string;
}

const runStartedAt = now();
const deadline = runStartedAt + settings.totalTimeoutMs;
const phases: { phase: string; seconds: number }[] = [];
const children = new Set<Child>();
const databases = new Set<string>();
const admin = new pg.Pool({ connectionString: databaseUrl('postgres'), max: 2 });
const tag = `${process.pid}`;

function log(line: string): void {
  process.stdout.write(`${line}\n`);
}

async function phase<T>(name: string, work: () => Promise<T>): Promise<T> {
  const started = now();
  log(`- ${name} ...`);
  try {
    return await work();
  } finally {
    const seconds = (now() - started) / 1000;
    phases.push({ phase: name, seconds: +seconds.toFixed(2) });
    log(`  ${name}: ${seconds.toFixed(1)} s`);
  }
}

function remainingMs(): number {
  return deadline - now();
}

function limit(ms: number): number {
  return Math.max(1_000, Math.min(ms, remainingMs()));
}

async function createDatabase(name: string): Promise<string> {
  await admin.query(`drop database if exists ${name} with (force)`);
  await admin.query(`create database ${name}`);
  databases.add(name);
  return databaseUrl(name);
}

async function dropDatabase(name: string): Promise<void> {
  await admin.query(`drop database if exists ${name} with (force)`);
  databases.delete(name);
}

function spawn(name: string, file: string, args: string[]): Child {
  const child = new Child(name, file, args);
  children.add(child);
  child.process.on('exit', () => children.delete(child));
  return child;
}

// ---- The sink ----

async function startSink(): Promise<{ sink: Child; port: number }> {
  const sink = spawn('smtp-sink', './smtp-sink.ts', []);
  const { port } = (await sink.waitForPush('listening', 60_000)) as IpcPush & { port: number };
  return { sink, port };
}

function sinkStats(sink: Child, body: Record<string, unknown> = {}): Promise<SinkStats> {
  return sink.request<SinkStats>('stats', body, 60_000);
}

/** Polls the sink until it holds `count` distinct Message-IDs or `timeoutMs` passes. */
async function waitForSink(
  sink: Child,
  count: number,
  timeoutMs: number,
  intervalMs = 100,
): Promise<{ stats: SinkStats; timedOut: boolean }> {
  const until = now() + limit(timeoutMs);
  for (;;) {
    const stats = await sinkStats(sink);
    if (stats.unique >= count) return { stats, timedOut: false };
    if (now() > until) return { stats, timedOut: true };
    await sleep(intervalMs);
  }
}

// ---- Figures ----

/** Runs `total` jobs `index => work(index)` with `workers` of them in flight; stops starting new ones at the deadline. */
async function runPool(
  total: number,
  workers: number,
  timeoutMs: number,
  work: (index: number) => Promise<void>,
): Promise<{ done: number; seconds: number; timedOut: boolean }> {
  const until = now() + limit(timeoutMs);
  let next = 0;
  let done = 0;
  let timedOut = false;
  const started = now();
  await Promise.all(
    Array.from({ length: Math.min(workers, total) }, async () => {
      while (next < total) {
        if (now() > until) {
          timedOut = true;
          return;
        }
        const index = next++;
        await work(index);
        done++;
      }
    }),
  );
  return { done, seconds: (now() - started) / 1000, timedOut };
}

function enqueueFigure(emails: number, seconds: number, timedOut: boolean): EnqueueFigure {
  return { emails, seconds: +seconds.toFixed(3), perSecond: +(emails / seconds).toFixed(1), timedOut };
}

async function enqueueSingle(producer: Producer, count: number, tagName: string): Promise<EnqueueFigure> {
  const { done, seconds, timedOut } = await runPool(
    count,
    settings.concurrency,
    settings.enqueueTimeoutMs,
    async (index) => {
      await producer.enqueueOne(index, tagName);
    },
  );
  return enqueueFigure(done, seconds, timedOut);
}

async function enqueueBatched(
  producer: Producer,
  count: number,
  tagName: string,
  lane?: string,
): Promise<{ figure: EnqueueFigure; ids: string[] }> {
  const batches = Math.ceil(count / settings.batchSize);
  const ids: string[][] = [];
  const { done, seconds, timedOut } = await runPool(
    batches,
    settings.batchProducers,
    settings.enqueueTimeoutMs,
    async (batch) => {
      const start = batch * settings.batchSize;
      ids[batch] = await producer.enqueueBatch(start, Math.min(settings.batchSize, count - start), tagName, lane);
    },
  );
  const flat = ids.flat();
  return { figure: enqueueFigure(flat.length, seconds, timedOut || done < batches), ids: flat };
}

/** Enqueues one email every `spacingMs` (without waiting for the previous one) and returns each commit time. */
/** What an enqueue resolves to: the Message-ID (committed now), or the Message-ID and the instant to measure from. */
type Enqueued = string | { messageId: string; at: number };

async function enqueueSpaced(
  count: number,
  spacingMs: number,
  enqueue: (index: number) => Promise<Enqueued>,
): Promise<Map<string, number>> {
  const committedAt = new Map<string, number>();
  const started = now();
  const inFlight: Promise<void>[] = [];
  for (let index = 0; index < count; index++) {
    const wait = started + index * spacingMs - now();
    if (wait > 0) await sleep(wait);
    inFlight.push(
      enqueue(index).then(
        (enqueued) => {
          if (typeof enqueued === 'string') committedAt.set(enqueued, now());
          else committedAt.set(enqueued.messageId, enqueued.at);
        },
        (error: unknown) => log(`  enqueue ${index} failed: ${String(error)}`),
      ),
    );
  }
  await Promise.all(inFlight);
  return committedAt;
}

function latencyFigure(committedAt: Map<string, number>, acceptedAt: Record<string, number>): LatencyFigure {
  const latencies: number[] = [];
  const series: (number | null)[] = [];
  for (const [id, committed] of [...committedAt].sort((a, b) => a[1] - b[1])) {
    if (acceptedAt[id] !== undefined) latencies.push(acceptedAt[id] - committed);
    series.push(acceptedAt[id] === undefined ? null : +(acceptedAt[id] - committed).toFixed(1));
  }
  const round = (value: number | null) => (value === null ? null : +value.toFixed(1));
  return {
    series,
    sent: committedAt.size,
    arrived: latencies.length,
    p50: round(percentile(latencies, 50)),
    p95: round(percentile(latencies, 95)),
    p99: round(percentile(latencies, 99)),
    max: round(latencies.length ? Math.max(...latencies) : null),
  };
}

/** Starts bench/drain-worker.ts for a system and waits until it is connected (not yet sending). */
async function startWorker(system: SystemName, url: string, smtpPort: number, n: number) {
  const worker = spawn(`drain-worker ${system}`, './drain-worker.ts', [
    system,
    JSON.stringify({ databaseUrl: url, smtpPort, n }),
  ]);
  const rss: { t: number; rss: number }[] = [];
  worker.onPush((message) => {
    if (message.type === 'rss') rss.push({ t: message.t as number, rss: message.rss as number });
  });
  await worker.waitForPush('ready', 120_000);
  return { worker, rss };
}

async function measureDrain(
  system: SystemName,
  sink: Child,
  worker: Child,
  rss: { t: number; rss: number }[],
  expected: string[],
): Promise<NonNullable<SystemResult['drain']>> {
  await sink.request('reset');
  const pids = { worker: worker.process.pid, sink: sink.process.pid };
  const cpuBefore = cpuSnapshot(pids);
  const { startedAt } = await worker.request<{ startedAt: number }>('start', {}, 120_000);
  const { stats, timedOut } = await waitForSink(sink, expected.length, settings.drainTimeoutMs);
  const cpuAfter = cpuSnapshot(pids);
  const finishedAt = stats.lastAt ?? now();
  // Anything still on its way (a duplicate) shows up in the final count.
  await sleep(500);
  const final = await sinkStats(sink, { withTimestamps: true });
  const accepted = final.perMessageId ?? {};
  const expectedSet = new Set(expected);
  const lost = expected.filter((id) => accepted[id] === undefined).length;
  const unexpected = Object.keys(accepted).filter((id) => !expectedSet.has(id)).length;
  const seconds = (finishedAt - startedAt) / 1000;
  const before = rss.filter((sample) => sample.t < startedAt);
  const during = rss.filter((sample) => sample.t >= startedAt && sample.t <= finishedAt + 100);
  const workerStats = await worker
    .request<Record<string, unknown>>('stats')
    .catch((error: unknown) => ({ error: String(error) }));
  const vmHwm = (workerStats as { vmHwm?: number | null }).vmHwm ?? null;
  const received = expected.length - lost;
  return {
    emails: expected.length,
    seconds: +seconds.toFixed(3),
    perSecond: +(received / seconds).toFixed(1),
    received,
    lost,
    duplicates: final.duplicates,
    unexpected,
    timedOut,
    peakRssMb: during.length ? +(Math.max(...during.map((sample) => sample.rss)) / 2 ** 20).toFixed(1) : null,
    readyRssMb: before.length ? +(before[before.length - 1].rss / 2 ** 20).toFixed(1) : null,
    vmHwmMb: vmHwm ? +(vmHwm / 2 ** 20).toFixed(1) : null,
    cpuMsPerEmail: Object.fromEntries(
      Object.entries(cpuSpent(cpuBefore, cpuAfter)).map(([name, ms]) => [
        name,
        ms === null || received === 0 ? null : +(ms / received).toFixed(3),
      ]),
    ),
    workerStats: system === 'smtp-only' ? undefined : workerStats,
  };
}

async function measureIdle(sink: Child, enqueue: (index: number) => Promise<Enqueued>): Promise<LatencyFigure> {
  // Let the worker go idle (back to LISTEN and its slow poll) after the drain.
  await sleep(2_000);
  await sink.request('reset');
  const committedAt = await enqueueSpaced(settings.idleEmails, settings.idleSpacingMs, enqueue);
  await waitForSink(sink, committedAt.size, settings.idleTimeoutMs, 20);
  const stats = await sinkStats(sink, { ids: [...committedAt.keys()] });
  return latencyFigure(committedAt, stats.perMessageId ?? {});
}

// ---- The systems ----

async function benchSmtpOnly(sink: Child, port: number): Promise<SystemResult> {
  const result: SystemResult = { system: 'smtp-only' };
  const { worker, rss } = await startWorker('smtp-only', '', port, settings.n);
  try {
    const expected = Array.from({ length: settings.n }, (_, index) => queueMessageId('smtp-only', 'drain', index));
    result.drain = await phase('smtp-only: send N straight to the sink', () =>
      measureDrain('smtp-only', sink, worker, rss, expected),
    );
    result.idle = await phase('smtp-only: idle latency', () =>
      measureIdle(sink, async (index) => {
        // No queue: measured from the call to sendMail (less the IPC hop) to the sink's acceptance.
        const messageId = queueMessageId('smtp-only', 'idle', index);
        const at = now();
        await worker.request('send', { messageId, index });
        return { messageId, at };
      }),
    );
  } finally {
    await worker.stop();
  }
  return result;
}

function producerFor(system: SystemName, url: string, port: number): Producer {
  if (system === 'reliable-mail') return new ReliableMailProducer(url, port);
  if (system === 'pg-boss') return new PgBossProducer(url);
  if (system === 'graphile-worker') return new GraphileWorkerProducer(url);
  throw new Error(`no producer for ${system}`);
}

const SHORT: Record<SystemName, string> = {
  'smtp-only': 'smtp',
  'reliable-mail': 'rm',
  'pg-boss': 'boss',
  'graphile-worker': 'gw',
};

async function benchQueue(
  system: SystemName,
  sink: Child,
  port: number,
): Promise<{ result: SystemResult; critical?: CriticalResult }> {
  const result: SystemResult = { system };
  const dbName = `bench_${SHORT[system]}_${tag}`;
  const url = await createDatabase(dbName);
  const producer = producerFor(system, url, port);
  let critical: CriticalResult | undefined;
  try {
    await phase(`${system}: setup (schema)`, () => producer.setup());
    result.enqueueSingle = await phase(`${system}: enqueue N, one per transaction`, () =>
      enqueueSingle(producer, settings.n, 'single'),
    );
    await producer.clear();
    const batched = await phase(`${system}: enqueue N in batches of ${settings.batchSize}`, () =>
      enqueueBatched(producer, settings.n, 'drain'),
    );
    result.enqueueBatched = batched.figure;

    const { worker, rss } = await phase(`${system}: start the worker process`, () =>
      startWorker(system, url, port, settings.n),
    );
    try {
      result.drain = await phase(`${system}: drain N`, () => measureDrain(system, sink, worker, rss, batched.ids));
      result.idle = await phase(`${system}: idle latency`, () =>
        measureIdle(sink, (index) => producer.enqueueOne(index, 'idle')),
      );
    } finally {
      await worker.stop();
    }

    if (producer instanceof ReliableMailProducer && settings.suppressions > 0) {
      result.drainWithSuppressions = await phase(
        `reliable-mail: drain N with ${settings.suppressions} addresses on the suppression list`,
        async () => {
          await producer.clear();
          await producer.addSuppressions(settings.suppressions);
          const again = await enqueueBatched(producer, settings.n, 'drain-suppressed');
          const started = await startWorker(system, url, port, settings.n);
          try {
            return await measureDrain(system, sink, started.worker, started.rss, again.ids);
          } finally {
            await started.worker.stop();
          }
        },
      );
    }

    if (system === 'reliable-mail' && !process.env.BENCH_SKIP_CRITICAL) {
      critical = await phase('reliable-mail: critical lane under a bulk backlog', () =>
        benchCritical(producer, sink, url, port),
      );
    }
  } finally {
    await producer.close().catch((error: unknown) => log(`  closing the ${system} producer failed: ${String(error)}`));
    // pg's pool.end() resolves before its connections have closed on the server; let them go before the drop.
    await sleep(500);
    await dropDatabase(dbName);
  }
  return { result, critical };
}

async function benchCritical(producer: Producer, sink: Child, url: string, port: number): Promise<CriticalResult> {
  await producer.clear();
  const bulk = await enqueueBatched(producer, settings.bulk, 'bulk', 'bulk');
  log(`  enqueued ${bulk.ids.length.toLocaleString('en-US')} bulk emails in ${bulk.figure.seconds.toFixed(1)} s`);
  await sink.request('reset');
  const { worker } = await startWorker('reliable-mail', url, port, settings.bulk);
  try {
    await worker.request('start', {}, 120_000);
    const committedAt = await enqueueSpaced(settings.criticalEmails, settings.criticalSpacingMs, (index) =>
      producer.enqueueOne(index, 'critical', 'critical'),
    );
    const criticalIds = [...committedAt.keys()];
    const until = now() + limit(settings.criticalTimeoutMs);
    let timedOut = false;
    let accepted: Record<string, number> = {};
    for (;;) {
      accepted = (await sinkStats(sink, { ids: criticalIds })).perMessageId ?? {};
      if (Object.keys(accepted).length >= criticalIds.length) break;
      if (now() > until) {
        timedOut = true;
        break;
      }
      await sleep(50);
    }
    const pendingInDb = await producer.pending('bulk').catch(() => null);
    const lastCritical = Object.values(accepted).length ? Math.max(...Object.values(accepted)) : null;
    const all = (await sinkStats(sink, { withTimestamps: true })).perMessageId ?? {};
    const criticalSet = new Set(criticalIds);
    const bulkBefore =
      lastCritical === null
        ? null
        : Object.entries(all).filter(([id, at]) => !criticalSet.has(id) && at <= lastCritical).length;
    return {
      bulk: bulk.ids.length,
      bulkEnqueue: bulk.figure,
      critical: latencyFigure(committedAt, accepted),
      bulkSentBeforeLastCritical: bulkBefore,
      bulkPendingWhenLastCriticalArrived: bulkBefore === null ? null : bulk.ids.length - bulkBefore,
      bulkPendingInDbAfterLastCritical: pendingInDb,
      timedOut,
    };
  } finally {
    // The bulk backlog is left unsent: stopping waits only for the sends in flight.
    await worker.stop(40_000);
  }
}

// ---- Report ----

function fmt(value: number | null | undefined, digits = 0): string {
  if (value === null || value === undefined || Number.isNaN(value)) return '-';
  return value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

function ratio(a: number | null | undefined, b: number | null | undefined): string {
  if (!a || !b) return '-';
  return `${(a / b).toFixed(2)}x`;
}

function table(headers: string[], rows: string[][]): string {
  const widths = headers.map((header, column) => Math.max(header.length, ...rows.map((row) => row[column].length)));
  const line = (cells: string[]) =>
    cells
      .map((cell, column) => (column === 0 ? cell.padEnd(widths[column]) : cell.padStart(widths[column])))
      .join('  ');
  return [line(headers), widths.map((width) => '-'.repeat(width)).join('  '), ...rows.map(line)].join('\n');
}

function report(results: SystemResult[], critical: CriticalResult | undefined, claim: ClaimResult | undefined): string {
  const lines: string[] = [];
  lines.push(
    `N=${settings.n} emails (~2 KB), concurrency ${settings.concurrency}, nodemailer pooled (16 connections) to a separate smtp-server sink; ` +
      `enqueue 1/tx with ${settings.concurrency} producers, batches of ${settings.batchSize} with ${settings.batchProducers} producers`,
    '',
  );
  lines.push(
    table(
      [
        'system',
        'enq 1/tx /s',
        `enq x${settings.batchSize} /s`,
        'drain /s',
        'drain s',
        'lost',
        'dup',
        'idle p50 ms',
        'p95 ms',
        'p99 ms',
        'RSS ready MB',
        'peak RSS MB',
      ],
      [
        ...results,
        ...results
          .filter((r) => r.drainWithSuppressions)
          .map((r) => ({
            system: `${r.system} +${fmt(settings.suppressions)} suppressed` as SystemName,
            drain: r.drainWithSuppressions,
          })),
      ].map((r: SystemResult) => [
        r.system + (r.error ? ' (error)' : ''),
        fmt(r.enqueueSingle?.perSecond) + (r.enqueueSingle?.timedOut ? '*' : ''),
        fmt(r.enqueueBatched?.perSecond) + (r.enqueueBatched?.timedOut ? '*' : ''),
        fmt(r.drain?.perSecond) + (r.drain?.timedOut ? '*' : ''),
        fmt(r.drain?.seconds, 1),
        fmt(r.drain?.lost),
        fmt(r.drain?.duplicates),
        fmt(r.idle?.p50, 1),
        fmt(r.idle?.p95, 1),
        fmt(r.idle?.p99, 1),
        fmt(r.drain?.readyRssMb, 1),
        fmt(r.drain?.peakRssMb, 1),
      ]),
    ),
  );
  lines.push('(* = the phase hit its time limit; figures cover what it did)', '');
  const cpuRows = results.filter((r) => r.drain?.cpuMsPerEmail);
  if (cpuRows.length > 0) {
    lines.push('CPU time per email during the drain, ms (the machine has 2 cores shared by all of them):');
    lines.push(
      table(
        ['system', 'worker process', 'PostgreSQL', 'sink', 'total'],
        cpuRows.map((r) => {
          const { worker, postgres, sink } = r.drain!.cpuMsPerEmail;
          const total = [worker, postgres, sink].every((value) => value !== null) ? worker! + postgres! + sink! : null;
          return [r.system, fmt(worker, 3), fmt(postgres, 3), fmt(sink, 3), fmt(total, 3)];
        }),
      ),
    );
    lines.push('');
  }

  const by = (system: SystemName) => results.find((r) => r.system === system && !r.error);
  const rm = by('reliable-mail');
  const ceiling = by('smtp-only');
  const queues = [by('pg-boss'), by('graphile-worker')].filter((r): r is SystemResult => !!r);
  const best = (
    pick: (r: SystemResult) => number | null | undefined,
    better: (a: number, b: number) => boolean,
  ): { system: string; value: number } | null => {
    let found: { system: string; value: number } | null = null;
    for (const r of queues) {
      const value = pick(r);
      if (value === null || value === undefined) continue;
      if (!found || better(value, found.value)) found = { system: r.system, value };
    }
    return found;
  };
  if (rm) {
    const drainBest = best(
      (r) => r.drain?.perSecond,
      (a, b) => a > b,
    );
    const idleBest = best(
      (r) => r.idle?.p50,
      (a, b) => a < b,
    );
    const singleBest = best(
      (r) => r.enqueueSingle?.perSecond,
      (a, b) => a > b,
    );
    const batchBest = best(
      (r) => r.enqueueBatched?.perSecond,
      (a, b) => a > b,
    );
    lines.push('reliable-mail ratios:');
    lines.push(`  drain vs smtp-only ceiling:        ${ratio(rm.drain?.perSecond, ceiling?.drain?.perSecond)}`);
    lines.push(
      `  drain vs faster queue (${drainBest?.system ?? '-'}):  ${ratio(rm.drain?.perSecond, drainBest?.value)}`,
    );
    lines.push(
      `  idle p50 vs better queue (${idleBest?.system ?? '-'}): ${ratio(rm.idle?.p50, idleBest?.value)} (below 1 = lower latency)`,
    );
    lines.push(
      `  enqueue 1/tx vs faster queue (${singleBest?.system ?? '-'}): ${ratio(rm.enqueueSingle?.perSecond, singleBest?.value)}`,
    );
    lines.push(
      `  enqueue x${settings.batchSize} vs faster queue (${batchBest?.system ?? '-'}): ${ratio(rm.enqueueBatched?.perSecond, batchBest?.value)}`,
    );
    lines.push('');
  }
  if (critical) {
    if (critical.error) lines.push(`critical lane: error ${critical.error}`);
    else {
      lines.push(
        `critical lane under a ${fmt(critical.bulk)}-email bulk backlog (bulk enqueued with enqueueMany at ${fmt(critical.bulkEnqueue.perSecond)}/s): ` +
          `${critical.critical.arrived}/${critical.critical.sent} critical arrived${critical.timedOut ? ' (timed out)' : ''}, ` +
          `p50 ${fmt(critical.critical.p50, 1)} ms, p95 ${fmt(critical.critical.p95, 1)} ms, max ${fmt(critical.critical.max, 1)} ms; ` +
          `bulk still pending when the last critical arrived: ${fmt(critical.bulkPendingWhenLastCriticalArrived)} ` +
          `(${fmt(critical.bulkSentBeforeLastCritical)} bulk sent by then)`,
        `  critical latencies in ms, in enqueue order: ${critical.critical.series.map((v) => (v === null ? 'lost' : v.toFixed(0))).join(' ')}`,
      );
    }
    lines.push('');
  }
  if (claim) {
    const row = (m: ClaimResult['empty'][number]) =>
      `${m.label === 'empty' ? 'empty outbox' : m.label === 'due' ? `0 sent + ${fmt(claim.dueRows)} due` : `${fmt(claim.sentRows)} sent + ${fmt(claim.dueRows)} due`}, limit ${m.limit}: ` +
      `execution ${m.executionMs.toFixed(2)} ms (planning ${m.planningMs.toFixed(2)} ms, statement wall ${m.wallMs.toFixed(2)} ms, ` +
      `${m.rowsClaimed} rows, buffers hit ${m.sharedHit} read ${m.sharedRead})`;
    lines.push('claim statement (EXPLAIN ANALYZE, median of 5, rolled back):');
    for (const m of [...claim.empty, ...claim.dueOnly, ...claim.loaded]) lines.push(`  ${row(m)}`);
    for (const m of claim.withSuppressions)
      lines.push(`  ${row(m)}, ${fmt(claim.suppressions)} addresses on the suppression list`);
    lines.push(
      `  populating took ${(claim.populateMs / 1000).toFixed(1)} s, analyze ${(claim.analyzeMs / 1000).toFixed(1)} s; sizes: ${JSON.stringify(claim.tableSizes)}`,
    );
    lines.push('');
  }
  for (const [label, drain] of [
    ['the drain', rm?.drain],
    [`the drain with ${fmt(settings.suppressions)} addresses on the suppression list`, rm?.drainWithSuppressions],
  ] as const) {
    const stats = drain?.workerStats as Record<string, unknown> | undefined;
    if (!stats || !('claim' in stats)) continue;
    lines.push(
      `reliable-mail dispatcher during ${label} (timed wrappers around repository calls, in the worker process):`,
    );
    for (const key of ['claim', 'settle', 'deleteEvents', 'smtpSend'])
      lines.push(`  ${key}: ${JSON.stringify(stats[key])}`);
    lines.push('');
  }
  lines.push('phases:');
  for (const p of phases) lines.push(`  ${p.phase.padEnd(60)} ${p.seconds.toFixed(1)} s`);
  lines.push(`  total ${((now() - runStartedAt) / 1000).toFixed(1)} s`);
  return lines.join('\n');
}

// ---- Main ----

async function cleanup(): Promise<void> {
  for (const child of [...children]) child.kill();
  for (const name of [...databases]) {
    await admin
      .query(`drop database if exists ${name} with (force)`)
      .catch((error: unknown) => log(`  could not drop ${name}: ${String(error)}`));
  }
  await admin.end().catch(() => undefined);
}

let cleaningUp = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (cleaningUp) return;
    cleaningUp = true;
    log(`\n${signal}: stopping children and dropping databases`);
    void cleanup().finally(() => process.exit(130));
  });
}
const watchdog = setTimeout(() => {
  log(`\nthe run passed BENCH_TOTAL_TIMEOUT_S (${settings.totalTimeoutMs / 1000} s): aborting`);
  cleaningUp = true;
  void cleanup().finally(() => process.exit(3));
}, settings.totalTimeoutMs);
watchdog.unref();

async function main(): Promise<void> {
  const selected = (process.env.BENCH_SYSTEMS?.split(',').map((s) => s.trim()) ?? [...SYSTEMS]) as SystemName[];
  for (const system of selected)
    if (!SYSTEMS.includes(system)) throw new Error(`unknown system in BENCH_SYSTEMS: ${system}`);
  log(`bench: N=${settings.n}, bulk=${settings.bulk}, claim rows=${settings.claimRows}, systems=${selected.join(',')}`);

  const results: SystemResult[] = [];
  let critical: CriticalResult | undefined;
  let claim: ClaimResult | undefined;
  const { sink, port } = await phase('start the SMTP sink', startSink);
  try {
    for (const system of selected) {
      try {
        if (system === 'smtp-only') results.push(await benchSmtpOnly(sink, port));
        else {
          const outcome = await benchQueue(system, sink, port);
          results.push(outcome.result);
          critical = outcome.critical ?? critical;
        }
      } catch (error) {
        log(`  ${system} failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
        results.push({ system, error: String(error) });
      }
    }
    if (!process.env.BENCH_SKIP_CLAIM) {
      const dbName = `bench_claim_${tag}`;
      try {
        const url = await createDatabase(dbName);
        claim = await phase('claim statement on an empty and on a large outbox', () =>
          runClaimBenchmark(
            url,
            settings.claimRows,
            settings.suppressions,
            now() + limit(settings.claimTimeoutMs),
            (line) => log(line),
          ),
        );
      } catch (error) {
        log(`  claim benchmark failed: ${String(error)}`);
      } finally {
        await dropDatabase(dbName);
      }
    }
  } finally {
    await sink.stop(5_000);
  }

  const text = report(results, critical, claim);
  log(`\n${text}`);
  const resultsDir = new URL('./results/', import.meta.url);
  mkdirSync(resultsDir, { recursive: true });
  const file = new URL(`${new Date().toISOString().replace(/[:.]/g, '-')}.json`, resultsDir);
  writeFileSync(
    file,
    JSON.stringify(
      {
        startedAt: new Date(runStartedAt).toISOString(),
        settings,
        machine: { node: process.version, cpus: (await import('node:os')).cpus().length },
        results,
        critical,
        claim,
        phases,
        table: text,
      },
      null,
      2,
    ),
  );
  log(`\nwritten ${file.pathname}`);
}

try {
  await main();
} catch (error) {
  log(`bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  process.exitCode = 1;
} finally {
  if (!cleaningUp) await cleanup();
  clearTimeout(watchdog);
}
