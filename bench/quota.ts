// npm run bench:quota: two dispatcher processes share one lane's provider quota (`lanes.default.quota.perSecond`)
// and send BENCH_QUOTA_N mails through the SES stand-in (aws-ses-v2-local behind a front that timestamps each
// request as it arrives). Prints the rate the pair kept, the busiest second at SES (a window sliding from each
// request) and each instance's share. BENCH_QUOTA_RATE (20), BENCH_QUOTA_N (1,000), BENCH_PG_URL.
import { MailOutboxService } from '@reliable-mail/nestjs';
import { SesTestFront } from '../test/support/ses-test-front.js';
import { createTestApp, migrate, spawnDispatcherProcess, testMailOptions, waitFor } from '../test/support/test-app.js';
import { createTestDatabase } from '../test/support/test-database.js';
import { databaseUrl } from './common.js';

const rate = Number(process.env.BENCH_QUOTA_RATE ?? 20);
const count = Number(process.env.BENCH_QUOTA_N ?? 1_000);
// createTestDatabase makes a database of its own on this server.
process.env.DATABASE_URL ??= databaseUrl('postgres');

/** The most requests in any one second, a window starting at each request. */
function busiestSecond(times: number[]): number {
  const sorted = [...times].sort((a, b) => a - b);
  let most = 0;
  for (let first = 0, last = 0; first < sorted.length; first++) {
    while (last < sorted.length && sorted[last] < sorted[first] + 1_000) last++;
    most = Math.max(most, last - first);
  }
  return most;
}

const database = await createTestDatabase();
const front = await new SesTestFront().start();
const children: Array<Awaited<ReturnType<typeof spawnDispatcherProcess>>> = [];
// No SMTP server: the dispatchers send through SES, and the producer sends nothing.
const unusedSmtp = 'smtp://127.0.0.1:9';
const lanes = { default: { concurrency: 8, quota: { perSecond: rate } } };
try {
  await migrate(database.url);
  for (let instance = 0; instance < 2; instance++)
    children.push(
      await spawnDispatcherProcess({
        databaseUrl: database.url,
        smtpUrl: unusedSmtp,
        sesEndpoint: front.endpoint,
        options: { lanes },
      }),
    );
  const producer = await createTestApp(
    database.url,
    testMailOptions(unusedSmtp, { dispatcher: { enabled: false }, lanes }),
  );
  const mails = await producer.get(MailOutboxService).enqueueMany(
    Array.from({ length: count }, (_, index) => ({
      mail: { to: `user${index}@example.com`, subject: 'Hi', text: 'x' },
    })),
  );
  await waitFor(
    'every mail at SES',
    async () => (await front.stored()).length >= mails.length,
    ((count / rate) * 2 + 30) * 1_000,
  );
  await producer.close();

  const sentAt = front.requests
    .filter((request) => request.path === '/v2/email/outbound-emails')
    .map((request) => request.receivedAt);
  const span = Math.max(...sentAt) - Math.min(...sentAt);
  const bySender = children.map(({ lines }) => lines.filter((line) => line.startsWith('sent-event ')).length);
  const stored = await front.stored();
  console.table({
    'limit, requests/s': rate,
    mails: count,
    'requests at SES': sentAt.length,
    'kept rate, requests/s': Number((((sentAt.length - 1) * 1_000) / span).toFixed(2)),
    'kept rate ÷ limit': Number(((sentAt.length - 1) * 1_000) / span / rate).toFixed(3),
    'busiest second at SES': busiestSecond(sentAt),
    'sent by instance 1 / 2': bySender.join(' / '),
    'distinct Message-IDs stored': new Set(stored.map((email) => email.messageId)).size,
  });
} finally {
  for (const { child } of children) child.kill('SIGKILL');
  await front.close();
  await database.drop();
}
