// One system's sending side in a process of its own, so that its memory can be measured:
//   node --conditions=@reliable-mail/source --import @swc-node/register/esm-register bench/drain-worker.ts <system> '<json: { databaseUrl, smtpPort, n, tracedLane? }>'
// It pushes { type: 'ready' } once connected (nothing runs yet), { type: 'rss' } every 100 ms, and answers:
//   start -> starts the dispatcher / workers (smtp-only: starts sending n emails) and returns when it started
//   send  -> smtp-only: sends one email now (idle latency floor)
//   stats -> counters of the run (reliable-mail: claim/settle/send timings, from wrappers set up below)
//   stop  -> stops gracefully and exits
// Each system's packages are imported only when that system runs, so the peak RSS is its own.
import { readFileSync } from 'node:fs';
import type { LoggerService } from '@nestjs/common';
import type { TestingModule } from '@nestjs/testing';
import type { Runner } from 'graphile-worker';
import nodemailer from 'nodemailer';
import type { PgBoss } from 'pg-boss';
import { DEFAULT_SCHEMA, tablesIn } from '../libs/reliable-mail/src/schema/outbox-tables.js';
import { StageTrace, type TracedStages } from './stage-trace.js';
import {
  FROM,
  GRAPHILE_TASK,
  type JobPayload,
  mailFor,
  now,
  PG_BOSS_QUEUE,
  push,
  queueMessageId,
  serveIpc,
  settings,
  smtpTransport,
  type SystemName,
} from './common.js';

interface WorkerArguments {
  databaseUrl: string;
  smtpPort: number;
  n: number;
  /** reliable-mail with BENCH_TRACE_IDLE: the lane whose mails are traced (`default`, or `critical` under bulk). */
  tracedLane?: string;
}

interface SystemRunner {
  prepare(): Promise<void>;
  start(): Promise<void>;
  stop(): Promise<void>;
  stats?(): unknown;
  /** reliable-mail with BENCH_TRACE_IDLE: the stages of the traced lane's mails since `clearTrace`. */
  tracedStages?(): TracedStages | null;
  clearTrace?(): void;
  send?(request: { messageId: string; index: number }): Promise<void>;
}

const system = process.argv[2] as SystemName;
const args = JSON.parse(process.argv[3] ?? '{}') as WorkerArguments;

const quietNestLogger: LoggerService = {
  log: () => undefined,
  error: (...parts: unknown[]) => console.error('[reliable-mail]', ...parts),
  warn: (...parts: unknown[]) => console.warn('[reliable-mail]', ...parts),
};

/** A pooled nodemailer transport as every system uses it: 16 connections to the sink. */
function pooledTransport() {
  return nodemailer.createTransport({
    ...smtpTransport(args.smtpPort),
    pool: true,
    maxConnections: settings.concurrency,
  });
}

async function sendJob(transport: ReturnType<typeof pooledTransport>, job: JobPayload): Promise<void> {
  await transport.sendMail({ from: FROM, to: job.to, subject: job.subject, text: job.text, messageId: job.messageId });
}

// ---- Counters around the library's statements, to show where the dispatcher spends its time. ----

class Timing {
  calls = 0;
  rows = 0;
  totalMs = 0;
  maxMs = 0;
  readonly rowHistogram = new Map<number, number>();

  record(ms: number, rows: number): void {
    this.calls++;
    this.rows += rows;
    this.totalMs += ms;
    this.maxMs = Math.max(this.maxMs, ms);
    const bucket = rows <= 1 ? rows : rows <= 4 ? 4 : rows <= 16 ? 16 : 64;
    this.rowHistogram.set(bucket, (this.rowHistogram.get(bucket) ?? 0) + 1);
  }

  toJSON() {
    return {
      calls: this.calls,
      rows: this.rows,
      rowsPerCall: this.calls ? +(this.rows / this.calls).toFixed(2) : null,
      avgMs: this.calls ? +(this.totalMs / this.calls).toFixed(2) : null,
      maxMs: +this.maxMs.toFixed(1),
      callsByRows: Object.fromEntries(
        [...this.rowHistogram.entries()]
          .sort((a, b) => a[0] - b[0])
          .map(([k, v]) => [k <= 1 ? String(k) : `<=${k}`, v]),
      ),
    };
  }
}

