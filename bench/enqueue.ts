// npm run bench:enqueue: where one enqueue per transaction spends its time. BENCH_ENQUEUE_N single enqueues (4,000),
// 16 at once, by reliable-mail through MikroORM's em.transactional() and through a pg client (no commit hook), and by
// graphile-worker's add_job in a pg transaction, BENCH_ENQUEUE_ROUNDS times in turn (3). Prints each run's rate and
// the CPU each enqueue cost this process (the producer: the app's stack and the library) and PostgreSQL, from /proc.
// A CPU profile of the producer: `node --cpu-prof` in front of the script (see package.json's bench:enqueue).
import pg from 'pg';
import { cpuSnapshot, cpuSpent, databaseUrl } from './common.js';
import { GraphileWorkerProducer, ReliableMailProducer } from './producers.js';

const count = Number(process.env.BENCH_ENQUEUE_N ?? 4_000);
const rounds = Number(process.env.BENCH_ENQUEUE_ROUNDS ?? 3);
const PRODUCERS = 16;
/** Nothing is sent: the producers' dispatchers are off, and this port is never dialled. */
const UNUSED_SMTP_PORT = 9;

const admin = new pg.Client({ connectionString: databaseUrl('postgres') });
await admin.connect();
async function freshDatabase(name: string): Promise<string> {
  await admin.query(`drop database if exists ${name} with (force)`);
  await admin.query(`create database ${name}`);
  return databaseUrl(name);
}

/** `count` calls of `enqueue`, `PRODUCERS` at once; prints the rate and the CPU per call. */
async function measure(name: string, enqueue: (index: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  const before = cpuSnapshot({ producer: process.pid });
  const started = performance.now();
  await Promise.all(
    Array.from({ length: PRODUCERS }, async () => {
      while (next < count) await enqueue(next++);
    }),
  );
  const seconds = (performance.now() - started) / 1_000;
  const spent = cpuSpent(before, cpuSnapshot({ producer: process.pid }));
  const perEnqueue = (ms: number | null) => (ms === null ? '-' : `${Math.round((ms / count) * 1_000)} µs`);
  console.log(
    `${name.padEnd(42)} ${Math.round(count / seconds)
      .toLocaleString('en-US')
      .padStart(6)}/s` +
      `   CPU per enqueue: producer ${perEnqueue(spent.producer)}, PostgreSQL ${perEnqueue(spent.postgres)}`,
  );
}

const reliableMail = new ReliableMailProducer(await freshDatabase('bench_enqueue_rm'), UNUSED_SMTP_PORT);
const graphile = new GraphileWorkerProducer(await freshDatabase('bench_enqueue_gw'));
try {
  await reliableMail.setup();
  await graphile.setup();
  console.log(`${count} enqueues, 1 per transaction, ${PRODUCERS} at once, ${rounds} rounds`);
  for (let round = 0; round < rounds; round++) {
    await measure('reliable-mail, MikroORM em.transactional', (index) => reliableMail.enqueueOne(index, `orm${round}`));
    await reliableMail.clear();
    await measure('reliable-mail, pg client (no commit hook)', (index) =>
      reliableMail.enqueueOneWithoutCommitHook(index, `pg${round}`),
    );
    await reliableMail.clear();
    await measure('graphile-worker add_job, pg transaction', (index) => graphile.enqueueOne(index, `gw${round}`));
    await graphile.clear();
  }
} finally {
  await reliableMail.close();
  await graphile.close();
  for (const name of ['bench_enqueue_rm', 'bench_enqueue_gw'])
    await admin.query(`drop database if exists ${name} with (force)`);
  await admin.end();
}
