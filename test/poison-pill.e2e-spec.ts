import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import {
  MailOutboxService,
  type MailTemplate,
  type MailTransport,
  type OutboundMessage,
  type ReliableMailOptions,
  type SendOutcome,
} from '@reliable-mail/nestjs';
import { testMailOptions, waitFor } from './support/test-app.js';
import { useTestBed } from './support/test-bed.js';

// One bad value, one bad report or one throw must never cost another mail: each poisoned row ends final with its
// reason, and every other mail goes out once, with no row left `sending`.

const FINAL = ['sent', 'failed', 'dead', 'expired', 'cancelled', 'suppressed'];

/**
 * A template whose error is longer than the renderer's 1,000-character cut of a reason, with an emoji whose two
 * halves sit at code units 999 and 1,000: a `slice` leaves the first half, which PostgreSQL refuses.
 */
const poisonedTemplate: MailTemplate = {
  name: 'poisoned',
  version: 1,
  render: () => {
    throw new Error(`${'x'.repeat(999)}\u{1F600}${'y'.repeat(100)}`);
  },
};

/** A partner API stand-in: it refuses every mail with a reply that ends in half a character. */
class PartnerTransport implements MailTransport {
  async send(message: OutboundMessage): Promise<SendOutcome> {
    const reply = '554 5.7.1 refused by policy \uD83D';
    return {
      kind: 'attempted',
      recipients: message.recipients.map((address) => ({
        address,
        status: 'refused',
        replyCode: 554,
        enhancedStatus: '5.7.1',
        reply,
        perRecipient: false,
        providerMessageId: 'pm-\uDE00',
      })),
      reply: null,
      providerMessageId: 'pm-\uDE00',
      slowDown: false,
    };
  }
  async verify(): Promise<void> {}
  async close(): Promise<void> {}
}

/** Statuses and reasons of every row, by id. */
async function rowsById(execute: (sql: string) => Promise<unknown[]>) {
  const rows = (await execute(`select id, status, last_error from mail_outbox`)) as Array<{
    id: string;
    status: string;
    last_error: string | null;
  }>;
  return new Map(rows.map((row) => [row.id, row]));
}

