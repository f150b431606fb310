import { stripVTControlCharacters } from 'node:util';
import { afterEach, beforeEach, describe, expect, it, jest } from '@jest/globals';
import { ConsoleLogger } from '@nestjs/common';
import { MailOutboxService, type OutgoingMail } from '@reliable-mail/nestjs';
import { createTestApp, migrate, testMailOptions, waitFor } from './support/test-app.js';
import { useTestBed } from './support/test-bed.js';
import { PrivatePostgres } from './support/private-postgres.js';
import { SmtpTestServer } from './support/smtp-test-server.js';
import { withClient } from './support/test-database.js';
import { PoolExhaustedError, RECOVERY_QUIET_MS } from '../libs/reliable-mail/src/database/database-availability.js';
import { OutboxDatabase } from '../libs/reliable-mail/src/database/outbox-database.js';
import { Statement } from '../libs/reliable-mail/src/database/sql-client.js';

// What an app with Nest's default logger (every level, debug included) prints of reliable-mail: the records its
// ConsoleLogger writes, each beginning `[Nest] <pid>  - `, however many lines its object spans.

const mail = (index: number): OutgoingMail => ({
  to: `user${index}@example.com`,
  subject: `Order ${index}`,
  text: 'Thanks',
});

/** Every record Nest's ConsoleLogger writes, kept from the test's output; other writes pass through. */
function capturePrintedRecords(): { records: string[]; restore(): void } {
  const records: string[] = [];
  const spies = [process.stdout, process.stderr].map((stream) => {
    const write = stream.write.bind(stream) as (...args: unknown[]) => boolean;
    return jest.spyOn(stream, 'write').mockImplementation((chunk: unknown, ...rest: unknown[]) => {
      const text = stripVTControlCharacters(String(chunk));
      if (!text.startsWith('[Nest] ')) return write(chunk, ...rest);
      records.push(text);
      return true;
    });
  });
  return { records, restore: () => spies.forEach((spy) => spy.mockRestore()) };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** The records as printed, for the message of an expectation that fails. */
const shown = (records: string[]) => `\n${records.join('')}`;
/** What each record says: its `msg`, or the whole record when it has none. */
const saidIn = (records: string[]) => records.map((record) => /msg: '([^']*)'/.exec(record)?.[1] ?? record);
/** The lines the records take on the screen. */
const printedLines = (records: string[]) =>
  records
    .join('')
    .split('\n')
    .filter((line) => line.trim() !== '');

