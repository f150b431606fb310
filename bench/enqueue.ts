// npm run bench:enqueue: where an enqueue spends its time. BENCH_ENQUEUE_N single enqueues (4,000), 16 at once, by
// reliable-mail through MikroORM's em.transactional() and through a pg client (no commit hook), and by
// graphile-worker's add_job in a pg transaction, BENCH_ENQUEUE_ROUNDS times in turn (3), each round starting with
// the next way. With BENCH_ENQUEUE_BATCH=500, BENCH_ENQUEUE_N mails (20,000) in batches of that many, 4 at once as
// `npm run bench` runs them, by reliable-mail's enqueueMany, pg-boss's insert and graphile-worker's addJobs. Prints
// each round's rate and the CPU each mail cost this process (the producer: the app's stack and the library) and
// PostgreSQL, from /proc. Each way's mail is cleared and its database vacuumed before the next way runs.
// A CPU profile of the producer: `node --cpu-prof` in front of the script (see package.json's bench:enqueue).
import pg from 'pg';
import { cpuSnapshot, cpuSpent, databaseUrl, intFromEnv, settings } from './common.js';
import {
  clearAndVacuum,
  GraphileWorkerProducer,
  PgBossProducer,
  type Producer,
  ReliableMailProducer,
} from './producers.js';

const batchSize = intFromEnv('BENCH_ENQUEUE_BATCH', 1);
const batched = batchSize > 1;
const count = intFromEnv('BENCH_ENQUEUE_N', batched ? 20_000 : 4_000);
const rounds = intFromEnv('BENCH_ENQUEUE_ROUNDS', 3);
const PRODUCERS = batched ? settings.batchProducers : settings.concurrency;
/** Nothing is sent: the producers' dispatchers are off, and this port is never dialled. */
const UNUSED_SMTP_PORT = 9;
const DATABASES = { rm: 'bench_enqueue_rm', gw: 'bench_enqueue_gw', pb: 'bench_enqueue_pb' };

const admin = new pg.Client({ connectionString: databaseUrl('postgres') });
await admin.connect();
async function freshDatabase(name: string): Promise<string> {
  await admin.query(`drop database if exists ${name} with (force)`);
  await admin.query(`create database ${name}`);
  return databaseUrl(name);
}

/** `count` mails by calls of `enqueue` (up to `batchSize` mails each), `PRODUCERS` at once; the rate and the CPU. */
async function measure(name: string, enqueue: (start: number, size: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  const before = cpuSnapshot({ producer: process.pid });
  const started = performance.now();
  await Promise.all(
    Array.from({ length: PRODUCERS }, async () => {
      while (next < count) {
        const start = next;
        const size = Math.min(batchSize, count - start);
        next += size;
        await enqueue(start, size);
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

/** A way to enqueue: its name, the system and its database, and one call (`size` mails from `start`). */
type Way = [string, Producer, string, (start: number, size: number, tag: string) => Promise<unknown>];

/** The ways of this run, their producers made on fresh databases. */
async function waysToEnqueue(): Promise<Way[]> {
  const rmUrl = await freshDatabase(DATABASES.rm);
  const gwUrl = await freshDatabase(DATABASES.gw);
  const reliableMail = new ReliableMailProducer(rmUrl, UNUSED_SMTP_PORT);
  const graphile = new GraphileWorkerProducer(gwUrl);
  if (!batched) {
    return [
      ['reliable-mail, MikroORM em.transactional', reliableMail, rmUrl, (i, _, tag) => reliableMail.enqueueOne(i, tag)],
      [
        'reliable-mail, pg client (no commit hook)',
        reliableMail,
        rmUrl,
        (i, _, tag) => reliableMail.enqueueOneWithoutCommitHook(i, tag),
      ],
      ['graphile-worker add_job, pg transaction', graphile, gwUrl, (i, _, tag) => graphile.enqueueOne(i, tag)],
    ];
  }
  // pg-boss joins for the batches only: there it runs close to graphile-worker in `npm run bench`, while one at a
  // time graphile-worker is the faster of the two.
  const pbUrl = await freshDatabase(DATABASES.pb);
  const pgBoss = new PgBossProducer(pbUrl);
  return [
    [
      'reliable-mail, enqueueMany',
      reliableMail,
      rmUrl,
      (start, size, tag) => reliableMail.enqueueBatch(start, size, tag),
    ],
    ['pg-boss insert', pgBoss, pbUrl, (start, size, tag) => pgBoss.enqueueBatch(start, size, tag)],
    ['graphile-worker addJobs', graphile, gwUrl, (start, size, tag) => graphile.enqueueBatch(start, size, tag)],
  ];
}

let used: Producer[] = [];
try {
  const ways = await waysToEnqueue();
  used = [...new Set(ways.map(([, producer]) => producer))];
  for (const producer of used) await producer.setup();
  console.log(
    batched
      ? `${count} mails in batches of ${batchSize}, ${PRODUCERS} batches at once, ${rounds} rounds`
      : `${count} enqueues, 1 per transaction, ${PRODUCERS} at once, ${rounds} rounds`,
  );
  for (let round = 0; round < rounds; round++) {
    for (let turn = 0; turn < ways.length; turn++) {
      const [name, producer, url, enqueue] = ways[(round + turn) % ways.length];
      await measure(name, (start, size) => enqueue(start, size, `r${round}`));
      await clearAndVacuum(producer, url);
    }
  }
} finally {
  for (const producer of used) await producer.close().catch((error: unknown) => console.error(String(error)));
  for (const name of Object.values(DATABASES))
    await admin
      .query(`drop database if exists ${name} with (force)`)
      .catch((error: unknown) => console.error(`could not drop ${name}: ${String(error)}`));
  await admin.end();
}
