// The measurements: enqueue rates, a drain and idle latency, the same way for every system.
import { Child, cpuSnapshot, cpuSpent, now, percentile, settings, sleep, type SystemName } from '../common.js';
import { type Producer } from '../producers.js';
import type { EnqueueFigure, LatencyFigure, SystemResult } from './types.js';
import { limit, log, spawn } from './context.js';
import { sinkStats, waitForSink } from './sink.js';

/** Runs `total` jobs `index => work(index)` with `workers` of them in flight; stops starting new ones at the deadline. */
export async function runPool(
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

export function enqueueFigure(emails: number, seconds: number, timedOut: boolean): EnqueueFigure {
  return { emails, seconds: +seconds.toFixed(3), perSecond: +(emails / seconds).toFixed(1), timedOut };
}

export async function enqueueSingle(
  enqueueOne: Producer['enqueueOne'],
  count: number,
  tagName: string,
): Promise<EnqueueFigure> {
  const { done, seconds, timedOut } = await runPool(
    count,
    settings.concurrency,
    settings.enqueueTimeoutMs,
    async (index) => {
      await enqueueOne(index, tagName);
    },
  );
  return enqueueFigure(done, seconds, timedOut);
}

export async function enqueueBatched(
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
export type Enqueued = string | { messageId: string; at: number };

export async function enqueueSpaced(
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

export function latencyFigure(committedAt: Map<string, number>, acceptedAt: Record<string, number>): LatencyFigure {
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

/**
 * Starts bench/drain-worker.ts for a system and waits until it is connected (not yet sending). `tracedLane`: the lane
 * whose mails reliable-mail's worker traces with BENCH_TRACE_IDLE (`default` if absent).
 */
export async function startWorker(system: SystemName, url: string, smtpPort: number, n: number, tracedLane?: string) {
  const worker = spawn(`drain-worker ${system}`, './drain-worker.ts', [
    system,
    JSON.stringify({ databaseUrl: url, smtpPort, n, tracedLane }),
  ]);
  const rss: { t: number; rss: number }[] = [];
  worker.onPush((message) => {
    if (message.type === 'rss') rss.push({ t: message.t as number, rss: message.rss as number });
  });
  await worker.waitForPush('ready', 120_000);
  return { worker, rss };
}

export async function measureDrain(
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

export async function measureIdle(sink: Child, enqueue: (index: number) => Promise<Enqueued>): Promise<LatencyFigure> {
  // Let the worker go idle (back to LISTEN and its slow poll) after the drain.
  await sleep(2_000);
  await sink.request('reset');
  const committedAt = await enqueueSpaced(settings.idleEmails, settings.idleSpacingMs, enqueue);
  await waitForSink(sink, committedAt.size, settings.idleTimeoutMs, 20);
  const stats = await sinkStats(sink, { ids: [...committedAt.keys()] });
  return latencyFigure(committedAt, stats.perMessageId ?? {});
}
