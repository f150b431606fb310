import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { propertyRuns } from '../../../../test/support/property-runs.js';
import { InvalidOptionsError } from '../errors.js';
import type { MailTemplate } from '../templates/mail-template.js';
import type { MailTransport } from '../transport/mail-transport.interface.js';
import type { ReliableMailOptions } from './reliable-mail-options.interface.js';
import { resolveOptions } from './resolve-options.js';

/** A VERP secret of the length the options ask for. */
const secret = 'x'.repeat(32);
const valid: ReliableMailOptions = {
  transport: 'smtp://user:pass@smtp.example.com:587',
  from: 'Shop <noreply@example.com>',
  messageIdDomain: 'mail.example.com',
};

const defaultDispatcher = {
  enabled: true,
  pollIntervalMs: 1_000,
  batchSize: 50,
  concurrency: 8,
  leaseMs: 600_000,
  sendTimeoutMs: 180_000,
  shutdownTimeoutMs: 30_000,
  eventLeaseMs: 30_000,
  heartbeatMs: 10_000,
  workerId: 'worker-host:4242',
};
const defaultRetention = { keepClosedForMs: 30 * 86_400_000, batchSize: 500, intervalMs: 600_000, partitionsAhead: 3 };
const defaultHealth = {
  maxBacklog: 10_000,
  maxLagMs: 300_000,
  deadLetterWindowMs: 3_600_000,
  maxDeadLetters: 0,
  maxDispatcherIdleMs: 60_000,
  maxEventAgeMs: 600_000,
  verifyTransports: false,
  verifySmtp: false,
  feedbackWindowMs: 86_400_000,
  maxComplaintRate: 0.001,
  maxHardBounceRate: 0.05,
  minSentForRates: 100,
};
const defaultDatabase = {
  url: null,
  schema: null,
  poolSize: 10,
  statementTimeoutMs: 30_000,
  connectTimeoutMs: 10_000,
  migrateAtStart: false,
  startTimeoutMs: 60_000,
  pooler: 'none',
  preparedStatements: true,
  listenUrl: null,
};
const defaultContent = { templates: [], maxMessageBytes: 5 * 1024 * 1024, attachmentResolver: null };
// 58 attempts: their delays, at the shortest, reach a day (2.5 s, 5 s, … doubling, then half an hour each).
const defaultRetry = { maxAttempts: 58, baseDelayMs: 5_000, maxDelayMs: 3_600_000, maxAgeMs: 86_400_000 };
const defaultEvents = { record: 'listened', listenerTimeoutMs: 30_000, concurrency: 16, maxQueued: 10_000 };
const defaultSmtp = {
  connectionTimeout: 30_000,
  greetingTimeout: 30_000,
  socketTimeout: 120_000,
  maxMessages: 100,
  maxRecipientsPerTransaction: 100,
};
/** `valid.transport`, parsed. */
const validSmtp = {
  ...defaultSmtp,
  host: 'smtp.example.com',
  port: 587,
  secure: false,
  auth: { user: 'user', pass: 'pass' },
};

function expectInvalid(options: unknown, option: string): void {
  let error: unknown;
  try {
    resolveOptions(options as ReliableMailOptions, 'worker-host', 4242);
  } catch (thrown) {
    error = thrown;
  }
  expect(error).toBeInstanceOf(InvalidOptionsError);
  expect((error as InvalidOptionsError).option).toBe(option);
  expect((error as Error).message).toContain(`"${option}"`);
}

