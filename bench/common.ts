// Shared settings and helpers of the benchmark (see bench/README.md). Nothing here is part of the library.
import { type ChildProcess, fork } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** An integer setting of at least `minimum`, or `fallback` when unset (null: the default is worked out later). */
export function intFromEnv<Fallback extends number | null>(
  name: string,
  fallback: Fallback,
  minimum = 1,
): number | Fallback {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < minimum)
    throw new Error(`${name} must be an integer >= ${minimum}, got ${JSON.stringify(raw)}`);
  return value;
}

export const settings = {
  /** Emails per system for the enqueue and drain figures. */
  n: intFromEnv('BENCH_N', 10_000),
  /** Bulk backlog of the critical-lane figure. */
  bulk: intFromEnv('BENCH_BULK', 50_000),
  /** Sent rows for the claim figure; due rows are a tenth of it. */
  claimRows: intFromEnv('BENCH_CLAIM_ROWS', 1_000_000),
  /**
   * Addresses on reliable-mail's suppression list (none of them a recipient) for the claim figure and for a second
   * reliable-mail drain; 0 skips that drain. About 1% hard bounces of a million sent.
   */
  suppressions: intFromEnv('BENCH_SUPPRESSIONS', 10_000, 0),
  /**
   * Enqueues each way (one per transaction, through a pg client where the system has it, in batches) before the
   * enqueue figures, not counted: a fresh process compiles its stack's code over its first thousands of enqueues (a
   * running app has that behind it), and MikroORM's deeper stack takes longer to warm than a pg client's. The
   * one-per-transaction rate of the warm-up is reported apart, as the cold figure.
   */
  warmup: intFromEnv('BENCH_WARMUP', 5_000, 0),
  /**
   * Times every system is measured, each time in another order (bench/run/order.ts): the targets are read within
   * each repetition and as the median of them. Unset: one full set of orders, as many repetitions as the systems
   * selected (twice as many for an odd number), which puts each system as often in each place. The claim figure is
   * measured once.
   */
  repetitions: intFromEnv('BENCH_REPS', null),
  /** BENCH_TRACE_IDLE: reliable-mail's worker traces where its idle and critical mails' time goes (stage-trace.ts). */
  traceStages: Boolean(process.env.BENCH_TRACE_IDLE),
  /** Sends in flight per system, producers of the one-per-transaction enqueue. */
  concurrency: 16,
  batchSize: 500,
  /** Producers running batches of 500 at once. */
  batchProducers: 4,
  /** Idle mails per system: the p99 of 1,000 is its 10th worst. */
  idleEmails: intFromEnv('BENCH_IDLE', 1_000),
  idleSpacingMs: 20,
  /**
   * Critical emails of the first second after the worker starts, a figure of their own: they meet connections still
   * opening (an SMTP server's greeting pause, new database sessions) and code not yet compiled.
   */
  criticalStartupEmails: 10,
  /** Critical emails after those, once the worker runs: the figure set against the idle latency. */
  criticalEmails: intFromEnv('BENCH_CRITICAL', 50),
  criticalSpacingMs: 100,
  /** Per-phase time limits: a phase that hits one stops and reports what it got. */
  enqueueTimeoutMs: intFromEnv('BENCH_ENQUEUE_TIMEOUT_S', 180) * 1000,
  drainTimeoutMs: intFromEnv('BENCH_DRAIN_TIMEOUT_S', 180) * 1000,
  idleTimeoutMs: intFromEnv('BENCH_IDLE_TIMEOUT_S', 60) * 1000,
  criticalTimeoutMs: intFromEnv('BENCH_CRITICAL_TIMEOUT_S', 120) * 1000,
  claimTimeoutMs: intFromEnv('BENCH_CLAIM_TIMEOUT_S', 300) * 1000,
  /** The whole run is aborted (and cleaned up) after this. */
  totalTimeoutMs: intFromEnv('BENCH_TOTAL_TIMEOUT_S', 3600) * 1000,
  pgUrl: process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432',
};

export const FROM = 'bench@example.com';
export const MESSAGE_ID_DOMAIN = 'bench.example.com';
export const SYSTEMS = ['smtp-only', 'reliable-mail', 'pg-boss', 'graphile-worker'] as const;
export type SystemName = (typeof SYSTEMS)[number];
export const PG_BOSS_QUEUE = 'email';
export const GRAPHILE_TASK = 'send_email';

/** Linux's clock ticks per second for /proc/<pid>/stat (USER_HZ, 100 on every common kernel). */
const CLOCK_TICKS_PER_SECOND = 100;

