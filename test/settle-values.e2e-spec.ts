import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import type { Logger } from '@nestjs/common';
import { MailOutboxService } from '@reliable-mail/nestjs';
import fc from 'fast-check';
import pg from 'pg';
import { UNSTORED_TEXT_NOTE } from '../libs/reliable-mail/src/dispatch/noted-settlement.js';
import { readOutcome } from '../libs/reliable-mail/src/dispatch/outcome-check.js';
import { settlementFor } from '../libs/reliable-mail/src/dispatch/settlement.js';
import { Settler } from '../libs/reliable-mail/src/dispatch/settler.js';
import type { MailEventPublisher } from '../libs/reliable-mail/src/events/mail-event.publisher.js';
import type { MailPayload } from '../libs/reliable-mail/src/outbox/mail.types.js';
import type { ClaimedRow, Settlement } from '../libs/reliable-mail/src/outbox/queue.types.js';
import type { RetryPolicy } from '../libs/reliable-mail/src/shared/retry-policy.js';
import type { SendOutcome } from '../libs/reliable-mail/src/transport/mail-transport.interface.js';
import { propertyRuns } from './support/property-runs.js';
import { sqlClientOf } from './support/sql-client.js';
import { createTestApp, migrate, testMailOptions } from './support/test-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

// What a transport reports reaches PostgreSQL through the settle: whatever it is, the settle must be written, in the
// status the settlement decided, and must hold back no other row of its batch.

const ENVELOPE = ['ann@example.com', 'bob@example.com'];
const policy: RetryPolicy = { maxAttempts: 3, baseDelayMs: 1_000, maxDelayMs: 60_000, maxAgeMs: 86_400_000 };

/** Text as hostile as a peer can send: lone surrogates, NUL, and now and then a megabyte of it. */
const megabyte = 'é'.repeat(2 ** 19);
const hostileText = fc.oneof(
  { arbitrary: fc.string({ unit: 'binary', maxLength: 200 }), weight: 150 },
  { arbitrary: fc.constantFrom('\0', '\uD800', '\uDFFF', 'a\uD83D', '\uDE00b', '\\u0000', '\\ud800'), weight: 40 },
  // About one run in twenty carries one: each takes a tenth of a second to write.
  { arbitrary: fc.constantFrom(`${megabyte}\uD83D`, `\0${megabyte}`), weight: 1 },
);
/** The numbers a peer can put where a reply code goes. */
const anyNumber = fc.oneof(
  fc.integer({ min: 100, max: 999 }),
  fc.integer(),
  fc.double(),
  fc.constantFrom(Number.NaN, Infinity, -Infinity, 2 ** 31, 2 ** 53, 1e300, -0),
);
/** Dates out of PostgreSQL's range (and JavaScript's edges), invalid ones, none. */
const anyDate = fc.oneof(fc.date({ noInvalidDate: false }), fc.constantFrom(null, undefined, new Date(0)));

/** What a transport's own objects may carry besides the fields of a SendOutcome: none of it can be JSON. */
const unserialisable = fc.constantFrom('none', 'a BigInt', 'a cycle', 'a toJSON that throws', 'a getter that throws');
/** `value` with an extra field of that kind. */
function carrying<T extends object>(value: T, extra: string): T {
  if (extra === 'a BigInt') return Object.assign(value, { trace: 10n ** 30n });
  if (extra === 'a cycle') return Object.assign(value, { self: value });
  if (extra === 'a toJSON that throws')
    return Object.assign(value, {
      toJSON: () => {
        throw new Error('the SDK cannot be written');
      },
    });
  if (extra === 'a getter that throws')
    return Object.defineProperty(value, 'trace', {
      enumerable: true,
      get: () => {
        throw new Error('the SDK broke');
      },
    });
  return value;
}
const recipientOutcome = (address: string) =>
  fc
    .tuple(
      fc.record({
        address: fc.constant(address),
        status: fc.constantFrom('accepted', 'deferred', 'refused', 'unknown', 'sent'),
        replyCode: fc.oneof(fc.constant(null), anyNumber),
        enhancedStatus: fc.option(hostileText),
        reply: fc.option(hostileText),
        perRecipient: fc.boolean(),
        providerMessageId: fc.option(hostileText, { nil: undefined }),
      }),
      unserialisable,
    )
    .map(([recipient, extra]) => carrying(recipient, extra));