describe("reliable-mail's log with Nest's default logger", () => {
  const bed = useTestBed();
  let printed: ReturnType<typeof capturePrintedRecords>;
  beforeEach(() => {
    printed = capturePrintedRecords();
  });
  afterEach(() => printed.restore());

  it('100 mails sent print no line per mail', async () => {
    const smtp = await bed.startSmtp();
    const app = await bed.startApp(testMailOptions(smtp.url), [], { logger: new ConsoleLogger() });
    const afterStart = printed.records.length;

    const enqueued = await app
      .get(MailOutboxService)
      .enqueueMany(Array.from({ length: 100 }, (_, index) => ({ mail: mail(index) })));
    await waitFor('100 sent events', () => app.events.sent.length === 100, 30_000);
    await sleep(500);

    const records = printed.records.slice(afterStart);
    const named = enqueued.filter(({ id, messageId }) =>
      records.some((record) => record.includes(id) || record.includes(messageId)),
    );
    expect({ fewerThan5: records.length < 5, named, shown: shown(records) }).toMatchObject({
      fewerThan5: true,
      named: [],
    });
  });

  it('asked for (logging.perMail), a line per mail names it; the summary counts what was sent', async () => {
    const smtp = await bed.startSmtp();
    const app = await bed.startApp(
      testMailOptions(smtp.url, { logging: { perMail: true, summaryIntervalMs: 1_000 } }),
      [],
      { logger: new ConsoleLogger() },
    );
    const enqueued = await app
      .get(MailOutboxService)
      .enqueueMany(Array.from({ length: 5 }, (_, index) => ({ mail: mail(index) })));
    await waitFor('5 sent events', () => app.events.sent.length === 5);
    const summarised = () =>
      printed.records
        .filter((record) => record.includes("'mail in the last 1 s'"))
        .reduce((sum, record) => sum + Number(/\bsent: (\d+)/.exec(record)?.[1] ?? 0), 0);
    await waitFor('the summaries of the 5 sends', () => summarised() === 5, 5_000);

    const unnamed = enqueued.filter(({ id }) => !printed.records.some((record) => record.includes(id)));
    expect(unnamed).toEqual([]);
  });

  it("an SMTP server refusing every session for 8 s: the lane's pause and its end, not a line per probe", async () => {
    let refusing = true;
    const smtp = await bed.startSmtp({
      onConnect: () => (refusing ? { code: 421, text: '4.3.2 Service not available' } : undefined),
    });
    const app = await bed.startApp(testMailOptions(smtp.url), [], { logger: new ConsoleLogger() });
    const afterStart = printed.records.length;

    await app.get(MailOutboxService).enqueueMany(Array.from({ length: 10 }, (_, index) => ({ mail: mail(index) })));
    await sleep(8_000);
    refusing = false;
    await waitFor('the 10 mails sent', () => app.events.sent.length === 10, 60_000);
    await sleep(500);

    // Every line but a settle's: on a loaded machine (CI runs every file at once on 2 cores) the settles of the
    // sends after recovery may wait out their lease for a connection, and must say so.
    const records = printed.records.slice(afterStart);
    const said = saidIn(records).filter((line) => !line.startsWith('settle failed until the lease ran out'));
    expect({ said, shown: shown(records) }).toMatchObject({ said: ['lane paused', 'lane resumed'] });
  }, 90_000);

  it("a server asking to slow down in a reply that names the recipient: the lane's pause shows the reply without the address", async () => {
    let slowingDown = true;
    const smtp = await bed.startSmtp({
      onRcptTo: (recipient) =>
        slowingDown ? { code: 450, text: `4.7.1 <${recipient}>: rate limit exceeded, try again later` } : undefined,
    });
    const app = await bed.startApp(testMailOptions(smtp.url), [], { logger: new ConsoleLogger() });
    const afterStart = printed.records.length;

    await app.get(MailOutboxService).enqueueMany(Array.from({ length: 3 }, (_, index) => ({ mail: mail(index) })));
    await waitFor('the lane paused', () => saidIn(printed.records).includes('lane paused'));
    slowingDown = false;
    await waitFor('the 3 mails sent', () => app.events.sent.length === 3, 30_000);

    const records = printed.records.slice(afterStart);
    const paused = records.filter((record) => record.includes("'lane paused'"));
    expect({ paused: paused.length, shown: shown(records) }).toMatchObject({ paused: 1 });
    expect(paused[0]).toContain("reason: 'slow-down'");
    expect(paused[0]).toContain('450 4.7.1 <[address]>: rate limit exceeded, try again later');
    expect(paused[0]).not.toMatch(/user\d@example\.com/);
  }, 60_000);

  it('a server deferring every mail (451), which pauses no lane: a summary at warn with its last reply, no address in it', async () => {
    const smtp = await bed.startSmtp({
      onRcptTo: (recipient) => ({ code: 451, text: `4.7.1 <${recipient}>: Recipient address rejected: greylisted` }),
    });
    const app = await bed.startApp(
      testMailOptions(smtp.url, {
        logging: { summaryIntervalMs: 1_000 },
        // One attempt each within the test.
        retry: { baseDelayMs: 60_000, maxDelayMs: 60_000 },
      }),
      [],
      { logger: new ConsoleLogger() },
    );
    const afterStart = printed.records.length;

    await app.get(MailOutboxService).enqueueMany(Array.from({ length: 5 }, (_, index) => ({ mail: mail(index) })));
    await waitFor('5 deferrals', () => app.events.failed.length === 5);
    const summaries = () =>
      printed.records.slice(afterStart).filter((record) => record.includes("'mail in the last 1 s'"));
    await waitFor('the summary of the deferrals', () => summaries().some((record) => /\btransient: 5\b/.test(record)));

    const records = printed.records.slice(afterStart);
    const summary = summaries().find((record) => /\btransient: 5\b/.test(record))!;
    expect({ said: new Set(saidIn(records)), shown: shown(records) }).toMatchObject({
      said: new Set(['mail in the last 1 s']),
    });
    expect(summary).toMatch(/^\[Nest\] \d+ .* WARN \[ReliableMail\]/);
    expect(summary).toMatch(/replyCode: 451/);
    expect(summary).toMatch(/enhancedStatus: '4\.7\.1'/);
    expect(summary).toContain('451 4.7.1 <[address]>: Recipient address rejected: greylisted');
    expect(summary).not.toMatch(/user\d@example\.com/);
  }, 60_000);
});