async function instrumentReliableMail(trace: StageTrace | null, lane: string) {
  const { OutboxDatabase } = await import('../libs/reliable-mail/src/database/outbox-database.js');
  const { SmtpMailTransport } = await import('../libs/reliable-mail/src/transport/smtp/smtp-mail.transport.js');
  if (trace) {
    const { LaneLoop } = await import('../libs/reliable-mail/src/dispatch/lane-loop.js');
    const wake = LaneLoop.prototype.wake;
    LaneLoop.prototype.wake = function (this: InstanceType<typeof LaneLoop>) {
      if (this.lane.name === lane) trace.mark('wake');
      wake.apply(this);
    };
  }
  type OutboxDatabase = InstanceType<typeof OutboxDatabase>;
  type SmtpMailTransport = InstanceType<typeof SmtpMailTransport>;
  const timings = { claim: new Timing(), settle: new Timing(), deleteEvents: new Timing(), smtpSend: new Timing() };
  // Rows per call: what the claim returned, and how many settlements or events the statement was given.
  const timed: Record<string, [Timing, (values: readonly unknown[], rows: unknown[]) => number]> = {
    reliable_mail_claim: [timings.claim, (_values, rows) => rows.length],
    reliable_mail_settle: [timings.settle, (values) => (values[2] as unknown[]).length],
    reliable_mail_confirm_events: [timings.deleteEvents, (values) => (values[0] as unknown[]).length],
  };
  const query = OutboxDatabase.prototype.query;
  OutboxDatabase.prototype.query = async function <R>(this: OutboxDatabase, ...params: Parameters<typeof query>) {
    const started = performance.now();
    const { name } = params[0].in(tablesIn(DEFAULT_SCHEMA));
    // claimValues puts the lane first.
    const claim = name === 'reliable_mail_claim' && params[1][0] === lane;
    if (claim) trace?.mark('claim-start');
    const rows = await query.apply(this, params);
    if (claim) trace?.mark('claim-end', rows.length);
    const timing = name ? timed[name] : undefined;
    timing?.[0].record(performance.now() - started, timing[1](params[1], rows));
    return rows as R[];
  };
  const send = SmtpMailTransport.prototype.send;
  SmtpMailTransport.prototype.send = async function (this: SmtpMailTransport, ...params: Parameters<typeof send>) {
    const started = performance.now();
    const traced = params[0].lane === lane;
    if (traced) trace?.mark('send-start');
    try {
      return await send.apply(this, params);
    } finally {
      if (traced) trace?.mark('send-end');
      timings.smtpSend.record(performance.now() - started, 1);
    }
  };
  return timings;
}

// ---- The systems ----

function smtpOnly(): SystemRunner {
  const transport = pooledTransport();
  let sending: Promise<void> | null = null;
  let failures = 0;
  return {
    async prepare() {
      await transport.verify();
    },
    async start() {
      let next = 0;
      const loop = async () => {
        while (next < args.n) {
          const index = next++;
          try {
            await sendJob(transport, {
              ...mailFor(index, 'drain'),
              messageId: queueMessageId('smtp-only', 'drain', index),
            });
          } catch {
            failures++;
          }
        }
      };
      sending = Promise.all(Array.from({ length: settings.concurrency }, loop)).then(() => undefined);
    },
    async send({ messageId, index }) {
      await sendJob(transport, { ...mailFor(index, 'idle'), messageId });
    },
    stats: () => ({ failures }),
    async stop() {
      await sending;
      transport.close();
    },
  };
}

function reliableMail(): SystemRunner {
  let timings: Awaited<ReturnType<typeof instrumentReliableMail>> | null = null;
  const trace = settings.traceStages ? new StageTrace() : null;
  let moduleRef: TestingModule | null = null;
  return {
    async prepare() {
      await import('reflect-metadata');
      timings = await instrumentReliableMail(trace, args.tracedLane ?? 'default');
      const { MikroOrmModule } = await import('@mikro-orm/nestjs');
      const { EventEmitterModule } = await import('@nestjs/event-emitter');
      const { ScheduleModule } = await import('@nestjs/schedule');
      const { Test } = await import('@nestjs/testing');
      const { ReliableMailModule } = await import('@reliable-mail/nestjs');
      const { ormConfig, reliableMailOptions } = await import('./reliable-mail-config.js');
      // compile() connects MikroORM; the dispatcher only starts with init() (onApplicationBootstrap).
      moduleRef = await Test.createTestingModule({
        imports: [
          MikroOrmModule.forRoot(ormConfig(args.databaseUrl)),
          EventEmitterModule.forRoot(),
          ScheduleModule.forRoot(),
          ReliableMailModule.forRoot(reliableMailOptions(args.smtpPort, true)),
        ],
      })
        .setLogger(quietNestLogger)
        .compile();
    },
    async start() {
      await moduleRef!.init();
    },
    stats: () => timings,
    tracedStages: () => trace?.stages() ?? null,
    clearTrace: () => trace?.clear(),
    async stop() {
      await moduleRef?.close();
    },
  };
}