/** What a transport reports for the envelope: mostly an attempt, its recipients now and then wrong. */
const transportOutcome: fc.Arbitrary<unknown> = fc.oneof(
  {
    weight: 8,
    arbitrary: fc
      .tuple(
        fc.record(
          {
            kind: fc.constant('attempted'),
            recipients: fc
              .tuple(...ENVELOPE.map(recipientOutcome), fc.constantFrom('each once', 'one left out', 'one twice'))
              .map(([ann, bob, shape]) =>
                shape === 'each once' ? [ann, bob] : shape === 'one left out' ? [bob] : [ann, ann],
              ),
            reply: fc.option(hostileText),
            providerMessageId: fc.option(hostileText),
            providerRequestId: fc.option(hostileText, { nil: undefined }),
            acceptedAt: anyDate,
            deduplicatedByKey: fc.boolean(),
            slowDown: fc.boolean(),
            retryAfterMs: fc.option(anyNumber, { nil: undefined }),
          },
          { requiredKeys: ['kind', 'recipients', 'reply', 'providerMessageId', 'slowDown'] },
        ),
        unserialisable,
      )
      .map(([outcome, extra]) => carrying(outcome, extra)),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('outage'),
      replyCode: fc.oneof(fc.constant(null), anyNumber),
      enhancedStatus: fc.option(hostileText),
      reply: hostileText,
    }),
  },
  { weight: 1, arbitrary: fc.anything() },
);
/** The row as a claim finds it: its attempt, and now and then an expiry before the next retry. */
const rowState = fc.record({
  attempts: fc.integer({ min: 1, max: 3 }),
  expiresInMs: fc.option(fc.integer({ min: 1, max: 10_000 })),
});

