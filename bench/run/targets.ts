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

const quotient = (a: number | null | undefined, b: number | null | undefined) => (a && b ? a / b : null);
const resultOf = (results: SystemResult[], name: SystemResult['system']) =>
  results.find((result) => result.system === name && !result.error);

export const TARGETS: readonly Target[] = [
  {
    figure: 'drain ÷ faster queue',
    goal: '≥ 1.3',
    digits: 2,
    met: (value) => value >= 1.3,
    read: ({ results }) =>
      quotient(
        resultOf(results, 'reliable-mail')?.drain?.perSecond,
        bestQueue(results, (r) => r.drain?.perSecond, faster)?.value,
      ),
  },
  {
    figure: 'PostgreSQL CPU per mail in the drain, ms',
    goal: '≤ 0.2',
    digits: 3,
    met: (value) => value <= 0.2,
    read: ({ results }) => resultOf(results, 'reliable-mail')?.drain?.cpuMsPerEmail.postgres ?? null,
  },
  {
    figure: "worker CPU per mail − smtp-only's client, ms",
    goal: '≤ 0.05',
    digits: 3,
    met: (value) => value <= 0.05,
    read: ({ results }) => {
      const worker = resultOf(results, 'reliable-mail')?.drain?.cpuMsPerEmail.worker;
      const client = resultOf(results, 'smtp-only')?.drain?.cpuMsPerEmail.worker;
      return typeof worker === 'number' && typeof client === 'number' ? worker - client : null;
    },
  },
  {
    figure: 'idle p50 ÷ graphile-worker',
    goal: '≤ 1.0',
    digits: 2,
    met: (value) => value <= 1,
    read: ({ results }) =>
      quotient(resultOf(results, 'reliable-mail')?.idle?.p50, resultOf(results, 'graphile-worker')?.idle?.p50),
  },
  {
    figure: 'idle p99 ÷ graphile-worker',
    goal: '≤ 1.5',
    digits: 2,
    met: (value) => value <= 1.5,
    read: ({ results }) =>
      quotient(resultOf(results, 'reliable-mail')?.idle?.p99, resultOf(results, 'graphile-worker')?.idle?.p99),
  },
  {
    figure: 'enqueue 1/tx ÷ faster queue',
    goal: '≥ 2.0',
    digits: 2,
    met: (value) => value >= 2,
    read: ({ results }) =>
      quotient(
        resultOf(results, 'reliable-mail')?.enqueueSingle?.perSecond,
        bestQueue(results, (r) => r.enqueueSingle?.perSecond, faster)?.value,
      ),
  },
  {
    figure: 'enqueue x500 ÷ faster queue',
    goal: '≥ 1.5',
    digits: 2,
    met: (value) => value >= 1.5,
    read: ({ results }) =>
      quotient(
        resultOf(results, 'reliable-mail')?.enqueueBatched?.perSecond,
        bestQueue(results, (r) => r.enqueueBatched?.perSecond, faster)?.value,
      ),
  },
  {
    figure: 'critical p95 under bulk ÷ idle p95',
    goal: '≤ 3',
    digits: 2,
    met: (value) => value <= 3,
    read: ({ results, critical }) => quotient(critical?.critical.p95, resultOf(results, 'reliable-mail')?.idle?.p95),
  },
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