function pgBoss(): SystemRunner {
  const transport = pooledTransport();
  let boss: PgBoss | null = null;
  let failures = 0;
  return {
    async prepare() {
      const { PgBoss } = await import('pg-boss');
      boss = new PgBoss({ connectionString: args.databaseUrl, useListenNotify: true, schedule: false });
      boss.on('error', (error: unknown) => console.error('[pg-boss]', String(error)));
      await boss.start();
      await transport.verify();
    },
    async start() {
      // 4 workers x batches of 4 = 16 sends in flight; a full batch fetches again at once (burst), and NOTIFY
      // wakes an idle worker (the queue is created with notify: true). One email = one job.
      await boss!.work<JobPayload>(
        PG_BOSS_QUEUE,
        { localConcurrency: 4, batchSize: 4, burstWhenBatchFull: true, pollingIntervalSeconds: 1 },
        async (jobs) => {
          await Promise.all(
            jobs.map((job) =>
              sendJob(transport, job.data).catch((error: unknown) => {
                failures++;
                throw error;
              }),
            ),
          );
        },
      );
    },
    stats: () => ({ failures }),
    async stop() {
      await boss?.stop({ graceful: true, timeout: 10_000 });
      transport.close();
    },
  };
}

function graphileWorker(): SystemRunner {
  const transport = pooledTransport();
  let runner: Runner | null = null;
  let failures = 0;
  return {
    async prepare() {
      await transport.verify();
    },
    async start() {
      const { run: runGraphileWorker } = await import('graphile-worker');
      const { graphileLogger } = await import('./graphile-logger.js');
      runner = await runGraphileWorker({
        connectionString: args.databaseUrl,
        concurrency: settings.concurrency,
        // The docs' advice: concurrentJobs + 2 when that is more than 10.
        maxPoolSize: settings.concurrency + 2,
        pollInterval: 1000,
        noHandleSignals: true,
        logger: graphileLogger,
        taskList: {
          [GRAPHILE_TASK]: async (payload) => {
            try {
              await sendJob(transport, payload as JobPayload);
            } catch (error) {
              failures++;
              throw error;
            }
          },
        },
      });
    },
    stats: () => ({ failures }),
    async stop() {
      await runner?.stop();
      transport.close();
    },
  };
}

const runners: Record<SystemName, () => SystemRunner> = {
  'smtp-only': smtpOnly,
  'reliable-mail': reliableMail,
  'pg-boss': pgBoss,
  'graphile-worker': graphileWorker,
};

function vmHwmBytes(): number | null {
  try {
    const kb = /VmHWM:\s+(\d+)\s+kB/.exec(readFileSync('/proc/self/status', 'utf8'))?.[1];
    return kb ? Number(kb) * 1024 : null;
  } catch {
    return null;
  }
}

if (!runners[system]) {
  console.error(`unknown system ${system}; one of ${Object.keys(runners).join(', ')}`);
  process.exit(2);
}
const runner = runners[system]();
const rssTimer = setInterval(() => push({ type: 'rss', t: now(), rss: process.memoryUsage().rss }), 100);

serveIpc({
  async start() {
    const startedAt = now();
    await runner.start();
    return { startedAt, runningAt: now() };
  },
  async send(request) {
    if (!runner.send) throw new Error(`${system} has no direct send`);
    await runner.send(request as unknown as { messageId: string; index: number });
    return true;
  },
  stats: () => ({ ...(runner.stats?.() as object), vmHwm: vmHwmBytes() }),
  tracedStages: () => runner.tracedStages?.() ?? null,
  clearTrace: () => runner.clearTrace?.() ?? null,
  async stop() {
    clearInterval(rssTimer);
    await runner.stop();
    setTimeout(() => process.exit(0), 50);
    return { vmHwm: vmHwmBytes() };
  },
});

try {
  await runner.prepare();
  push({ type: 'ready', t: now() });
} catch (error) {
  console.error(`[drain-worker ${system}] prepare failed:`, error);
  process.exit(1);
}
