// `npm run bench`: reliable-mail against a bare SMTP ceiling, pg-boss and graphile-worker, on the same work, in
// BENCH_REPS repetitions. Prints each repetition's tables and the targets read in each, and writes
// bench/results/<timestamp>.json. Settings: see bench/README.md (BENCH_N, BENCH_BULK, BENCH_CLAIM_ROWS, BENCH_REPS,
// BENCH_SYSTEMS, BENCH_SKIP_CLAIM, BENCH_SKIP_CRITICAL, timeouts).
import 'reflect-metadata';
import { mkdirSync, writeFileSync } from 'node:fs';
import { type ClaimResult, runClaimBenchmark } from './claim.js';
import { now, settings, SYSTEMS, type SystemName } from './common.js';
import type { CriticalResult, SystemResult } from './run/types.js';
import {
  admin,
  children,
  createDatabase,
  databases,
  dropDatabase,
  limit,
  log,
  phase,
  phases,
  runStartedAt,
  startRepetition,
  tag,
} from './run/context.js';
import { fullSet, orderOf } from './run/order.js';
import { startSink } from './run/sink.js';
import { benchQueue, benchSmtpOnly } from './run/systems.js';
import { report } from './run/report.js';
import { readClaimTargets, readTargets, type Repetition } from './run/targets.js';

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
  log(
    `bench: N=${settings.n}, bulk=${settings.bulk}, claim rows=${settings.claimRows}, systems=${selected.join(',')}, ` +
      `repetitions=${settings.repetitions ?? fullSet(selected.length)}`,
  );

  const repetitions: Repetition[] = [];
  let claim: ClaimResult | undefined;
  const { sink, port } = await phase('start the SMTP sink', startSink);
  try {
    const count = settings.repetitions ?? fullSet(selected.length);
    for (let index = 0; index < count; index++) {
      const order = orderOf(selected, index);
      startRepetition(index);
      log(`\nrepetition ${index + 1} of ${count}: ${order.join(', ')}`);
      const results: SystemResult[] = [];
      let critical: CriticalResult | undefined;
      for (const system of order) {
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
      results.sort((a, b) => selected.indexOf(a.system) - selected.indexOf(b.system));
      repetitions.push({ order, results, critical });
    }
    startRepetition(null);
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

  const text = report(repetitions, claim);
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
        repetitions,
        targets: readTargets(repetitions),
        claimTargets: claim ? readClaimTargets(claim) : null,
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