describe('resolveOptions', () => {
  it.each<{
    name: string;
    options: Partial<ReliableMailOptions>;
    dispatcher?: object;
    retry?: object;
    transport?: object;
    database?: object;
    logging?: object;
  }>([
    { name: 'defaults for a URL transport', options: {} },
    {
      name: 'smtps URL',
      options: { transport: 'smtps://user:pass@smtp.example.com:465' },
      transport: { ...validSmtp, port: 465, secure: true },
    },
    {
      name: 'transport object',
      options: { transport: { host: 'smtp.example.com', port: 2525, auth: { user: 'u', pass: 'p' }, maxMessages: 5 } },
      transport: {
        ...defaultSmtp,
        host: 'smtp.example.com',
        port: 2525,
        auth: { user: 'u', pass: 'p' },
        maxMessages: 5,
      },
    },
    {
      name: 'dispatcher overrides merge with defaults',
      options: { dispatcher: { batchSize: 10, workerId: 'w1', enabled: false } },
      dispatcher: { batchSize: 10, workerId: 'w1', enabled: false },
    },
    {
      name: 'a heartbeat every second, the shortest',
      options: { dispatcher: { heartbeatMs: 1_000 } },
      dispatcher: { heartbeatMs: 1_000 },
    },
    {
      name: 'retry overrides merge with defaults; the attempts follow the age limit',
      options: { retry: { maxDelayMs: 60_000, maxAgeMs: 600_000 } },
      // Delays of at least 2.5 + 5 + 10 + 20 = 37.5 s, then 30 s each: 19 more reach 600 s, 24 attempts in all.
      retry: { maxDelayMs: 60_000, maxAgeMs: 600_000, maxAttempts: 24 },
    },
    {
      name: 'maxAttempts whose shortest delays just reach maxAgeMs',
      options: { retry: { baseDelayMs: 1_000, maxDelayMs: 1_000, maxAgeMs: 5_000, maxAttempts: 11 } },
      retry: { baseDelayMs: 1_000, maxDelayMs: 1_000, maxAgeMs: 5_000, maxAttempts: 11 },
    },
    {
      name: 'options given as undefined take their defaults (url: process.env.DATABASE_URL, unset)',
      options: {
        database: { url: undefined, poolSize: undefined },
        dispatcher: { batchSize: undefined },
        retry: { maxAgeMs: undefined },
      },
    },
    {
      name: 'a schema of its own, migrated at start',
      options: { database: { schema: 'mail_custom', migrateAtStart: true } },
      database: { schema: 'mail_custom', migrateAtStart: true },
    },
    {
      name: 'a lease of exactly twice the send timeout',
      options: { dispatcher: { leaseMs: 20_000, sendTimeoutMs: 10_000 }, database: { statementTimeoutMs: 4_000 } },
      dispatcher: { leaseMs: 20_000, sendTimeoutMs: 10_000 },
      database: { statementTimeoutMs: 4_000 },
    },
    {
      name: "a lease of exactly the send timeout, a statement's bound (its timeout and 5 s) and the settle's 1 s",
      options: { dispatcher: { leaseMs: 9_000, sendTimeoutMs: 2_000 }, database: { statementTimeoutMs: 1_000 } },
      dispatcher: { leaseMs: 9_000, sendTimeoutMs: 2_000 },
      database: { statementTimeoutMs: 1_000 },
    },
    {
      name: 'a line per mail, and no summary',
      options: { logging: { perMail: true, summaryIntervalMs: 0 } },
      logging: { perMail: true, summaryIntervalMs: 0 },
    },
  ])('$name', ({ options, dispatcher, retry, transport = validSmtp, database, logging }) => {
    const input = { ...valid, ...options };
    const resolvedDispatcher = { ...defaultDispatcher, ...dispatcher };
    expect(resolveOptions(input, 'worker-host', 4242)).toEqual({
      transport: { kind: 'smtp', options: transport },
      from: 'Shop <noreply@example.com>',
      messageIdDomain: 'mail.example.com',
      dispatcher: resolvedDispatcher,
      retry: { ...defaultRetry, ...retry },
      lanes: ['critical', 'default', 'bulk'].map((name) => ({
        name,
        concurrency: resolvedDispatcher.concurrency,
        ratePerSecond: null,
        priority: name === 'critical' ? 1 : 0,
        transport: { kind: 'smtp', options: transport },
        quota: null,
        unsubscribe: null,
      })),
      defaultLane: 'default',
      retention: { ...defaultRetention, enabled: resolvedDispatcher.enabled },
      health: defaultHealth,
      database: { ...defaultDatabase, ...database },
      events: defaultEvents,
      relay: null,
      ...defaultContent,
      verp: null,
      unsubscribe: null,
      requireTransaction: false,
      logging: { perMail: false, summaryIntervalMs: 60_000, ...logging },
    });
  });

  it('a VERP domain takes the default local part, or the one given, and its secret or secrets (newest last)', () => {
    expect(resolveOptions({ ...valid, verp: { domain: 'bounces.example.com', secret } }, 'host', 1).verp).toEqual({
      domain: 'bounces.example.com',
      localPart: 'bounces',
      secrets: [secret],
    });
    expect(
      resolveOptions(
        { ...valid, verp: { domain: 'example.com', localPart: 'dsn.in', secret: [secret, `${secret}2`] } },
        'host',
        1,
      ).verp,
    ).toEqual({ domain: 'example.com', localPart: 'dsn.in', secrets: [secret, `${secret}2`] });
    // 21 characters: with `+` and the 42 of the token, the 64 of a local part.
    expect(
      resolveOptions({ ...valid, verp: { domain: 'example.com', localPart: 'b'.repeat(21), secret } }, 'host', 1).verp,
    ).toMatchObject({ localPart: 'b'.repeat(21) });
  });

  it('declared lanes keep their own concurrency, rate, priority and transport', () => {
    const resolved = resolveOptions(
      {
        ...valid,
        lanes: {
          login: { concurrency: 2, priority: 3 },
          news: { ratePerSecond: 5, transport: 'smtp://bulk.example.com' },
        },
        defaultLane: 'login',
      },
      'worker-host',
      4242,
    );
    expect(resolved.lanes).toEqual([
      {
        name: 'login',
        concurrency: 2,
        ratePerSecond: null,
        priority: 3,
        transport: { kind: 'smtp', options: validSmtp },
        quota: null,
        unsubscribe: null,
      },
      {
        name: 'news',
        concurrency: 8,
        ratePerSecond: 5,
        priority: 0,
        transport: { kind: 'smtp', options: { ...defaultSmtp, host: 'bulk.example.com', port: 587, secure: false } },
        quota: null,
        unsubscribe: null,
      },
    ]);
    expect(resolved.defaultLane).toBe('login');
  });

  it("a transport object (a provider, or the app's own MailTransport) is used as it is, for the module and a lane", () => {
    const transport = (): MailTransport => ({
      send: async () => ({ kind: 'outage', replyCode: null, enhancedStatus: null, reply: 'not used' }),
      verify: async () => undefined,
      close: async () => undefined,
    });
    const shared = transport();
    const news = transport();
    const resolved = resolveOptions(
      { ...valid, transport: shared, lanes: { login: {}, news: { transport: news } }, defaultLane: 'login' },
      'worker-host',
      4242,
    );
    expect(resolved.transport).toEqual({ kind: 'object', transport: shared });
    expect(resolved.lanes.map((lane) => lane.transport)).toEqual([
      { kind: 'object', transport: shared },
      { kind: 'object', transport: news },
    ]);
    expect((resolved.lanes[1].transport as { transport: MailTransport }).transport).toBe(news);
  });

  it.each<{ name: string; options: Record<string, unknown>; option: string }>([
    { name: 'no lane', options: { lanes: {} }, option: 'lanes' },
    { name: 'a lane name with capitals', options: { lanes: { Bulk: {} } }, option: 'lanes.Bulk' },
    {
      name: 'a lane concurrency of 0',
      options: { lanes: { bulk: { concurrency: 0 } } },
      option: 'lanes.bulk.concurrency',
    },
    {
      name: 'a negative lane rate',
      options: { lanes: { bulk: { ratePerSecond: -1 } } },
      option: 'lanes.bulk.ratePerSecond',
    },
    {
      name: 'an infinite lane rate (no rate is no ratePerSecond)',
      options: { lanes: { bulk: { ratePerSecond: Infinity } } },
      option: 'lanes.bulk.ratePerSecond',
    },
    {
      name: 'a fractional lane priority',
      options: { lanes: { critical: { priority: 1.5 } } },
      option: 'lanes.critical.priority',
    },
    {
      name: 'a lane priority past 1000',
      options: { lanes: { bulk: { priority: 1e9 } } },
      option: 'lanes.bulk.priority',
    },
    // A timer longer than 2^31 - 1 ms fires after 1 ms: every send would be cut at once.
    {
      name: 'a send deadline of 30 days',
      options: { dispatcher: { sendTimeoutMs: 30 * 86_400_000 } },
      option: 'dispatcher.sendTimeoutMs',
    },
    // now + 1e300 ms is no date at all: every retry's settle would fail.
    { name: 'a retry delay of 1e300 ms', options: { retry: { maxDelayMs: 1e300 } }, option: 'retry.maxDelayMs' },
    {
      name: 'rows kept for longer than 100 years',
      options: { retention: { keepClosedForMs: 101 * 365.25 * 86_400_000 } },
      option: 'retention.keepClosedForMs',
    },
    { name: 'a pool of 2^31 connections', options: { database: { poolSize: 2 ** 31 } }, option: 'database.poolSize' },
    { name: 'a quoted schema name', options: { database: { schema: 'Mail"Outbox' } }, option: 'database.schema' },
    {
      name: 'a start that never gives up',
      options: { database: { startTimeoutMs: 0 } },
      option: 'database.startTimeoutMs',
    },
    {
      name: 'a lane transport that is not SMTP',
      options: { lanes: { bulk: { transport: 'http://x.example.com' } } },
      option: 'lanes.bulk.transport',
    },
    { name: 'a default lane that is not declared', options: { defaultLane: 'urgent' }, option: 'defaultLane' },
    { name: 'a retention batch of 0', options: { retention: { batchSize: 0 } }, option: 'retention.batchSize' },
    {
      name: 'no partitions made ahead',
      options: { retention: { partitionsAhead: 0 } },
      option: 'retention.partitionsAhead',
    },
    {
      name: 'partitions made one day ahead, fewer than health wants',
      options: { retention: { partitionsAhead: 1 } },
      option: 'retention.partitionsAhead',
    },
    { name: "perMail as 'yes'", options: { logging: { perMail: 'yes' } }, option: 'logging.perMail' },
    {
      name: 'a summary every half millisecond',
      options: { logging: { summaryIntervalMs: 0.5 } },
      option: 'logging.summaryIntervalMs',
    },
    {
      name: 'a negative dead-letter threshold',
      options: { health: { maxDeadLetters: -1 } },
      option: 'health.maxDeadLetters',
    },
    {
      name: 'a complaint rate of 0.1 written as 10',
      options: { health: { maxComplaintRate: 10 } },
      option: 'health.maxComplaintRate',
    },
    {
      name: 'a negative bounce rate',
      options: { health: { maxHardBounceRate: -0.1 } },
      option: 'health.maxHardBounceRate',
    },
    { name: 'a feedback window of 0', options: { health: { feedbackWindowMs: 0 } }, option: 'health.feedbackWindowMs' },
    {
      name: 'a transports probe asked for as a string',
      options: { health: { verifyTransports: 'yes' } },
      option: 'health.verifyTransports',
    },
    { name: 'the deprecated probe as a number', options: { health: { verifySmtp: 1 } }, option: 'health.verifySmtp' },
    { name: 'transport not a URL', options: { transport: 'smtp.example.com' }, option: 'transport' },
    { name: 'transport http:// URL', options: { transport: 'http://smtp.example.com' }, option: 'transport' },
    { name: 'transport neither URL nor object', options: { transport: 587 }, option: 'transport' },
    { name: 'transport object without host', options: { transport: { port: 587 } }, option: 'transport.host' },
    { name: 'transport object with empty host', options: { transport: { host: '' } }, option: 'transport.host' },
    {
      name: 'a transport object without verify',
      options: { transport: { send: async () => undefined, close: async () => undefined } },
      option: 'transport',
    },
    {
      name: 'a lane transport object whose open is not a function',
      options: {
        lanes: { bulk: { transport: { send: () => 0, verify: () => 0, close: () => 0, open: 'yes' } } },
        defaultLane: 'bulk',
      },
      option: 'lanes.bulk.transport',
    },
    { name: 'from without @', options: { from: 'noreply' }, option: 'from' },
    { name: 'from missing', options: { from: undefined }, option: 'from' },
    {
      name: 'messageIdDomain with a space',
      options: { messageIdDomain: 'mail example.com' },
      option: 'messageIdDomain',
    },
    {
      name: 'messageIdDomain starting with a hyphen',
      options: { messageIdDomain: '-mail.example.com' },
      option: 'messageIdDomain',
    },
    { name: 'messageIdDomain with an @', options: { messageIdDomain: 'a@example.com' }, option: 'messageIdDomain' },
    {
      name: 'dispatcher.enabled not a boolean',
      options: { dispatcher: { enabled: 'yes' } },
      option: 'dispatcher.enabled',
    },
    { name: 'dispatcher.batchSize 0', options: { dispatcher: { batchSize: 0 } }, option: 'dispatcher.batchSize' },
    {
      name: 'dispatcher.concurrency 1.5',
      options: { dispatcher: { concurrency: 1.5 } },
      option: 'dispatcher.concurrency',
    },
    {
      name: 'dispatcher.pollIntervalMs as a string',
      options: { dispatcher: { pollIntervalMs: '1000' } },
      option: 'dispatcher.pollIntervalMs',
    },
    {
      name: 'dispatcher.heartbeatMs under a second, the least time between two writes',
      options: { dispatcher: { heartbeatMs: 999 } },
      option: 'dispatcher.heartbeatMs',
    },
    { name: 'dispatcher.workerId empty', options: { dispatcher: { workerId: '' } }, option: 'dispatcher.workerId' },
    { name: 'retry.maxAttempts -1', options: { retry: { maxAttempts: -1 } }, option: 'retry.maxAttempts' },
    {
      name: "retry.maxAttempts past the row's int column",
      options: { retry: { maxAttempts: 2_147_483_648 } },
      option: 'retry.maxAttempts',
    },
    { name: 'retry.maxAgeMs NaN', options: { retry: { maxAgeMs: Number.NaN } }, option: 'retry.maxAgeMs' },
    {
      name: 'retry.maxDelayMs below baseDelayMs',
      options: { retry: { baseDelayMs: 5_000, maxDelayMs: 1_000 } },
      option: 'retry.maxDelayMs',
    },
    {
      name: 'leaseMs shorter than twice the send timeout',
      options: { dispatcher: { leaseMs: 359_999 } },
      option: 'dispatcher.leaseMs',
    },
    {
      name: 'a send timeout that leaves the default lease too short',
      options: { dispatcher: { sendTimeoutMs: 300_001 } },
      option: 'dispatcher.leaseMs',
    },
    {
      name: "a lease 1 ms short of the send timeout, a statement's bound and the settle's margin",
      options: { dispatcher: { leaseMs: 8_999, sendTimeoutMs: 2_000 }, database: { statementTimeoutMs: 1_000 } },
      option: 'dispatcher.leaseMs',
    },
    {
      name: 'a statement timeout that leaves the default lease too short (180 + 414.001 + 5 + 1 s)',
      options: { database: { statementTimeoutMs: 414_001 } },
      option: 'dispatcher.leaseMs',
    },
    {
      name: 'a lease of twice the send timeout that a statement cannot fit in (the issue: 15 s, 30 + 5 s)',
      options: { dispatcher: { leaseMs: 15_000, sendTimeoutMs: 5_000 } },
      option: 'dispatcher.leaseMs',
    },
    {
      name: 'maxAttempts that could be spent before maxAgeMs (8 by default before: 637 s of a day)',
      options: { retry: { maxAttempts: 8 } },
      option: 'retry.maxAttempts',
    },
    {
      name: 'maxAttempts one short of reaching maxAgeMs',
      options: { retry: { baseDelayMs: 1_000, maxDelayMs: 1_000, maxAgeMs: 5_000, maxAttempts: 10 } },
      option: 'retry.maxAttempts',
    },
    {
      name: "nodemailer's pool size, which lanes set",
      options: { transport: { host: 'smtp.example.com', maxConnections: 20 } },
      option: 'transport.maxConnections',
    },
    {
      name: "nodemailer's rate limit, which lanes set",
      options: { transport: { host: 'smtp.example.com', rateLimit: 5 } },
      option: 'transport.rateLimit',
    },
    {
      name: 'a socket timeout of 0 (nodemailer would wait 10 minutes)',
      options: { transport: { host: 'smtp.example.com', socketTimeout: 0 } },
      option: 'transport.socketTimeout',
    },
    {
      name: 'an unknown SMTP option',
      options: { transport: { host: 'smtp.example.com', poolSize: 3 } },
      option: 'transport.poolSize',
    },
    {
      name: 'a database URL that is not postgres://',
      options: { database: { url: 'mysql://localhost/db' } },
      option: 'database.url',
    },
    { name: 'a pool of 0', options: { database: { poolSize: 0 } }, option: 'database.poolSize' },
    { name: 'an unknown event record mode', options: { events: { record: 'some' } }, option: 'events.record' },
    {
      name: 'a listener timeout of 0',
      options: { events: { listenerTimeoutMs: 0 } },
      option: 'events.listenerTimeoutMs',
    },
    { name: 'no emission at a time', options: { events: { concurrency: 0 } }, option: 'events.concurrency' },
    { name: 'a VERP address without a domain', options: { verp: { secret } }, option: 'verp.domain' },
    { name: 'a VERP domain with an @', options: { verp: { domain: 'a@example.com', secret } }, option: 'verp.domain' },
    {
      name: 'a VERP local part with a +, which separates the token',
      options: { verp: { domain: 'example.com', localPart: 'a+b', secret } },
      option: 'verp.localPart',
    },
    {
      name: 'a VERP local part too long to leave room for the token',
      options: { verp: { domain: 'example.com', localPart: 'b'.repeat(22), secret } },
      option: 'verp.localPart',
    },
    { name: 'VERP without a secret', options: { verp: { domain: 'example.com' } }, option: 'verp.secret' },
    {
      name: 'a VERP secret shorter than 32 characters',
      options: { verp: { domain: 'example.com', secret: 'password' } },
      option: 'verp.secret',
    },
    {
      name: 'no VERP secret in a list',
      options: { verp: { domain: 'example.com', secret: [] } },
      option: 'verp.secret',
    },
    {
      name: 'a list of VERP secrets with one too short',
      options: { verp: { domain: 'example.com', secret: [secret, 'short'] } },
      option: 'verp.secret',
    },
  ])('rejects $name', ({ options, option }) => {
    expectInvalid({ ...valid, ...options }, option);
  });

  it("names the numbers of a lease too short for a send and a statement's bound", () => {
    expect(() =>
      resolveOptions(
        { ...valid, dispatcher: { leaseMs: 8_999, sendTimeoutMs: 2_000 }, database: { statementTimeoutMs: 1_000 } },
        'host',
        1,
      ),
    ).toThrow('2000 + 1000 + 5000 + 1000 = 9000 ms');
  });

  it.each([
    { name: 'null', options: null },
    { name: 'a string', options: 'smtp://smtp.example.com' },
  ])('rejects options that are $name', ({ options }) => {
    expectInvalid(options, 'options');
  });
});