/** User + system CPU time of a process so far, ms, or null where /proc cannot tell (not Linux, or it exited). */
function cpuMsOfProcess(pid: string | number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // utime and stime: fields 14 and 15 of the line, counted from the state (field 3).
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS_PER_SECOND;
  } catch {
    return null;
  }
}

/** CPU time so far (user + system, ms) of some processes, and of each PostgreSQL server process by pid; read from /proc. */
export interface CpuSnapshot {
  processes: Record<string, number | null>;
  postgres: Map<string, number> | null;
}

export function cpuSnapshot(pids: Record<string, number | undefined>): CpuSnapshot {
  const processes: Record<string, number | null> = {};
  for (const [name, pid] of Object.entries(pids)) processes[name] = pid === undefined ? null : cpuMsOfProcess(pid);
  let postgres: Map<string, number> | null = new Map();
  try {
    for (const pid of readdirSync('/proc')) {
      if (!/^\d+$/.test(pid)) continue;
      let comm: string;
      try {
        comm = readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
      } catch {
        continue;
      }
      const ms = comm === 'postgres' ? cpuMsOfProcess(pid) : null;
      if (ms !== null) postgres.set(pid, ms);
    }
  } catch {
    postgres = null;
  }
  return { processes, postgres };
}

/**
 * CPU time spent between two snapshots, ms, by each named process and by PostgreSQL as a whole (its processes that
 * lived through both, plus those started in between). A server process that exited in between takes its time with
 * it: the figure is a lower bound, close when the systems keep their connections open, as they do in a drain.
 */
export function cpuSpent(before: CpuSnapshot, after: CpuSnapshot): Record<string, number | null> {
  const spent: Record<string, number | null> = {};
  for (const [name, ms] of Object.entries(after.processes)) {
    const start = before.processes[name];
    spent[name] = ms === null || start === null || start === undefined ? null : ms - start;
  }
  if (before.postgres && after.postgres) {
    let postgres = 0;
    for (const [pid, ms] of after.postgres) postgres += ms - (before.postgres.get(pid) ?? 0);
    spent.postgres = postgres;
  } else {
    spent.postgres = null;
  }
  return spent;
}

/** Wall-clock milliseconds with sub-millisecond resolution, comparable between processes of this machine. */
export function now(): number {
  return performance.timeOrigin + performance.now();
}

export function databaseUrl(database: string): string {
  const url = new URL(settings.pgUrl);
  url.pathname = `/${database}`;
  return url.toString();
}

// ~2 KB of text per email, different per email, compressible about as much as prose (not a repeated pattern).
const WORDS = (
  'order invoice shipment account password reset confirm welcome receipt payment delivery tracking update ' +
  'subscription renewal reminder security alert login device address change profile verify summary weekly ' +
  'report export ready download link expires hours thanks regards team support question reply refund item ' +
  'quantity total tax discount coupon cart checkout warehouse courier parcel signature schedule window'
).split(' ');

function wordsFor(seed: number): string {
  let state = (seed * 2_654_435_761 + 1) >>> 0;
  const parts: string[] = [];
  let length = 0;
  while (length < 2_000) {
    state = (state * 1_664_525 + 1_013_904_223) >>> 0;
    const word = WORDS[state % WORDS.length];
    const piece = state % 11 === 0 ? `${word}.\n` : `${word} `;
    parts.push(piece);
    length += piece.length;
  }
  return parts.join('');
}

/**
 * Texts made once, before any figure is taken: made per mail, they took a tenth of the producer's CPU in the batched
 * enqueue (a profile of it), time that was the bench's and not the system's under test.
 */
const TEXTS = Array.from({ length: 1_024 }, (_, seed) => wordsFor(seed));

export function bodyFor(seed: number): string {
  return `Hello customer ${seed},\n\n${TEXTS[seed % TEXTS.length]}`;
}

export interface BenchMail {
  to: string;
  subject: string;
  text: string;
}

export function mailFor(index: number, tag: string): BenchMail {
  return { to: `user${index}@example.com`, subject: `Bench ${tag} #${index}`, text: bodyFor(index) };
}

/** The job payload of the queue systems: the mail and the Message-ID the worker sends it with. */
export interface JobPayload extends BenchMail {
  messageId: string;
}

export function queueMessageId(system: string, tag: string, index: number): string {
  return `<${system}-${tag}-${index}@${MESSAGE_ID_DOMAIN}>`;
}

export function percentile(values: number[], p: number): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank];
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export function smtpTransport(port: number) {
  return { host: '127.0.0.1', port, secure: false, ignoreTLS: true } as const;
}

