// npm run bench:enqueue: where one enqueue per transaction spends its time. BENCH_ENQUEUE_N single enqueues (4,000),
// 16 at once, by reliable-mail through MikroORM's em.transactional() and through a pg client (no commit hook), and by
// graphile-worker's add_job in a pg transaction, BENCH_ENQUEUE_ROUNDS times in turn (3). Prints each run's rate and
// the CPU each enqueue cost this process (the producer: the app's stack and the library) and PostgreSQL, from /proc.
// With BENCH_ENQUEUE_BATCH=500, the same for batches of that many mails, 4 at once as `npm run bench` runs them, by
// reliable-mail's enqueueMany, pg-boss's insert and graphile-worker's addJobs; the CPU is then per mail.
// A CPU profile of the producer: `node --cpu-prof` in front of the script (see package.json's bench:enqueue).
import pg from 'pg';
import { cpuSnapshot, cpuSpent, databaseUrl, settings } from './common.js';
import {
  clearAndVacuum,
  GraphileWorkerProducer,
  PgBossProducer,
  type Producer,
  ReliableMailProducer,
} from './producers.js';

const count = Number(process.env.BENCH_ENQUEUE_N ?? 4_000);
const rounds = Number(process.env.BENCH_ENQUEUE_ROUNDS ?? 3);
const batchSize = Number(process.env.BENCH_ENQUEUE_BATCH ?? 1);
const PRODUCERS = batchSize === 1 ? 16 : settings.batchProducers;
/** Nothing is sent: the producers' dispatchers are off, and this port is never dialled. */
const UNUSED_SMTP_PORT = 9;

const admin = new pg.Client({ connectionString: databaseUrl('postgres') });
await admin.connect();
async function freshDatabase(name: string): Promise<string> {
  await admin.query(`drop database if exists ${name} with (force)`);
  await admin.query(`create database ${name}`);
  return databaseUrl(name);
}

/** `count` mails by calls of `enqueue` (`batchSize` mails each), `PRODUCERS` at once; prints the rate and the CPU. */
async function measure(name: string, enqueue: (start: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  const before = cpuSnapshot({ producer: process.pid });
  const started = performance.now();
  await Promise.all(
    Array.from({ length: PRODUCERS }, async () => {
      while (next < count) {
        const start = next;
        next += batchSize;
        await enqueue(start);
      }
    }),
  );
  const seconds = (performance.now() - started) / 1_000;
  const spent = cpuSpent(before, cpuSnapshot({ producer: process.pid }));
  const perMail = (ms: number | null) => (ms === null ? '-' : `${Math.round((ms / count) * 1_000)} µs`);
  console.log(
    `${name.padEnd(42)} ${Math.round(count / seconds)
      .toLocaleString('en-US')
      .padStart(6)}/s` + `   CPU per mail: producer ${perMail(spent.producer)}, PostgreSQL ${perMail(spent.postgres)}`,
  );
}

/** A way to enqueue: its name, the system and its database, and one call (of `batchSize` mails from `start`). */
type Way = [string, Producer, string, (start: number, tag: string) => Promise<unknown>];

const batched = batchSize > 1;
const rmUrl = await freshDatabase('bench_enqueue_rm');
const gwUrl = await freshDatabase('bench_enqueue_gw');
const reliableMail = new ReliableMailProducer(rmUrl, UNUSED_SMTP_PORT);
const graphile = new GraphileWorkerProducer(gwUrl);
// pg-boss joins for the batches only: there it runs close to graphile-worker in `npm run bench`, while one at a time
// graphile-worker is the faster of the two.
async function batchedWays(): Promise<Way[]> {
  const pbUrl = await freshDatabase('bench_enqueue_pb');
  const pgBoss = new PgBossProducer(pbUrl);
  return [
    [
      'reliable-mail, enqueueMany',
      reliableMail,
      rmUrl,
      (start, tag) => reliableMail.enqueueBatch(start, batchSize, tag),
    ],
    ['pg-boss insert', pgBoss, pbUrl, (start, tag) => pgBoss.enqueueBatch(start, batchSize, tag)],
    ['graphile-worker addJobs', graphile, gwUrl, (start, tag) => graphile.enqueueBatch(start, batchSize, tag)],
  ];
}
const ways: Way[] = batched
  ? await batchedWays()
  : [
      ['reliable-mail, MikroORM em.transactional', reliableMail, rmUrl, (i, tag) => reliableMail.enqueueOne(i, tag)],
      [
        'reliable-mail, pg client (no commit hook)',
        reliableMail,
        rmUrl,
        (i, tag) => reliableMail.enqueueOneWithoutCommitHook(i, tag),
      ],
      ['graphile-worker add_job, pg transaction', graphile, gwUrl, (i, tag) => graphile.enqueueOne(i, tag)],
    ];
const used = [...new Set(ways.map(([, producer]) => producer))];
try {
  for (const producer of used) await producer.setup();
  console.log(
    batched
      ? `${count} mails in batches of ${batchSize}, ${PRODUCERS} batches at once, ${rounds} rounds`
      : `${count} enqueues, 1 per transaction, ${PRODUCERS} at once, ${rounds} rounds`,
  );
  for (let round = 0; round < rounds; round++) {
    for (const [name, producer, url, enqueue] of ways) {
      await measure(name, (start) => enqueue(start, `r${round}`));
      await clearAndVacuum(producer, url);
    }
  }
} finally {
  for (const producer of used) await producer.close();
  for (const name of ['bench_enqueue_rm', 'bench_enqueue_gw', 'bench_enqueue_pb'])
    await admin.query(`drop database if exists ${name} with (force)`);
  await admin.end();
}