describe('content options', () => {
  const template = (name: string, version: number): MailTemplate => ({
    name,
    version,
    render: () => ({ subject: name, text: name }),
  });

  it('keeps what is given', () => {
    const resolver = async () => Buffer.from('x');
    const templates = [template('a', 1)];
    expect(
      resolveOptions({ ...valid, templates, maxMessageBytes: 1_000, attachmentResolver: resolver }, 'host', 1),
    ).toMatchObject({ templates, maxMessageBytes: 1_000, attachmentResolver: resolver });
  });

  it.each<{ name: string; options: Record<string, unknown>; option: string }>([
    { name: 'templates that are not an array', options: { templates: {} }, option: 'templates' },
    { name: 'maxMessageBytes of 0', options: { maxMessageBytes: 0 }, option: 'maxMessageBytes' },
    { name: 'a fractional maxMessageBytes', options: { maxMessageBytes: 1.5 }, option: 'maxMessageBytes' },
    {
      name: 'an attachmentResolver that is not a function',
      options: { attachmentResolver: 's3' },
      option: 'attachmentResolver',
    },
  ])('refuses $name', ({ options, option }) => {
    expectInvalid({ ...valid, ...options }, option);
  });
});

describe('database options, given anything', () => {
  const anyValue = fc.oneof(
    fc.string({ unit: 'binary', maxLength: 70 }),
    fc.stringMatching(/^[a-z_][a-z0-9_]{0,70}$/),
    fc.constantFrom('', 'public', 'reliable_mail', 'Mail', 'mail;drop schema public', 'a"b', 'ü', '\0'),
    fc.anything(),
  );

  it('property: a schema name is taken only as PostgreSQL takes it unquoted, anything else is InvalidOptionsError', () => {
    fc.assert(
      fc.property(anyValue, (schema) => {
        const resolve = () => resolveOptions({ ...valid, database: { schema: schema as string } }, 'host', 1);
        if (schema === undefined || schema === null) return;
        if (typeof schema === 'string' && /^[a-z_][a-z0-9_]{0,62}$/.test(schema)) {
          expect(resolve().database.schema).toBe(schema);
        } else {
          expect(resolve).toThrow(InvalidOptionsError);
        }
      }),
      propertyRuns('database.schema of any value'),
    );
  });

  it('property: a start timeout or a migrate-at-start flag of any value is taken or refused with InvalidOptionsError', () => {
    fc.assert(
      fc.property(anyValue, fc.anything(), (startTimeoutMs, migrateAtStart) => {
        try {
          const { database } = resolveOptions(
            { ...valid, database: { startTimeoutMs, migrateAtStart } as never },
            'host',
            1,
          );
          expect(Number.isInteger(database.startTimeoutMs) && database.startTimeoutMs > 0).toBe(true);
          expect(typeof database.migrateAtStart).toBe('boolean');
        } catch (error) {
          expect(error).toBeInstanceOf(InvalidOptionsError);
        }
      }),
      propertyRuns('database.startTimeoutMs and migrateAtStart of any value'),
    );
  });

  it('property: a lane priority of any value is an integer from 0 to 1000, or InvalidOptionsError naming it', () => {
    fc.assert(
      fc.property(fc.oneof(anyValue, fc.integer({ min: -2_000, max: 2_000 })), (priority) => {
        try {
          const [lane] = resolveOptions({ ...valid, lanes: { default: { priority } as never } }, 'host', 1).lanes;
          expect(Number.isInteger(lane.priority) && lane.priority >= 0 && lane.priority <= 1_000).toBe(true);
          expect(lane.priority).toBe(priority ?? 0);
        } catch (error) {
          expect(error).toBeInstanceOf(InvalidOptionsError);
          expect((error as InvalidOptionsError).option).toBe('lanes.default.priority');
        }
      }),
      propertyRuns('lanes.<name>.priority of any value'),
    );
  });
});