describe('settle values against PostgreSQL', () => {
  let database: TestDatabase;
  let app: Awaited<ReturnType<typeof createTestApp>>;
  let pool: pg.Pool;
  let settler: Settler;
  let row: { id: string; messageId: string; payload: MailPayload };
  const errors: Array<Record<string, unknown>> = [];
  const logger = {
    warn: () => undefined,
    error: (entry: Record<string, unknown>) => errors.push(entry),
  } as unknown as Logger;
  // Every event is recorded with its settle, as when something listens for it.
  const publisher = { recordingOf: () => 'listeners', committed: () => undefined } as unknown as MailEventPublisher;

  beforeAll(async () => {
    database = await createTestDatabase();
    await migrate(database.url);
    app = await createTestApp(database.url, testMailOptions('smtp://127.0.0.1:1', { dispatcher: { enabled: false } }));
    pool = new pg.Pool({ connectionString: database.url, max: 2 });
    // A statement's bound of 1 s: the settles here, with 1.5 s left, share statements as the lanes' do.
    settler = new Settler(sqlClientOf(pool), publisher, 30_000, 1_000, logger);
    const { id, messageId } = await app
      .get(MailOutboxService)
      .enqueue({ to: ENVELOPE[0], cc: ENVELOPE[1], subject: 'Your order', text: 'Thanks' }, { metadata: { order: 7 } });
    const [{ payload }] = (await pool.query(`select payload from mail_outbox where id = $1`, [id])).rows;
    row = { id, messageId, payload };
  });

  beforeEach(() => {
    errors.length = 0;
  });

  afterAll(async () => {
    await pool?.end();
    await app?.close();
    await database?.drop();
  });

  /**
   * The row claimed anew, with an attempt of its own: `sending` under a fresh lock token, nobody suppressed. The same
   * row serves every run of a property.
   */
  async function claimed(id: string, { attempts, expiresInMs }: { attempts: number; expiresInMs: number | null }) {
    const lockToken = randomUUID();
    const attemptId = randomUUID();
    const expiresAt = expiresInMs === null ? null : new Date(Date.now() + expiresInMs);
    const {
      rows: [{ day }],
    } = await pool.query<{ day: string }>(
      `with reset as (
         update mail_outbox set status = 'sending', lock_token = $2, locked_until = now() + interval '1 minute',
                attempts = $3, expires_at = $5, accepted_recipients = null, rejected_recipients = null,
                provider_message_id = null, provider_message_ids = null, provider_request_id = null,
                provider_accepted_at = null
         where id = $1 returning id, partition_day
       ), attempt as (
         insert into mail_outbox_attempt (id, outbox_id, attempt, worker_id, lock_token, partition_day)
         select $4, id, $3, 'property', $2, partition_day from reset
       ), unsuppressed as (delete from mail_suppression)
       select partition_day::text as day from reset`,
      [id, lockToken, attempts, attemptId, expiresAt],
    );
    const claim: ClaimedRow = {
      id,
      messageId: row.messageId,
      idempotencyKey: null,
      payload: row.payload,
      metadata: { order: 7 },
      attempts,
      maxAttempts: policy.maxAttempts,
      ageFrom: new Date(),
      lane: 'default',
      expiresAt,
      lockToken,
      partitionDay: day,
      attemptId,
      skipReason: null,
      suppressed: [],
      possiblyTakenBefore: [],
      possiblyTakenThrough: null,
      acceptedRecipients: [],
      rejectedRecipients: [],
      leaseEndsAt: performance.now() + 60_000,
    };
    return claim;
  }

  /** Settles as the lane does, giving up after 1.5 s of retries (a settle that fails for its values never succeeds). */
  async function settled(settlement: Settlement) {
    const outcome = await settler.settle(settlement, performance.now() + 1_500);
    const [stored] = (
      await pool.query(`select status, last_error, provider_reply from mail_outbox where id = $1`, [settlement.id])
    ).rows as Array<{ status: string; last_error: string | null; provider_reply: string | null }>;
    return { outcome, stored };
  }

  it('property: whatever a transport reports, the settle is written in the status decided, and PostgreSQL refuses nothing', async () => {
    await fc.assert(
      fc.asyncProperty(transportOutcome, rowState, async (reported, state) => {
        errors.length = 0;
        const claim = await claimed(row.id, state);
        const settlement = settlementFor(claim, readOutcome(reported, ENVELOPE).outcome, policy, new Date(), 12);
        const { outcome, stored } = await settled(settlement);
        expect(errors).toEqual([]);
        expect(outcome?.applied).toBe(true);
        expect(stored.status).toBe(settlement.status);
      }),
      propertyRuns('settle of any transport outcome'),
    );
  }, 300_000);

  it('property: a settlement with hostile values in every field a peer reports, and objects JSON cannot write, is written in the status decided', async () => {
    const hostileRecipient = fc.record({
      replyCode: anyNumber,
      enhancedStatus: hostileText,
      reply: hostileText,
      providerMessageId: hostileText,
    });
    const hostileFields = fc.record({
      replyCode: anyNumber,
      enhancedStatus: hostileText,
      reply: hostileText,
      lastError: hostileText,
      providerMessageId: hostileText,
      providerRequestId: hostileText,
      providerAcceptedAt: anyDate,
      recipients: fc.tuple(hostileRecipient, hostileRecipient),
      // What a transport's own objects carry, had it reached the settlement unchecked.
      extras: fc.tuple(unserialisable, unserialisable),
    });
    const statuses = fc.constantFrom('accepted', 'deferred', 'refused', 'unknown');
    await fc.assert(
      fc.asyncProperty(fc.tuple(statuses, statuses), hostileFields, rowState, async ([ann, bob], hostile, state) => {
        const claim = await claimed(row.id, state);
        // A decision made on a well-formed outcome, then given what no check has seen.
        const result: SendOutcome = {
          kind: 'attempted',
          recipients: ENVELOPE.map((address, index) => ({
            address,
            status: index === 0 ? ann : bob,
            replyCode: 550,
            enhancedStatus: '5.1.1',
            reply: '550 5.1.1 no such user',
            perRecipient: true,
          })),
          reply: '250 ok',
          providerMessageId: null,
          slowDown: false,
        };
        const decided = settlementFor(claim, result, policy, new Date(), 12);
        const { recipients, extras, ...fields } = hostile;
        const settlement = {
          ...decided,
          ...fields,
          providerAcceptedAt: fields.providerAcceptedAt ?? null,
          attemptRecipients: decided.attemptRecipients!.map((recipient, index) =>
            carrying({ ...recipient, ...recipients[index] }, extras[index]),
          ),
          rejectedRecipients: decided.rejectedRecipients?.map((rejected, index) => ({
            ...rejected,
            reply: recipients[index % 2].reply,
            replyCode: recipients[index % 2].replyCode,
          })),
          bounced: decided.bounced.map((bounce) => ({ ...bounce, reply: fields.reply })),
          eventPayload: {
            ...decided.eventPayload,
            reason: fields.lastError,
            reply: fields.reply,
            replyCode: fields.replyCode,
          },
        } as Settlement;
        const { outcome, stored } = await settled(settlement);
        expect(outcome?.applied).toBe(true);
        expect(stored.status).toBe(decided.status);
      }),
      propertyRuns('settle of hostile settlement values'),
    );
  }, 300_000);

  it.each([
    {
      poison: 'a reply code no integer column takes (PostgreSQL refuses the statement)',
      poisoned: (settlement: Settlement): Settlement => ({ ...settlement, replyCode: 3_000_000_000 }),
      logged: 'PostgreSQL refused the values of a settle',
    },
    {
      poison: 'a BigInt on a recipient, as a transport may leave one (JSON cannot write it)',
      poisoned: (settlement: Settlement): Settlement => ({
        ...settlement,
        attemptRecipients: settlement.attemptRecipients!.map((recipient) => ({ ...recipient, trace: 10n })),
      }),
      logged: 'a value of a settle cannot be written as JSON',
    },
  ])(
    'a batch holding one settlement with $poison: the others are written with their own replies, that one with a note, in its status',
    async ({ poisoned, logged }) => {
      const outbox = app.get(MailOutboxService);
      // Rows of the same recipients: a claim of each is all a settlement needs of it.
      const rows: Array<{ id: string; claim: ClaimedRow }> = [];
      for (let index = 0; index < 10; index++) {
        const { id } = await outbox.enqueue({ to: ENVELOPE[0], cc: ENVELOPE[1], subject: `Order ${index}`, text: 'x' });
        rows.push({ id, claim: await claimed(id, { attempts: 1, expiresInMs: null }) });
      }
      const settlements = rows.map(({ claim }, index) => {
        const reply = `250 2.0.0 queued as Q${index}`;
        const accepted: SendOutcome = {
          kind: 'attempted',
          recipients: ENVELOPE.map((address) => ({
            address,
            status: 'accepted',
            replyCode: 250,
            enhancedStatus: '2.0.0',
            reply,
            perRecipient: false,
          })),
          reply,
          providerMessageId: `Q${index}`,
          slowDown: false,
        };
        const settlement = settlementFor(claim, accepted, policy, new Date(), 12);
        return index === 4 ? poisoned(settlement) : settlement;
      });

      // Added in one turn, as the lanes' settles are: one batch.
      const outcomes = await Promise.all(
        settlements.map((settlement) => settler.settle(settlement, performance.now() + 1_500)),
      );

      expect(outcomes.map((outcome) => outcome?.applied)).toEqual(rows.map(() => true));
      const stored = (
        await pool.query(`select id, status, provider_reply, last_reply_code from mail_outbox where id = any($1)`, [
          rows.map(({ id }) => id),
        ])
      ).rows as Array<{ id: string; status: string; provider_reply: string; last_reply_code: number | null }>;
      const byId = new Map(stored.map((entry) => [entry.id, entry]));
      expect(rows.map(({ id }) => byId.get(id))).toEqual(
        rows.map(({ id }, index) => ({
          id,
          status: 'sent',
          provider_reply: index === 4 ? UNSTORED_TEXT_NOTE : `250 2.0.0 queued as Q${index}`,
          last_reply_code: index === 4 ? null : 250,
        })),
      );
      expect(outcomes[4]?.event?.payload).toMatchObject({ reply: UNSTORED_TEXT_NOTE, accepted: ENVELOPE });
      expect(errors).toEqual([
        expect.objectContaining({
          msg: expect.stringContaining(logged),
          id: rows[4].id,
        }),
      ]);
    },
  );

  it('a provider id of a megabyte (an index cannot hold it) is stored as none, and the rest of the settle as reported', async () => {
    const claim = await claimed(row.id, { attempts: 1, expiresInMs: null });
    const huge = `pm-${'x'.repeat(2 ** 20)}`;
    const accepted: SendOutcome = {
      kind: 'attempted',
      recipients: ENVELOPE.map((address) => ({
        address,
        status: 'accepted',
        replyCode: 200,
        enhancedStatus: null,
        reply: '200 accepted',
        perRecipient: false,
        providerMessageId: huge,
      })),
      reply: '200 accepted',
      providerMessageId: huge,
      providerRequestId: huge,
      slowDown: false,
    };
    expect(readOutcome(accepted, ENVELOPE).flaw).toBeNull();
    const { outcome } = await settled(settlementFor(claim, accepted, policy, new Date(), 12));
    expect(outcome?.applied).toBe(true);
    expect(errors).toEqual([]);
    const [stored] = (
      await pool.query(
        `select status, provider_reply, provider_message_id, provider_message_ids, provider_request_id
         from mail_outbox where id = $1`,
        [row.id],
      )
    ).rows;
    expect(stored).toEqual({
      status: 'sent',
      provider_reply: '200 accepted',
      provider_message_id: null,
      provider_message_ids: null,
      provider_request_id: null,
    });
  });
});
