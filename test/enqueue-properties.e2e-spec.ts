import { describe, expect, it } from '@jest/globals';
import { EntityManager } from '@mikro-orm/postgresql';
import {
  type EnqueueOptions,
  MailOutboxService,
  MailValidationError,
  type OutgoingMail,
  ReliableMailError,
} from '@reliable-mail/nestjs';
import fc from 'fast-check';
import pg from 'pg';
import { propertyRuns } from './support/property-runs.js';
import { testMailOptions } from './support/test-app.js';
import { useTestBed } from './support/test-bed.js';

// What a caller may hand to enqueue, at its most hostile: any UTF-16 (lone surrogates, NUL), a megabyte of text,
// values of the wrong type, JSON nested hundreds deep with bigints, functions and dates of every year JavaScript has,
// and dates and durations up to JavaScript's limits. Each either throws MailValidationError before any SQL, or is
// stored; the caller's transaction goes on either way and commits its own row.

const anyText = fc.oneof(
  { arbitrary: fc.string({ unit: 'binary', maxLength: 40 }), weight: 20 },
  { arbitrary: fc.constantFrom('', ' ', '\0', 'a\0b', '\uD800', 'x\uDC00', '\uD83D\uDE00', 'Ann'), weight: 10 },
  // A megabyte: in a mail of many fields, one field in a few mails.
  {
    arbitrary: fc
      .string({ unit: 'binary', minLength: 1, maxLength: 4 })
      .map((unit) => unit.repeat(Math.ceil(1_000_000 / unit.length))),
    weight: 1,
  },
);

const anyNumber = fc.oneof(
  fc.double(),
  fc.integer(),
  fc.constantFrom(Number.NaN, Infinity, -Infinity, -0, 1e308, 5e-324, 1e16, 2.6e14, Number.MAX_VALUE, -1),
);

/** Every date JavaScript has (and invalid ones), weighted towards those PostgreSQL stores and their edges. */
const anyDate = fc.oneof(
  fc.date({ noInvalidDate: false }),
  fc.date({ min: new Date('0001-01-01T00:00:00.000Z'), max: new Date('9999-12-31T23:59:59.999Z') }),
  fc.date({ min: new Date(), max: new Date(Date.now() + 365 * 86_400_000) }),
  fc.constantFrom(
    new Date('0000-12-31T23:59:59.999Z'),
    new Date('0001-01-01T00:00:00.000Z'),
    new Date('9999-12-31T23:59:59.999Z'),
    new Date('+010000-01-01T00:00:00.000Z'),
    new Date(-8.64e15),
    new Date(8.64e15),
  ),
);

const leaf = fc.oneof(
  anyText,
  anyNumber,
  fc.boolean(),
  anyDate,
  fc.constantFrom(null, undefined, 10n, () => 1, Symbol('s'), new Map(), /x/),
);

function nested(depth: number): Record<string, unknown> {
  let value: Record<string, unknown> = { a: 1 };
  for (let level = 1; level < depth; level++) value = { a: value };
  return value;
}

const anyJson = fc.oneof(
  fc.letrec((tie) => ({
    value: fc.oneof(
      { depthSize: 'small' },
      leaf,
      fc.array(tie('value'), { maxLength: 3 }),
      fc.dictionary(anyText, tie('value'), { maxKeys: 3 }),
    ),
  })).value,
  fc.integer({ min: 95, max: 300 }).map(nested),
);

const anyObject = fc.oneof(
  { arbitrary: fc.dictionary(anyText, anyJson, { maxKeys: 4 }), weight: 8 },
  { arbitrary: anyJson, weight: 1 },
);

/** Mostly a value that passes, else a hostile one: each field alone would otherwise refuse nearly every mail. */
function mostly<T, U>(fine: fc.Arbitrary<T>, hostile: fc.Arbitrary<U>): fc.Arbitrary<T | U> {
  return fc.oneof({ arbitrary: fine, weight: 3 }, { arbitrary: hostile, weight: 1 });
}

/** Given in a quarter of the mails (two options given together, sendAt and delayMs, are refused as such). */
function sometimes<T>(value: fc.Arbitrary<T>): fc.Arbitrary<T | undefined> {
  return fc.oneof({ arbitrary: fc.constant(undefined), weight: 3 }, { arbitrary: value, weight: 1 });
}

const fineJson = fc.dictionary(fc.string({ maxLength: 10 }), fc.jsonValue({ maxDepth: 3 }), { maxKeys: 4 });