describe('no poison pill', () => {
  const bed = useTestBed();
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => unhandled.push(reason);
  beforeEach(() => {
    unhandled.length = 0;
    process.on('unhandledRejection', onUnhandled);
  });
  afterEach(() => {
    process.off('unhandledRejection', onUnhandled);
  });

  it('30 poisoned rows among 300 good ones, 2 workers: every good mail once, no row left sending, each poisoned row final with its reason, within 60 s', async () => {
    // A hostile server answers RCPT for these with a reply code of eleven digits, which nodemailer takes whole.
    const smtp = await bed.startSmtp({
      onRcptTo: (recipient) =>
        recipient.startsWith('hostile') ? { code: 55_555_555_555, text: '5.1.1 no such user' } : undefined,
    });
    const options: ReliableMailOptions = testMailOptions(smtp.url, {
      templates: [poisonedTemplate],
      lanes: { default: { concurrency: 8 }, partner: { concurrency: 4, transport: new PartnerTransport() } },
      dispatcher: { batchSize: 20 },
      // The hostile server's rows are deferred (its reply has no code) until they are too old, after 3 s.
      retry: { baseDelayMs: 200, maxDelayMs: 400, maxAgeMs: 3_000 },
    });
    const producer = await bed.startApp({ ...options, dispatcher: { ...options.dispatcher, enabled: false } });
    const outbox = producer.get(MailOutboxService);

    const kinds = [
      ...Array.from({ length: 300 }, (_, index) => ({ kind: 'good', index })),
      ...Array.from({ length: 10 }, (_, index) => ({ kind: 'template', index })),
      ...Array.from({ length: 10 }, (_, index) => ({ kind: 'hostile', index })),
      ...Array.from({ length: 10 }, (_, index) => ({ kind: 'partner', index })),
    ];
    // Poisoned rows spread among the good ones, so that each settle batch is likely to hold one.
    kinds.sort((a, b) => (a.index % 11) - (b.index % 11) || a.kind.localeCompare(b.kind));
    const enqueued = new Map<string, { kind: string; messageId: string }>();
    for (const { kind, index } of kinds) {
      const { id, messageId } = await outbox.enqueue(
        kind === 'template'
          ? { to: `template${index}@example.com`, template: 'poisoned', params: {} }
          : { to: `${kind}${index}@example.com`, subject: `${kind} ${index}`, text: 'Thanks' },
        kind === 'partner' ? { lane: 'partner' } : {},
      );
      enqueued.set(id, { kind, messageId });
    }

    const started = Date.now();
    await Promise.all([bed.startApp(options), bed.startApp(options)]);
    await waitFor(
      'every row final',
      async () => [...(await rowsById(bed.execute)).values()].every((row) => FINAL.includes(row.status)),
      60_000,
    );
    process.stdout.write(`30 poisoned among 300: every row final after ${Date.now() - started} ms\n`);

    const rows = await rowsById(bed.execute);
    const copies = smtp.copiesByMessageId();
    const good = [...enqueued].filter(([, row]) => row.kind === 'good');
    expect(good.map(([, { messageId }]) => copies.get(messageId))).toEqual(good.map(() => 1));
    expect(smtp.received).toHaveLength(300);
    expect(good.map(([id]) => rows.get(id)!.status)).toEqual(good.map(() => 'sent'));
    const poisoned = [...enqueued].filter(([, row]) => row.kind !== 'good');
    expect(
      poisoned.map(([id, { kind }]) => ({ kind, status: rows.get(id)!.status, reason: rows.get(id)!.last_error })),
    ).toEqual(
      poisoned.map(([, { kind }]) => ({
        kind,
        status: kind === 'hostile' ? 'dead' : 'failed',
        reason:
          kind === 'template'
            ? expect.stringMatching(/^template "poisoned"@1 failed to render: x+…$/)
            : kind === 'partner'
              ? '554 5.7.1 refused by policy \uFFFD'
              : expect.stringContaining('55555555555 5.1.1 no such user'),
      })),
    );
    expect(unhandled).toEqual([]);
  }, 90_000);

  it('a custom transport that reports {} or another malformed outcome: every row of its lane final, the other mail sent once, no unhandled rejection', async () => {
    const smtp = await bed.startSmtp();
    /** Malformed in a way that depends on the mail's subject. */
    const malformed: Record<string, () => unknown> = {
      empty: () => ({}),
      'no recipients': () => ({ kind: 'attempted', reply: '250 ok', providerMessageId: null, slowDown: false }),
    };
    /** Well-formed but for a fact about the request, which is left out: the recipient's verdict stands. */
    const invalidAcceptedAt = () => ({
      kind: 'attempted',
      recipients: [
        {
          address: 'partner@example.com',
          status: 'accepted',
          replyCode: 250,
          enhancedStatus: null,
          reply: '250 ok',
          perRecipient: true,
        },
      ],
      reply: '250 ok',
      providerMessageId: 'p-1',
      acceptedAt: new Date('not a date'),
      slowDown: false,
    });
    const transport = {
      send: async (message: OutboundMessage) => (malformed[message.mail.subject] ?? invalidAcceptedAt)() as SendOutcome,
      verify: async () => undefined,
      close: async () => undefined,
    };
    const options = testMailOptions(smtp.url, {
      lanes: { default: {}, partner: { concurrency: 10, transport } },
      // Two attempts at most, and rows older than 50 ms are not retried: an unknown outcome dead-letters at once.
      retry: { maxAttempts: 2, baseDelayMs: 100, maxDelayMs: 100, maxAgeMs: 50 },
    });
    const producer = await bed.startApp({ ...options, dispatcher: { ...options.dispatcher, enabled: false } });
    const outbox = producer.get(MailOutboxService);
    const broken = [];
    for (const subject of Object.keys(malformed))
      for (let copy = 0; copy < 3; copy++)
        broken.push(await outbox.enqueue({ to: 'partner@example.com', subject, text: 'x' }, { lane: 'partner' }));
    const acceptedWithoutTime = [];
    for (let copy = 0; copy < 3; copy++)
      acceptedWithoutTime.push(
        await outbox.enqueue(
          { to: 'partner@example.com', subject: 'invalid acceptedAt', text: 'x' },
          { lane: 'partner' },
        ),
      );
    const good = [];
    for (let index = 0; index < 30; index++)
      good.push(await outbox.enqueue({ to: `customer${index}@example.com`, subject: `Order ${index}`, text: 'x' }));

    await bed.startApp(options);
    await waitFor(
      'every row final',
      async () => [...(await rowsById(bed.execute)).values()].every((row) => FINAL.includes(row.status)),
      20_000,
    );

    const rows = await rowsById(bed.execute);
    expect(good.map(({ id }) => rows.get(id)!.status)).toEqual(good.map(() => 'sent'));
    expect(good.map(({ messageId }) => smtp.copiesByMessageId().get(messageId))).toEqual(good.map(() => 1));
    const flaws = { empty: 'kind', 'no recipients': 'recipients' };
    expect(broken.map(({ id }) => rows.get(id)!)).toEqual(
      Object.values(flaws).flatMap((field) =>
        Array.from({ length: 3 }, () =>
          expect.objectContaining({
            status: 'dead',
            last_error: expect.stringContaining(`the transport reported a malformed outcome: ${field} must be`),
          }),
        ),
      ),
    );
    // Its invalid accept time is left out: the recipient took the mail, and it is not sent again.
    expect(acceptedWithoutTime.map(({ id }) => rows.get(id)!)).toEqual(
      acceptedWithoutTime.map(() => expect.objectContaining({ status: 'sent', last_error: null })),
    );
    const attempts = (await bed.execute(
      `select o.id, a.outcome, o.provider_accepted_at from mail_outbox_attempt a join mail_outbox o on o.id = a.outbox_id
       where o.lane = 'partner' order by o.id`,
    )) as Array<{ id: string; outcome: string; provider_accepted_at: Date | null }>;
    const brokenIds = new Set(broken.map(({ id }) => id));
    expect(new Set(attempts.filter(({ id }) => brokenIds.has(id)).map((attempt) => attempt.outcome))).toEqual(
      new Set(['unknown']),
    );
    expect(attempts.filter(({ id }) => !brokenIds.has(id))).toEqual(
      acceptedWithoutTime
        .map(({ id }) => ({ id, outcome: 'sent', provider_accepted_at: null }))
        .sort((a, b) => (a.id < b.id ? -1 : 1)),
    );
    expect(unhandled).toEqual([]);
  }, 40_000);

  it('a transport whose outcome throws when it is read: each attempt is settled at once as unknown and the row dead-lettered by its retry policy, not left to its lease; no unhandled rejection, the rest sent', async () => {
    const smtp = await bed.startSmtp();
    const transport = {
      send: async () =>
        ({
          get kind(): never {
            throw new Error('the partner SDK broke');
          },
        }) as unknown as SendOutcome,
      verify: async () => undefined,
      close: async () => undefined,
    };
    const options = testMailOptions(smtp.url, {
      lanes: { default: {}, partner: { transport } },
      // A lease far longer than the test: a row left to its lease would never be final here.
      dispatcher: { leaseMs: 600_000 },
      retry: { maxAttempts: 2, baseDelayMs: 100, maxDelayMs: 100, maxAgeMs: 50 },
    });
    const app = await bed.startApp(options);
    const outbox = app.get(MailOutboxService);
    const throwing = await outbox.enqueue({ to: 'partner@example.com', subject: 'x', text: 'x' }, { lane: 'partner' });
    const good = await outbox.enqueue({ to: 'ann@example.com', subject: 'x', text: 'x' });

    await waitFor('the good mail sent', async () => (await outbox.get(good.id)).status === 'sent');
    await waitFor('the throwing row final', async () => (await outbox.get(throwing.id)).status === 'dead', 20_000);
    expect(await outbox.get(throwing.id)).toMatchObject({
      status: 'dead',
      lastError: expect.stringContaining(
        'the transport reported a malformed outcome: reading the outcome threw: Error: the partner SDK broke',
      ),
    });
    const attempts = (await bed.execute(`select outcome from mail_outbox_attempt where outbox_id = $1`, [
      throwing.id,
    ])) as Array<{ outcome: string }>;
    // Each attempt settled by its worker as unknown: none was left to its lease (which a claim would mark so too,
    // and close as 'crashes').
    expect(new Set(attempts.map((attempt) => attempt.outcome))).toEqual(new Set(['unknown']));
    expect(smtp.copiesByMessageId().get(good.messageId)).toBe(1);
    expect(unhandled).toEqual([]);
  }, 45_000);

  it.each([
    { skip: 'expired', set: `expires_at = now() - interval '1 second'` },
    {
      skip: 'cancelled',
      set: `status = 'sending', locked_until = now() - interval '1 second', cancel_requested_at = now()`,
    },
  ])(
    'a row $skip at claim after an earlier attempt reached one recipient: sent for that one, with its sent event',
    async ({ set }) => {
      const smtp = await bed.startSmtp();
      const producer = await bed.startApp(testMailOptions(smtp.url, { dispatcher: { enabled: false } }));
      const { id } = await producer
        .get(MailOutboxService)
        .enqueue({ to: ['ann@example.com', 'bob@example.com'], subject: 'Hi', text: 'x' });
      await bed.execute(
        `update mail_outbox set attempts = 1, accepted_recipients = '["ann@example.com"]', ${set} where id = $1`,
        [id],
      );

      const app = await bed.startApp(testMailOptions(smtp.url));
      await waitFor('the sent event', () => app.events.sent.some((event) => event.id === id));
      expect(await app.get(MailOutboxService).get(id)).toMatchObject({
        status: 'sent',
        attempts: 1,
        acceptedRecipients: ['ann@example.com'],
      });
      expect(app.events.sent.find((event) => event.id === id)).toMatchObject({
        accepted: ['ann@example.com'],
        rejected: [expect.objectContaining({ address: 'bob@example.com' })],
      });
      expect(app.events.failed.filter((event) => event.id === id)).toEqual([]);
      expect(smtp.received).toHaveLength(0);
    },
  );
});