describe("reliable-mail's log of a database that answers", () => {
  const bed = useTestBed();
  let printed: ReturnType<typeof capturePrintedRecords>;
  beforeEach(() => {
    printed = capturePrintedRecords();
  });
  afterEach(() => printed.restore());

  const unavailability = (records: string[]) =>
    records.filter((record) => record.includes('the database is unavailable')).length;

  it('a pool whose connections are all busy with slow statements: the waiting statement fails as such, and no outage is said', async () => {
    const app = await bed.startApp(
      testMailOptions(bed.smtpUrl, {
        dispatcher: { enabled: false },
        database: { poolSize: 1, connectTimeoutMs: 200, statementTimeoutMs: 4_000 },
      }),
      [],
      { logger: new ConsoleLogger() },
    );
    const database = app.get(OutboxDatabase);
    const select = (text: string) => database.query(new Statement(() => ({ text })), []);
    const afterStart = printed.records.length;

    const slow = select('select pg_sleep(1)');
    const waiting = select('select 1 as one').catch((error: unknown) => error);
    await slow;

    const error = await waiting;
    await expect(select('select 1 as one')).resolves.toEqual([{ one: 1 }]);
    const records = printed.records.slice(afterStart);
    expect({
      unavailability: unavailability(records),
      poolExhausted: error instanceof PoolExhaustedError,
      error: String(error),
      shown: shown(records),
    }).toMatchObject({
      unavailability: 0,
      poolExhausted: true,
      error: expect.stringContaining("all 1 of reliable-mail's connections were busy (database.poolSize)"),
    });
    expect(database.availability.unavailableSince).toBeNull();
  });

  it('a value pg cannot serialize fails its statement alone: the caller has the error, and no outage is said', async () => {
    const app = await bed.startApp(testMailOptions(bed.smtpUrl, { dispatcher: { enabled: false } }), [], {
      logger: new ConsoleLogger(),
    });
    const database = app.get(OutboxDatabase);
    const afterStart = printed.records.length;
    const unserializable = {
      toPostgres() {
        throw new TypeError('the value broke');
      },
    };

    await expect(
      database.query(new Statement(() => ({ text: 'select $1::text as one' })), [unserializable]),
    ).rejects.toThrow('the value broke');
    await expect(database.query(new Statement(() => ({ text: 'select 1 as one' })), [])).resolves.toEqual([{ one: 1 }]);
    const records = printed.records.slice(afterStart);
    expect({ unavailability: unavailability(records), shown: shown(records) }).toMatchObject({ unavailability: 0 });
  });
});

describe("reliable-mail's log through a database outage", () => {
  const cleanups: Array<() => Promise<unknown>> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
  });

  it('PostgreSQL stopped for 10 s under a dispatcher polling every 50 ms: at most 3 lines, and the mail waiting through it is sent after', async () => {
    const cluster = await PrivatePostgres.start();
    cleanups.push(() => cluster.destroy());
    await migrate(cluster.url);
    const smtp = new SmtpTestServer();
    cleanups.push(() => smtp.close());
    await smtp.listen();
    // The first mail is held by the server until the database is down: its settle waits out the outage.
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    smtp.script = { onData: () => (smtp.received.length === 0 ? { acceptWhen: released } : undefined) };
    const printed = capturePrintedRecords();
    cleanups.push(async () => printed.restore());
    const app = await createTestApp(
      cluster.url,
      testMailOptions(smtp.url, { dispatcher: { pollIntervalMs: 50, leaseMs: 60_000 } }),
      [],
      { logger: new ConsoleLogger() },
    );
    cleanups.push(() => app.close());
    const outbox = app.get(MailOutboxService);
    const held = await outbox.enqueue(mail(0));
    await waitFor('the first mail held by the server', () => smtp.received.length === 1);
    // Due in the middle of the outage.
    const waiting = await outbox.enqueue(mail(1), { delayMs: 4_000 });

    const beforeOutage = printed.records.length;
    await cluster.stop('fast');
    release();
    await sleep(10_000);
    await cluster.start();
    await waitFor(
      'both mails sent',
      async () => {
        const { rows } = await withClient(cluster.url, (client) =>
          client.query<{ count: number }>(`select count(*)::int as count from mail_outbox where status = 'sent'`),
        );
        return rows[0].count === 2;
      },
      30_000,
    );
    // The outage ends once no statement has met it for a few seconds (RECOVERY_QUIET_MS).
    await waitFor(
      'the database said to answer again',
      () => printed.records.some((record) => record.includes('the database answers again')),
      RECOVERY_QUIET_MS + 5_000,
    );
    await sleep(1_000);

    expect(smtp.received.map((message) => message.messageId)).toEqual([held.messageId, waiting.messageId]);
    const records = printed.records.slice(beforeOutage);
    const lines = printedLines(records);
    expect({ atMost3: lines.length <= 3, shown: shown(records) }).toMatchObject({ atMost3: true });
    expect(lines).toEqual([
      expect.stringMatching(/the database is unavailable \(.+\); reliable-mail keeps trying, quietly/),
      expect.stringMatching(/the database answers again after \d+\.\d s unavailable; \d+ failed statements/),
    ]);
  }, 120_000);
});