const anyAddress = mostly(
  fc.emailAddress(),
  fc.oneof(
    fc.tuple(anyText, fc.emailAddress()).map(([text, address]) => `${text}${address}`),
    anyText.map((text) => `${text}@example.com`),
    fc.tuple(anyText, fc.emailAddress()).map(([name, address]) => `${name} <${address}>`),
    fc.record({ name: anyText, address: fc.oneof(fc.emailAddress(), anyText) }),
    leaf,
  ),
);

const recipients = fc.oneof(anyAddress, fc.array(anyAddress, { minLength: 1, maxLength: 3 }));

const anyAttachment = fc.record({
  filename: mostly(fc.constant('report.pdf'), anyText),
  contentType: mostly(
    fc.constant('application/pdf'),
    fc.oneof(
      anyText.map((text) => `text/plain; name="${text}"`),
      anyText,
    ),
  ),
  cid: sometimes(anyText),
  content: mostly(fc.uint8Array({ maxLength: 64 }), anyText),
  encoding: sometimes(fc.constantFrom('utf8', 'base64', 'latin1')),
  ref: sometimes(anyText),
});

const envelope = {
  to: recipients,
  cc: sometimes(recipients),
  bcc: sometimes(recipients),
  from: sometimes(anyAddress),
  replyTo: sometimes(recipients),
  headers: sometimes(
    mostly(
      fc.dictionary(fc.constantFrom('X-Tag', 'X-Order'), fc.string({ maxLength: 20 })),
      fc.oneof(fc.dictionary(fc.constantFrom('X-Tag', 'x-\0', 'X-\uD800'), anyText), leaf),
    ),
  ),
};

const contentMail = fc.record({
  ...envelope,
  subject: mostly(fc.constant('Your order'), anyText),
  text: mostly(fc.string({ minLength: 1 }), anyText),
  html: sometimes(anyText),
  attachments: sometimes(mostly(fc.array(anyAttachment, { maxLength: 2 }), leaf)),
});

const templateMail = fc.record({
  ...envelope,
  template: mostly(fc.constant('greeting'), anyText),
  params: mostly(fineJson, anyObject),
  locale: sometimes(mostly(fc.constantFrom('en', 'de-AT'), anyText)),
  subject: sometimes(anyText),
});

const anyMail = fc.oneof(contentMail, templateMail) as fc.Arbitrary<OutgoingMail>;

const anyDuration = mostly(fc.integer({ min: 0, max: 86_400_000 }), fc.oneof(anyNumber, leaf));
const anyMoment = mostly(
  fc.date({ min: new Date(Date.now() + 60_000), max: new Date(Date.now() + 86_400_000) }),
  fc.oneof(anyDate, leaf),
);

const anyOptions = fc.record({
  metadata: sometimes(mostly(fineJson, anyObject)),
  lane: sometimes(mostly(fc.constant('default'), anyText)),
  sendAt: sometimes(anyMoment),
  delayMs: sometimes(anyDuration),
  expiresAt: sometimes(anyMoment),
  ttlMs: sometimes(anyDuration),
  idempotencyKey: sometimes(mostly(fc.string({ maxLength: 20 }), fc.oneof(anyText, leaf))),
}) as fc.Arbitrary<EnqueueOptions>;

/** What the transaction adapters read of a tx to recognise and open it, each hostile in its own way. */
const TX_MEMBERS = [
  'getKysely',
  'isInTransaction',
  'getTransactionContext',
  'getEventManager',
  'query',
  'connectionParameters',
  'readyForQuery',
  'getTransactionStatus',
  '$queryRawUnsafe',
  '$connect',
  'executeQuery',
  'isTransaction',
  'withoutPlugins',
  'startTransaction',
  'isTransactionActive',
  'transactionDepth',
  'connection',
  'manager',
  'queryRunner',
  '@instanceof',
  '_',
  'totalCount',
  'connect',
];

/** What a hostile member throws; from a client's own statement it is that client's error, and passes unchanged. */
class HostileError extends Error {}

/** The members a client answers a statement through: they return promises, which may reject. */
const QUERY_METHODS = new Set(['query', '$queryRawUnsafe', 'executeQuery']);

const hostileMember = (name: string) =>
  fc.oneof(
    fc.anything(),
    fc.constantFrom(Symbol.for('EntityManager'), Symbol.for('DataSource'), 'I', 'T'),
    fc.anything().map((value) => () => value),
    fc.constant(() => {
      throw new HostileError('hostile');
    }),
    ...(QUERY_METHODS.has(name)
      ? [
          fc.anything().map((value) => () => Promise.resolve(value)),
          fc.constant(() => Promise.reject(new HostileError('hostile'))),
        ]
      : []),
  );

const hostileMembers = (maxMembers: number) =>
  fc
    .uniqueArray(fc.constantFrom(...TX_MEMBERS), { maxLength: maxMembers })
    .chain((names) => fc.tuple(...names.map((name) => hostileMember(name).map((value) => [name, value] as const))))
    .map((entries) => Object.fromEntries(entries) as Record<string, unknown>);

