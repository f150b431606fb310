// The hot path's targets (issue 20), read in each repetition of a run and as the median of the repetitions: a figure
// taken once on a shared 2-core machine moves more between runs than a change does (the critical lane's p95 went
// from 2.08 to 5.72 times its idle p95 in eight runs of the same library code), so each ratio is read per repetition, within it.
import type { ClaimResult } from '../claim.js';
import type { CriticalResult, SystemResult } from './types.js';

/** One repetition of the run: every selected system measured once, in a rotated order. */
export interface Repetition {
  results: SystemResult[];
  critical?: CriticalResult;
}

/** The queue (pg-boss or graphile-worker) whose figure is best, and that figure. */
export function bestQueue(
  results: SystemResult[],
  pick: (result: SystemResult) => number | null | undefined,
  better: (a: number, b: number) => boolean,
): { system: string; value: number } | null {
  let found: { system: string; value: number } | null = null;
  for (const result of results) {
    if (result.error || (result.system !== 'pg-boss' && result.system !== 'graphile-worker')) continue;
    const value = pick(result);
    if (value === null || value === undefined) continue;
    if (!found || better(value, found.value)) found = { system: result.system, value };
  }
  return found;
}

const faster = (a: number, b: number) => a > b;

interface Target {
  figure: string;
  /** The target as the issue states it. */
  goal: string;
  /** Milliseconds of CPU get three decimals, ratios two. */
  digits: number;
  met: (value: number) => boolean;
  read: (repetition: Repetition) => number | null;
}

type Pick = (result: SystemResult) => number | null | undefined;

const quotient = (a: number | null | undefined, b: number | null | undefined) => (a && b ? a / b : null);
const resultOf = (results: SystemResult[], name: SystemResult['system']) =>
  results.find((result) => result.system === name && !result.error);
const reliableMail = (results: SystemResult[]) => resultOf(results, 'reliable-mail');

/** A rate of reliable-mail's at least `least` times the faster queue's. */
const timesTheFasterQueue = (figure: string, least: number, pick: Pick): Target => ({
  figure: `${figure} ÷ faster queue`,
  goal: `≥ ${least.toFixed(1)}`,
  digits: 2,
  met: (value) => value >= least,
  read: ({ results }) => {
    const own = reliableMail(results);
    return quotient(own && pick(own), bestQueue(results, pick, faster)?.value);
  },
});

/** A figure of reliable-mail's (CPU, latency) at most `most`. */
const atMost = (figure: string, most: number, digits: number, read: Target['read']): Target => ({
  figure,
  goal: `≤ ${most}`,
  digits,
  met: (value) => value <= most,
  read,
});

/** An idle latency percentile of reliable-mail's at most `most` times graphile-worker's. */
const idleAgainstGraphileWorker = (percentile: 'p50' | 'p99', most: number): Target =>
  atMost(`idle ${percentile} ÷ graphile-worker`, most, 2, ({ results }) =>
    quotient(reliableMail(results)?.idle?.[percentile], resultOf(results, 'graphile-worker')?.idle?.[percentile]),
  );

export const TARGETS: readonly Target[] = [
  timesTheFasterQueue('drain', 1.3, (result) => result.drain?.perSecond),
  atMost(
    'PostgreSQL CPU per mail in the drain, ms',
    0.2,
    3,
    ({ results }) => reliableMail(results)?.drain?.cpuMsPerEmail.postgres ?? null,
  ),
  atMost("worker CPU per mail − smtp-only's client, ms", 0.05, 3, ({ results }) => {
    const worker = reliableMail(results)?.drain?.cpuMsPerEmail.worker;
    const client = resultOf(results, 'smtp-only')?.drain?.cpuMsPerEmail.worker;
    return typeof worker === 'number' && typeof client === 'number' ? worker - client : null;
  }),
  idleAgainstGraphileWorker('p50', 1),
  idleAgainstGraphileWorker('p99', 1.5),
  timesTheFasterQueue('enqueue 1/tx', 2, (result) => result.enqueueSingle?.perSecond),
  timesTheFasterQueue('enqueue x500', 1.5, (result) => result.enqueueBatched?.perSecond),
  atMost('critical p95 under bulk ÷ idle p95', 3, 2, ({ results, critical }) =>
    quotient(critical?.critical.p95, reliableMail(results)?.idle?.p95),
  ),
];

export function median(values: number[]): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

/** Each target's figure in every repetition, their median, and in how many repetitions it was met. */
export function readTargets(repetitions: Repetition[]) {
  return TARGETS.map((target) => {
    const values = repetitions.map(target.read);
    const read = values.filter((value): value is number => value !== null);
    return {
      figure: target.figure,
      goal: target.goal,
      digits: target.digits,
      values,
      median: median(read),
      metIn: read.filter(target.met).length,
      readIn: read.length,
    };
  });
}

/** The claim's growth from an outbox of due rows alone to one with the sent rows beside them (limit 64). */
export function claimGrowth(claim: ClaimResult): { time: number; buffers: number } {
  const [before] = claim.dueOnly;
  const [after] = claim.loaded;
  const buffers = (measurement: typeof before) => measurement.sharedHit + measurement.sharedRead;
  return { time: after.executionMs / before.executionMs - 1, buffers: buffers(after) / buffers(before) - 1 };
}
