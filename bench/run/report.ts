// The report printed at the end of a run: each repetition's tables, then the targets read in each.
import { type ClaimResult } from '../claim.js';
import { now, settings, type SystemName } from '../common.js';
import type { StageFigure, TracedStages } from '../stage-trace.js';
import type { LatencyFigure, SystemResult } from './types.js';
import { fasterQueue, readClaimTargets, readTargets, type Repetition, shownFigure } from './targets.js';
import { phases, runStartedAt } from './context.js';

export function fmt(value: number | null | undefined, digits = 0): string {
  if (value === null || value === undefined || Number.isNaN(value)) return '-';
  return value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

export function ratio(a: number | null | undefined, b: number | null | undefined): string {
  if (a === null || a === undefined || !b) return '-';
  return `${(a / b).toFixed(2)}x`;
}

/** A latency figure's values in enqueue order, whole milliseconds. */
function series(figure: LatencyFigure): string {
  return figure.series.map((value) => (value === null ? 'lost' : value.toFixed(0))).join(' ');
}

export function table(headers: string[], rows: string[][]): string {
  const widths = headers.map((header, column) => Math.max(header.length, ...rows.map((row) => row[column].length)));
  const line = (cells: string[]) =>
    cells
      .map((cell, column) => (column === 0 ? cell.padEnd(widths[column]) : cell.padStart(widths[column])))
      .join('  ');
  return [line(headers), widths.map((width) => '-'.repeat(width)).join('  '), ...rows.map(line)].join('\n');
}

/** One repetition's figures: the table, the CPU per mail, reliable-mail's ratios, its critical lane and stages. */
function reportRepetition({ results, critical }: Repetition): string[] {
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
  const best = (pick: (r: SystemResult) => number | null | undefined) => fasterQueue(results, pick);
  if (rm) {
    const drainBest = best((r) => r.drain?.perSecond);
    const singleBest = best((r) => r.enqueueSingle?.perSecond);
    const batchBest = best((r) => r.enqueueBatched?.perSecond);
    lines.push('reliable-mail ratios:');
    lines.push(`  drain vs smtp-only ceiling:        ${ratio(rm.drain?.perSecond, ceiling?.drain?.perSecond)}`);
    lines.push(
      `  drain vs faster queue (${drainBest?.system ?? '-'}):  ${ratio(rm.drain?.perSecond, drainBest?.value)}`,
    );
    lines.push(
      `  idle p50 vs graphile-worker: ${ratio(rm.idle?.p50, by('graphile-worker')?.idle?.p50)} (below 1 = lower latency)`,
    );
    lines.push(
      `  enqueue 1/tx vs faster queue (${singleBest?.system ?? '-'}): ${ratio(rm.enqueueSingle?.perSecond, singleBest?.value)}`,
    );
    if (rm.enqueueSingleCold) {
      const coldBest = best((r) => r.enqueueSingleCold?.perSecond);
      lines.push(
        `  enqueue 1/tx cold (the warm-up's first ${fmt(settings.warmup)}, not in the table): ${fmt(rm.enqueueSingleCold.perSecond)}/s${rm.enqueueSingleCold.timedOut ? '*' : ''}` +
          ` vs faster queue cold (${coldBest?.system ?? '-'}): ${ratio(rm.enqueueSingleCold.perSecond, coldBest?.value)}`,
      );
    }
    const withoutHook = rm.enqueueSingleWithoutCommitHook;
    if (withoutHook) {
      lines.push(
        `  enqueue 1/tx through a pg client (no commit hook, NOTIFY in each statement): ${fmt(withoutHook.perSecond)}/s` +
          `${withoutHook.timedOut ? '*' : ''}, vs faster queue: ${ratio(withoutHook.perSecond, singleBest?.value)}`,
      );
    }
    lines.push(
      `  enqueue x${settings.batchSize} vs faster queue (${batchBest?.system ?? '-'}): ${ratio(rm.enqueueBatched?.perSecond, batchBest?.value)}`,
    );
    lines.push('');
  }
  if (critical) {
    const idleP95 = results.find((result) => result.system === 'reliable-mail')?.idle?.p95;
    if (critical.error) lines.push(`critical lane: error ${critical.error}`);
    else {
      lines.push(
        `critical lane under a ${fmt(critical.bulk)}-email bulk backlog (bulk enqueued with enqueueMany at ${fmt(critical.bulkEnqueue.perSecond)}/s): ` +
          `${critical.critical.arrived}/${critical.critical.sent} critical arrived${critical.timedOut ? ' (timed out)' : ''}, ` +
          `p50 ${fmt(critical.critical.p50, 1)} ms, p95 ${fmt(critical.critical.p95, 1)} ms ` +
          `(${ratio(critical.critical.p95, idleP95)} the idle p95), max ${fmt(critical.critical.max, 1)} ms; ` +
          `bulk still pending when the last critical arrived: ${fmt(critical.bulkPendingWhenLastCriticalArrived)} ` +
          `(${fmt(critical.bulkSentBeforeLastCritical)} bulk sent by then, ${fmt(critical.bulkPerSecond)}/s)`,
        `  critical latencies in ms, in enqueue order: ${series(critical.critical)}`,
        `  the ${critical.startup.sent} critical emails of the first second after the worker started, before those: ` +
          `${critical.startup.arrived} arrived, p50 ${fmt(critical.startup.p50, 1)} ms, max ${fmt(critical.startup.max, 1)} ms; ` +
          `in enqueue order: ${series(critical.startup)}`,
      );
    }
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
  const idleStages = results.find((result) => result.idleStages)?.idleStages;
  if (idleStages) lines.push(...reportStages("reliable-mail's idle mails in the worker process", idleStages));
  if (critical?.stages)
    lines.push(
      ...reportStages(
        `the ${fmt(critical.critical.sent)} critical mails after the first second, under the bulk backlog, in the worker process`,
        critical.stages,
      ),
    );
  return lines;
}

/** Where the traced mails' time went in reliable-mail's worker process (BENCH_TRACE_IDLE). */
function reportStages(heading: string, stages: TracedStages): string[] {
  const ms = (figure: StageFigure) =>
    (['p50', 'p90', 'p99'] as const).map((p) => `${p} ${figure[p]?.toFixed(2) ?? '-'}`).join(' / ') + ' ms';
  return [
    `${heading} (BENCH_TRACE_IDLE; ${stages.mails} traced):`,
    `  wake-up to the claim's call: ${ms(stages.wakeToClaim)}`,
    `  the claim (one row):         ${ms(stages.claim)}`,
    `  claim to the send started:   ${ms(stages.claimToSend)}`,
    `  the SMTP send:               ${ms(stages.send)}`,
    '',
  ];
}

/**
 * The run's report: each repetition's figures, then the targets read in every repetition with their medians, the
 * claim statement (measured once) and the phases.
 */
export function report(repetitions: Repetition[], claim: ClaimResult | undefined): string {
  const lines: string[] = [];
  repetitions.forEach((repetition, index) => {
    lines.push(`===== repetition ${index + 1} of ${repetitions.length} =====`, '', ...reportRepetition(repetition));
  });
  lines.push(...targetsTable(repetitions, claim), '');
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
  lines.push('phases:');
  for (const p of phases) lines.push(`  ${p.phase.padEnd(60)} ${p.seconds.toFixed(1)} s`);
  lines.push(`  total ${((now() - runStartedAt) / 1000).toFixed(1)} s`);
  return lines.join('\n');
}

/** The targets of issue 20, one column per repetition, then the median and how many repetitions met each. */
function targetsTable(repetitions: Repetition[], claim: ClaimResult | undefined): string[] {
  const rows = readTargets(repetitions).map((target) => {
    const shown = (value: number | null) => (value === null ? '-' : target.shown(value));
    return [
      target.figure,
      ...target.values.map((value, index) => shown(value) + (target.whole[index] ? '' : '*')),
      shown(target.median) + (target.medianOf < repetitions.length ? ` (of ${target.medianOf})` : ''),
      target.goal,
      target.medianMet ? 'met' : 'missed',
      `${target.metIn} of ${repetitions.length}`,
    ];
  });
  const lines = [
    'reliable-mail against the targets, per repetition (each ratio within its repetition) and the median:',
    table(
      ['figure', ...repetitions.map((_, index) => `rep ${index + 1}`), 'median', 'target', 'median is', 'met in'],
      rows,
    ),
    '(* = a phase of the figure timed out, failed, or lost, doubled or mistook a mail: neither met nor in the median)',
  ];
  if (claim) {
    const growth = readClaimTargets(claim);
    const percent = (value: number, most: number) =>
      `${value >= 0 ? '+' : ''}${shownFigure(value * 100, 0, (shown) => shown <= most)}%`;
    lines.push(
      `claim from 0 to ${fmt(claim.sentRows)} sent rows (limit 64, measured once): ` +
        `time ${percent(growth.time, 25)} (target within +25%: ${growth.timeMet ? 'met' : 'missed'}), ` +
        `buffers ${percent(growth.buffers, 10)} (target within +10%: ${growth.buffersMet ? 'met' : 'missed'})`,
    );
  }
  return lines;
}