/** Anything JSON-like, or an object made of the members the adapters read, some of them getters that throw. */
const anyTx = fc.oneof(
  fc.anything(),
  hostileMembers(6),
  fc.tuple(hostileMembers(4), fc.constantFrom(...TX_MEMBERS)).map(([members, throwing]) =>
    Object.defineProperty({ ...members }, throwing, {
      enumerable: true,
      get() {
        throw new HostileError('hostile getter');
      },
    }),
  ),
);

describe('enqueue, given anything', () => {
  const bed = useTestBed();

  it('property: throws MailValidationError before any SQL or stores the row; the business transaction commits either way', async () => {
    const app = await bed.startApp(
      testMailOptions(bed.smtpUrl, {
        dispatcher: { enabled: false },
        templates: [{ name: 'greeting', version: 1, render: () => ({ subject: 'Hi', text: 'Hello' }) }],
      }),
      [],
      { scheduler: false },
    );
    const outbox = app.get(MailOutboxService);
    const em = app.get(EntityManager);
    await bed.execute('create table if not exists orders (id serial primary key, run int not null)');
    // What committed, read on a connection of its own.
    const reader = new pg.Client({ connectionString: bed.databaseUrl });
    await reader.connect();
    let run = 0;
    let stored = 0;
    let refused = 0;

    try {
      await fc.assert(
        fc.asyncProperty(anyMail, anyOptions, fc.boolean(), async (mail, options, many) => {
          run += 1;
          // A key of its own per run: the same key with another mail is a conflict, which is not what this tests.
          const idempotencyKey =
            typeof options.idempotencyKey === 'string' ? `${options.idempotencyKey}#${run}` : options.idempotencyKey;
          let ids: string[] = [];
          await em.transactional(async () => {
            await em.execute('insert into orders (run) values (?)', [run]);
            try {
              const results = many
                ? await outbox.enqueueMany(
                    [{ mail, idempotencyKey }, { mail: { ...mail, to: 'two@example.com' } }],
                    options,
                  )
                : [await outbox.enqueue(mail, { ...options, idempotencyKey })];
              ids = results.map((result) => result.id);
            } catch (error) {
              if (!(error instanceof MailValidationError)) throw error;
            }
            // The transaction is still usable: nothing the enqueue did made PostgreSQL abort it.
            await em.execute('insert into orders (run) values (?)', [run]);
          });
          if (ids.length > 0) stored += 1;
          else refused += 1;
          const orders = await reader.query('select count(*)::int as count from orders where run = $1', [run]);
          expect(orders.rows).toEqual([{ count: 2 }]);
          const rows = await reader.query('select count(*)::int as count from mail_outbox where id = any($1::uuid[])', [
            ids,
          ]);
          expect(rows.rows).toEqual([{ count: ids.length }]);
        }),
        propertyRuns('enqueue of any mail and options'),
      );
    } finally {
      await reader.end();
    }
    // Both outcomes were exercised: a generator that only ever made refused mail would prove nothing.
    expect(stored).toBeGreaterThan(20);
    expect(refused).toBeGreaterThan(20);
  });

  it('property: any value as tx is a transaction reliable-mail knows, none, or a typed error, and nothing is written then', async () => {
    const app = await bed.startApp(testMailOptions(bed.smtpUrl, { dispatcher: { enabled: false } }), [], {
      scheduler: false,
    });
    const outbox = app.get(MailOutboxService);
    let run = 0;
    let stored = 0;
    let refused = 0;
    await fc.assert(
      fc.asyncProperty(anyTx, async (tx) => {
        run += 1;
        const idempotencyKey = `tx-${run}`;
        try {
          await outbox.enqueue({ to: 'ann@example.com', subject: 'Hi', text: 'x' }, { tx, idempotencyKey });
          stored += 1;
        } catch (error) {
          // Refused (MailValidationError), the client's own statement failed (as a database error would), or what a
          // client made up as its answer read as such (a ReliableMailError): never a TypeError or the like.
          if (!(error instanceof ReliableMailError) && !(error instanceof HostileError)) throw error;
          refused += 1;
          // Nothing of it was written, on reliable-mail's connections or elsewhere.
          expect(await bed.execute('select id from mail_outbox where idempotency_key = $1', [idempotencyKey])).toEqual(
            [],
          );
        }
      }),
      propertyRuns('enqueue with any value as tx'),
    );
    // Objects that claim no transaction (a root client) commit on reliable-mail's own connection.
    expect(stored).toBeGreaterThan(10);
    expect(refused).toBeGreaterThan(10);
  });
});