// ---- IPC between the runner and its children: requests with an id, answered once; pushes without one. ----

export interface IpcRequest {
  id: number;
  cmd: string;
  [key: string]: unknown;
}

export interface IpcReply {
  id: number;
  ok: boolean;
  result?: unknown;
  error?: string;
}

export interface IpcPush {
  type: string;
  [key: string]: unknown;
}

/** A forked TypeScript child with request/reply over IPC. */
export class Child {
  readonly process: ChildProcess;
  private nextId = 1;
  private readonly pending = new Map<
    number,
    { resolve(value: unknown): void; reject(error: Error): void; timer: NodeJS.Timeout }
  >();
  private readonly pushListeners: ((message: IpcPush) => void)[] = [];
  exited = false;

  constructor(
    readonly name: string,
    file: string,
    args: string[],
  ) {
    this.process = fork(fileURLToPath(new URL(file, import.meta.url)), args, {
      // BENCH_CPU_PROF=<dir> writes a V8 CPU profile of every child process there, for finding hot spots.
      execArgv: [
        '--conditions=@reliable-mail/source',
        '--import',
        '@swc-node/register/esm-register',
        ...(process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`] : []),
      ],
      env: { ...process.env, NODE_OPTIONS: '' },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    this.process.on('message', (message: IpcReply | IpcPush) => {
      if ('id' in message && typeof message.id === 'number') {
        const waiting = this.pending.get(message.id);
        if (!waiting) return;
        this.pending.delete(message.id);
        clearTimeout(waiting.timer);
        if (message.ok) waiting.resolve(message.result);
        else waiting.reject(new Error(`${this.name}: ${String(message.error)}`));
      } else {
        for (const listener of this.pushListeners) listener(message as IpcPush);
      }
    });
    this.process.on('exit', (code, signal) => {
      this.exited = true;
      for (const [id, waiting] of this.pending) {
        clearTimeout(waiting.timer);
        waiting.reject(new Error(`${this.name} exited (${code ?? signal}) before answering request ${id}`));
      }
      this.pending.clear();
    });
  }

  onPush(listener: (message: IpcPush) => void): void {
    this.pushListeners.push(listener);
  }

  /** Resolves on the first push of this type. */
  waitForPush(type: string, timeoutMs: number): Promise<IpcPush> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${this.name}: no '${type}' within ${timeoutMs} ms`)), timeoutMs);
      const onExit = () => {
        clearTimeout(timer);
        reject(new Error(`${this.name} exited before '${type}'`));
      };
      this.process.once('exit', onExit);
      this.onPush((message) => {
        if (message.type !== type) return;
        clearTimeout(timer);
        this.process.off('exit', onExit);
        resolve(message);
      });
    });
  }

  request<T>(cmd: string, body: Record<string, unknown> = {}, timeoutMs = 30_000): Promise<T> {
    if (this.exited) return Promise.reject(new Error(`${this.name} has exited`));
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`${this.name}: '${cmd}' timed out after ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(id, { resolve: resolve, reject, timer });
      this.process.send({ id, cmd, ...body } satisfies IpcRequest);
    });
  }

  /** Asks the child to stop, then kills it (by its pid) if it has not exited in time. */
  async stop(timeoutMs = 15_000): Promise<void> {
    if (this.exited) return;
    const exited = new Promise<void>((resolve) => this.process.once('exit', () => resolve()));
    try {
      await this.request('stop', {}, timeoutMs);
    } catch {
      // killed below
    }
    await Promise.race([exited, sleep(timeoutMs)]);
    if (!this.exited) {
      this.process.kill('SIGKILL');
      await Promise.race([exited, sleep(2_000)]);
    }
  }

  kill(): void {
    if (!this.exited) this.process.kill('SIGKILL');
  }
}

/** The child side: answers requests with the given handlers, exits when the parent goes away. */
export function serveIpc(handlers: Record<string, (request: IpcRequest) => unknown>): void {
  process.on('message', (request: IpcRequest) => void answer(request));
  async function answer(request: IpcRequest): Promise<void> {
    const handler = handlers[request.cmd];
    try {
      if (!handler) throw new Error(`unknown command ${request.cmd}`);
      const result = await handler(request);
      process.send?.({ id: request.id, ok: true, result } satisfies IpcReply);
    } catch (error) {
      process.send?.({
        id: request.id,
        ok: false,
        error: error instanceof Error ? (error.stack ?? error.message) : String(error),
      } satisfies IpcReply);
    }
  }
  process.on('disconnect', () => process.exit(0));
}

export function push(message: IpcPush): void {
  if (process.connected) process.send?.(message);
}
