// The shapes of what the benchmark measures, as bench/results/*.json stores them.
import { type SystemName } from '../common.js';
import type { TracedStages } from '../stage-trace.js';

export interface SinkStats {
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

export interface EnqueueFigure {
  emails: number;
  seconds: number;
  perSecond: number;
  timedOut: boolean;
}

export interface LatencyFigure {
  sent: number;
  arrived: number;
  p50: number | null;
  p95: number | null;
  p99: number | null;
  max: number | null;
  /** Each email's latency in ms, in the order they were enqueued (null: never arrived). */
  series: (number | null)[];
}

export interface SystemResult {
  system: SystemName;
  enqueueSingle?: EnqueueFigure;
  /** The warm-up's one-per-transaction enqueues: the first `BENCH_WARMUP` of a fresh process, not in the figures. */
  enqueueSingleCold?: EnqueueFigure;
  /** reliable-mail through a stack that reports no commit (a pg client): the wake-up NOTIFY in every statement. */
  enqueueSingleWithoutCommitHook?: EnqueueFigure;
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
  /** reliable-mail with BENCH_TRACE_IDLE: where the idle mails' time went in the worker process. */
  idleStages?: TracedStages;
  /** reliable-mail only: the drain again, with addresses on the suppression list (none of them a recipient). */
  drainWithSuppressions?: SystemResult['drain'];
  error?: string;
}

export interface CriticalResult {
  bulk: number;
  bulkEnqueue: EnqueueFigure;
  /** The critical emails of the first second after the worker started. */
  startup: LatencyFigure;
  /** The critical emails after those, the worker running. */
  critical: LatencyFigure;
  bulkSentBeforeLastCritical: number | null;
  /** Bulk mails accepted per second from the first of them to the last critical one. */
  bulkPerSecond: number | null;
  bulkPendingWhenLastCriticalArrived: number | null;
  bulkPendingInDbAfterLastCritical: number | null;
  /** With BENCH_TRACE_IDLE: where the time of the critical mails of `critical` went in the worker process. */
  stages?: TracedStages;
  timedOut: boolean;
  error?: string;
}
