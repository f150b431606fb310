// Each system under test: smtp-only, the queues, and reliable-mail's critical lane under a bulk backlog.
import { Child, now, queueMessageId, settings, sleep, type SystemName } from '../common.js';
import type { TracedStages } from '../stage-trace.js';
import {
  clearAndVacuum,
  GraphileWorkerProducer,
  PgBossProducer,
  type Producer,
  ReliableMailProducer,
} from '../producers.js';
import type { CriticalResult, EnqueueFigure, SystemResult } from './types.js';
import { createDatabase, dropDatabase, limit, log, phase, tag } from './context.js';
import { sinkStats } from './sink.js';
import {
  enqueueBatched,
  enqueueSingle,
  enqueueSpaced,
  latencyFigure,
  measureDrain,
  measureIdle,
  startWorker,
} from './figures.js';

export async function benchSmtpOnly(sink: Child, port: number): Promise<SystemResult> {
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

export function producerFor(system: SystemName, url: string, port: number): Producer {
  if (system === 'reliable-mail') return new ReliableMailProducer(url, port);
  if (system === 'pg-boss') return new PgBossProducer(url);
  if (system === 'graphile-worker') return new GraphileWorkerProducer(url);
  throw new Error(`no producer for ${system}`);
}

export const SHORT: Record<SystemName, string> = {
  'smtp-only': 'smtp',
  'reliable-mail': 'rm',
  'pg-boss': 'boss',
  'graphile-worker': 'gw',
};

export async function benchQueue(
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
    if (settings.warmup > 0) {
      result.enqueueSingleCold = await phase(`${system}: warm-up, ${settings.warmup} enqueues each way`, () =>
        warmUp(producer, url),
      );
    }
    result.enqueueSingle = await phase(`${system}: enqueue N, one per transaction`, () =>
      enqueueSingle((index, tag) => producer.enqueueOne(index, tag), settings.n, 'single'),
    );
    await clearAndVacuum(producer, url);
    const { enqueueOneWithoutCommitHook } = producer;
    if (enqueueOneWithoutCommitHook) {
      result.enqueueSingleWithoutCommitHook = await phase(
        `${system}: enqueue N, one per transaction of a pg client (no commit hook)`,
        () => enqueueSingle(enqueueOneWithoutCommitHook.bind(producer), settings.n, 'single-pg'),
      );
      await clearAndVacuum(producer, url);
    }
    const batched = await phase(`${system}: enqueue N in batches of ${settings.batchSize}`, () =>
      enqueueBatched(producer, settings.n, 'drain'),
    );
    result.enqueueBatched = batched.figure;

    const { worker, rss } = await phase(`${system}: start the worker process`, () =>
      startWorker(system, url, port, settings.n),
    );
    try {
      result.drain = await phase(`${system}: drain N`, () => measureDrain(system, sink, worker, rss, batched.ids));
      const tracing = system === 'reliable-mail' && settings.traceStages;
      if (tracing) await worker.request('clearTrace');
      result.idle = await phase(`${system}: idle latency`, () =>
        measureIdle(sink, (index) => producer.enqueueOne(index, 'idle')),
      );
      if (tracing) result.idleStages = (await tracedStages(worker)) ?? undefined;
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

/** Enqueues `settings.warmup` mails each way the producer has, then removes them; resolves with the first way's rate. */
async function warmUp(producer: Producer, url: string): Promise<EnqueueFigure> {
  const cold = await enqueueSingle((index, tag) => producer.enqueueOne(index, tag), settings.warmup, 'warmup');
  const { enqueueOneWithoutCommitHook } = producer;
  if (enqueueOneWithoutCommitHook)
    await enqueueSingle(enqueueOneWithoutCommitHook.bind(producer), settings.warmup, 'warmup-pg');
  await enqueueBatched(producer, settings.warmup, 'warmup-batched');
  await clearAndVacuum(producer, url);
  return cold;
}

/**
 * What reliable-mail's worker traced (BENCH_TRACE_IDLE). The sink counts a mail before the worker marks its send's
 * end: a moment for the last one's mark. A trace that cannot be read costs the trace, not the repetition's figures.
 */
async function tracedStages(worker: Child): Promise<TracedStages | null> {
  await sleep(100);
  return worker.request<TracedStages | null>('tracedStages').catch(() => null);
}

export async function benchCritical(
  producer: Producer,
  sink: Child,
  url: string,
  port: number,
): Promise<CriticalResult> {
  await producer.clear();
  const bulk = await enqueueBatched(producer, settings.bulk, 'bulk', 'bulk');
  log(`  enqueued ${bulk.ids.length.toLocaleString('en-US')} bulk emails in ${bulk.figure.seconds.toFixed(1)} s`);
  await sink.request('reset');
  const { worker } = await startWorker('reliable-mail', url, port, settings.bulk, 'critical');
  try {
    await worker.request('start', {}, 120_000);
    // One stream of critical emails from the start, measured in two parts: an instance that has just started is
    // still opening its connections, which a login code at a running instance finds open.
    const enqueueCritical = (index: number) => producer.enqueueOne(index, 'critical', 'critical');
    const startupAt = await enqueueSpaced(settings.criticalStartupEmails, settings.criticalSpacingMs, enqueueCritical);
    if (settings.traceStages) await worker.request('clearTrace');
    const committedAt = await enqueueSpaced(settings.criticalEmails, settings.criticalSpacingMs, (index) =>
      enqueueCritical(settings.criticalStartupEmails + index),
    );
    const criticalIds = [...startupAt.keys(), ...committedAt.keys()];
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
    const stages = settings.traceStages ? await tracedStages(worker) : null;
    const lastCritical = Object.values(accepted).length ? Math.max(...Object.values(accepted)) : null;
    const all = (await sinkStats(sink, { withTimestamps: true })).perMessageId ?? {};
    const criticalSet = new Set(criticalIds);
    const bulkTimes = Object.entries(all)
      .filter(([id, at]) => !criticalSet.has(id) && lastCritical !== null && at <= lastCritical)
      .map(([, at]) => at);
    const bulkBefore = lastCritical === null ? null : bulkTimes.length;
    const firstBulk = bulkTimes.length > 0 ? bulkTimes.reduce((a, b) => Math.min(a, b)) : null;
    const bulkPerSecond =
      lastCritical === null || firstBulk === null || lastCritical <= firstBulk
        ? null
        : (bulkTimes.length * 1000) / (lastCritical - firstBulk);
    return {
      bulk: bulk.ids.length,
      bulkEnqueue: bulk.figure,
      startup: latencyFigure(startupAt, accepted),
      critical: latencyFigure(committedAt, accepted),
      bulkSentBeforeLastCritical: bulkBefore,
      bulkPerSecond,
      bulkPendingWhenLastCriticalArrived: bulkBefore === null ? null : bulk.ids.length - bulkBefore,
      bulkPendingInDbAfterLastCritical: pendingInDb,
      ...(stages ? { stages } : {}),
      timedOut,
    };
  } finally {
    // The bulk backlog is left unsent: stopping waits only for the sends in flight.
    await worker.stop(40_000);
  }
}
