import { describe, expect, it } from '@jest/globals';
import type { Logger } from '@nestjs/common';
import type { MailMetrics } from '../metrics/mail-metrics.js';
import type { ClaimedRow } from '../outbox/queue.types.js';
import type { RetryPolicy } from '../shared/retry-policy.js';
import { handlebarsTemplate } from '../templates/handlebars-template.js';
import type { MailTemplate } from '../templates/mail-template.js';
import { MailTemplateRegistry } from '../templates/mail-template.registry.js';
import type { StoredTemplateVersions } from '../templates/stored-template-versions.js';
import { SETTLE_MARGIN_MS } from './lease.js';
import type { MailTransport, OutboundMessage } from '../transport/mail-transport.interface.js';
import { Delivery } from './delivery.js';
import { signalOf } from './lane-loop.js';
import { MailRenderer } from './mail-renderer.js';
import type { AttemptResult } from './settlement.js';

const policy: RetryPolicy = { maxAttempts: 3, baseDelayMs: 1_000, maxDelayMs: 60_000, maxAgeMs: 86_400_000 };
const SEND_TIMEOUT_MS = 3_000;
/** A statement's bound: 1 s of statement_timeout and the client's 5 s. */
const STATEMENT_BOUND_MS = 6_000;

function claimedRow(overrides: Partial<ClaimedRow> = {}): ClaimedRow {
  return {
    id: 'row-1',
    messageId: '<row-1@test.example.com>',
    idempotencyKey: null,
    payload: {
      v: 2,
      from: { address: 'shop@example.com' },
      to: [{ address: 'ann@example.com' }],
      cc: [{ address: 'bob@example.com' }],
      bcc: [],
      replyTo: [],
      subject: 'Your order',
      text: 'Thanks',
      headers: {},
    },
    metadata: null,
    attempts: 2,
    maxAttempts: 3,
    ageFrom: new Date(),
    lane: 'default',
    expiresAt: null,
    lockToken: 'lock-1',
    attemptId: 'attempt-1',
    skipReason: null,
    suppressed: [],
    possiblyTakenBefore: [],
    acceptedRecipients: [],
    rejectedRecipients: [],
    leaseEndsAt: performance.now() + 600_000,
    ...overrides,
  };
}

/** A custom transport that answers with what `answer` makes of each message, and keeps the messages it was given. */
function transportAnswering(answer: (message: OutboundMessage) => Promise<unknown>) {
  const messages: OutboundMessage[] = [];
  const transport = {
    send: (message: OutboundMessage) => {
      messages.push(message);
      return answer(message);
    },
    verify: async () => undefined,
    close: async () => undefined,
  } as MailTransport;
  return { transport, messages };
}

const acceptedBy = (message: OutboundMessage) =>
  Promise.resolve({
    kind: 'attempted',
    recipients: message.recipients.map((address) => ({
      address,
      status: 'accepted',
      replyCode: 250,
      enhancedStatus: '2.0.0',
      reply: '250 2.0.0 queued',
      perRecipient: false,
    })),
    reply: '250 2.0.0 queued',
    providerMessageId: 'Q1',
    slowDown: false,
  });

function delivery(
  transport: MailTransport,
  templates: MailTemplate[] = [],
  perMail = false,
  storedVersions: StoredTemplateVersions | null = null,
) {
  const logged: Array<{ level: string; entry: Record<string, unknown> }> = [];
  const log = (level: string) => (entry: Record<string, unknown>) => logged.push({ level, entry });
  const logger = { debug: log('debug'), warn: log('warn'), error: log('error') } as unknown as Logger;
  const metrics = { recordAttempt: () => undefined } as unknown as MailMetrics;
  const registry = new MailTemplateRegistry();
  for (const template of templates) registry.register(template);
  const renderer = new MailRenderer(registry, { attachmentResolver: null }, storedVersions);
  return {
    delivery: new Delivery(
      renderer,
      transport,
      policy,
      SEND_TIMEOUT_MS,
      STATEMENT_BOUND_MS,
      metrics,
      logger,
      null,
      perMail,
    ),
    logged,
  };
}

const pace = () => new Date();
const notStopping = new AbortController().signal;

describe('Delivery', () => {
  it("cuts the send's deadline so that the settle keeps a statement's whole bound of the lease, and its margin", async () => {
    const hang: MailTemplate = { name: 'hang', version: 1, render: () => new Promise(() => undefined) };
    const { transport } = transportAnswering(acceptedBy);
    const row = claimedRow({
      payload: { ...claimedRow().payload, v: 2, template: { name: 'hang', version: 1, params: {} } } as never,
      leaseEndsAt: performance.now() + STATEMENT_BOUND_MS + SETTLE_MARGIN_MS + 300,
    });
    const settlement = await delivery(transport, [hang]).delivery.deliver(row, pace, notStopping);
    const deadline = /^rendering did not finish within the send deadline \((\d+) ms\)/.exec(settlement.lastError ?? '');
    expect(Number(deadline?.[1])).toBeGreaterThan(0);
    expect(Number(deadline?.[1])).toBeLessThanOrEqual(300);
  });

  describe("a mail that cannot be rendered now: every recipient deferred, and nothing said of the lane's server", () => {
    const HASH = 'sha256:0123456789abcdef';
    const withVersion = (version: number | string) =>
      ({ ...claimedRow().payload, v: 2, template: { name: 'welcome', version, params: {} } }) as never;
    const hang: MailTemplate = { name: 'welcome', version: 1, render: () => new Promise(() => undefined) };

    it.each<{
      name: string;
      row: Partial<ClaimedRow>;
      templates?: MailTemplate[];
      find?: () => unknown;
      reason: RegExp;
    }>([
      {
        name: 'the database did not answer for its stored version',
        row: { payload: withVersion(HASH) },
        find: () => Promise.reject(new Error('connection terminated')),
        reason: /^template "welcome"@sha256:0123456789abcdef cannot be made from its stored sources now: connection/,
      },
      {
        name: "its stored version, made with this instance's helpers, throws",
        row: { payload: withVersion(HASH) },
        find: async () => ({
          ...handlebarsTemplate({ name: 'welcome', version: 1, subject: '{{shout x}}', text: 'x' }),
          version: HASH,
        }),
        reason: /failed to render: Missing helper: "shout"; an instance of the deploy that enqueued it may have/,
      },
      {
        name: 'its rendering passed the send deadline',
        row: { payload: withVersion(1), leaseEndsAt: performance.now() + STATEMENT_BOUND_MS + SETTLE_MARGIN_MS + 100 },
        templates: [hang],
        reason: /^rendering did not finish within the send deadline/,
      },
    ])('$name', async ({ row, templates = [], find, reason }) => {
      const { transport, messages } = transportAnswering(acceptedBy);
      const stored = find ? ({ find } as unknown as StoredTemplateVersions) : null;
      const results: AttemptResult[] = [];
      const settlement = await delivery(transport, templates, false, stored).delivery.deliver(
        claimedRow(row),
        (result) => {
          results.push(result);
          return new Date();
        },
        notStopping,
      );
      // Three in a row would otherwise pause the lane as if its server had failed.
      expect(results.map(signalOf)).toEqual([null]);
      expect(settlement).toMatchObject({ status: 'pending', outcome: 'transient', replyCode: null });
      expect(settlement.lastError).toMatch(reason);
      expect(messages).toHaveLength(0);
    });
  });

  it("tells the transport only those of the recipients an earlier attempt may have reached that are in this attempt's envelope", async () => {
    const { transport, messages } = transportAnswering(acceptedBy);
    const row = claimedRow({
      acceptedRecipients: ['ann@example.com'],
      possiblyTakenBefore: ['ann@example.com', 'bob@example.com'],
    });
    await delivery(transport).delivery.deliver(row, pace, notStopping);
    expect(messages.map(({ recipients, possiblyTakenBefore }) => ({ recipients, possiblyTakenBefore }))).toEqual([
      { recipients: ['bob@example.com'], possiblyTakenBefore: ['bob@example.com'] },
    ]);
  });

  it('an outcome that throws when it is read: settled at once as unknown for every recipient, logged, never a rejection', async () => {
    const { transport } = transportAnswering(async () => ({
      get kind(): never {
        throw new Error('the partner SDK broke');
      },
    }));
    const { delivery: deliveryOf, logged } = delivery(transport);
    const settlement = await deliveryOf.deliver(claimedRow(), pace, notStopping);
    expect(settlement).toMatchObject({ status: 'pending', outcome: 'unknown', refundAttempt: 0 });
    expect(settlement.attemptRecipients?.map(({ status }) => status)).toEqual(['unknown', 'unknown']);
    expect(logged).toContainEqual({
      level: 'error',
      entry: expect.objectContaining({ field: 'reading the outcome threw: Error: the partner SDK broke' }),
    });
  });

  it("keeps only the known fields of the transport's objects, and a wrong fact is left out with the verdict kept", async () => {
    const { transport } = transportAnswering(async (message) => {
      const outcome = (await acceptedBy(message)) as Record<string, unknown>;
      const recipients = (outcome.recipients as object[]).map((recipient) => ({ ...recipient, trace: 10n }));
      return { ...outcome, recipients, acceptedAt: new Date(Number.NaN), sdkResponse: { body: 10n } };
    });
    const { delivery: deliveryOf, logged } = delivery(transport);
    const settlement = await deliveryOf.deliver(claimedRow(), pace, notStopping);
    expect(settlement).toMatchObject({ status: 'sent', providerAcceptedAt: null });
    expect(() => JSON.stringify(settlement)).not.toThrow();
    expect(logged).toContainEqual({
      level: 'warn',
      entry: expect.objectContaining({
        fields: ['acceptedAt must be a valid Date within the years 1 to 9999, or null'],
      }),
    });
  });

  it('a transport that throws something that cannot be shown as text: every recipient deferred, never a rejection', async () => {
    const unshowable = {
      toString() {
        throw new Error('nor this');
      },
    };
    const { transport } = transportAnswering(async () => {
      // eslint-disable-next-line @typescript-eslint/only-throw-error -- what a careless SDK may throw
      throw unshowable;
    });
    const settlement = await delivery(transport).delivery.deliver(claimedRow(), pace, notStopping);
    expect(settlement).toMatchObject({
      status: 'pending',
      outcome: 'transient',
      lastError: 'the transport failed: a value that cannot be shown as text',
    });
  });

  describe('its log', () => {
    const everyRecipient = (status: string, replyCode: number, reply: string) => (message: OutboundMessage) =>
      Promise.resolve({
        kind: 'attempted',
        recipients: message.recipients.map((address) => ({
          address,
          status,
          replyCode,
          enhancedStatus: null,
          reply,
          perRecipient: true,
        })),
        reply: null,
        providerMessageId: null,
        slowDown: false,
      });
    const outage = () =>
      Promise.resolve({ kind: 'outage', replyCode: 421, enhancedStatus: null, reply: '421 4.3.2 shutting down' });

    it.each([
      { name: 'sent', answer: acceptedBy, attempts: 2, quiet: [], perMail: [['debug', 'settled']] },
      {
        name: 'deferred',
        answer: everyRecipient('deferred', 451, '451 4.7.1 greylisted'),
        attempts: 2,
        quiet: [],
        perMail: [['warn', 'settled']],
      },
      {
        name: 'refused',
        answer: everyRecipient('refused', 550, '550 5.1.1 no such user'),
        attempts: 2,
        quiet: [],
        perMail: [['warn', 'settled']],
      },
      {
        name: "the lane's server refusing the session (its loop says so, once)",
        answer: outage,
        attempts: 2,
        quiet: [],
        perMail: [['warn', 'the lane cannot send: its server refuses the session']],
      },
      {
        name: 'dead-lettered, out of attempts',
        answer: everyRecipient('deferred', 451, '451 4.7.1 greylisted'),
        attempts: 3,
        quiet: [['error', 'dead-lettered']],
        perMail: [['error', 'dead-lettered']],
      },
    ])('$name: no line but for a dead letter, unless perMail', async ({ answer, attempts, quiet, perMail }) => {
      const { transport } = transportAnswering(answer);
      for (const [asked, expected] of [
        [false, quiet],
        [true, perMail],
      ] as const) {
        const { delivery: deliveryOf, logged } = delivery(transport, [], asked);
        await deliveryOf.deliver(claimedRow({ attempts }), pace, notStopping);
        expect(logged.map(({ level, entry }) => [level, entry.msg])).toEqual(expected);
      }
    });

    it.each([
      { skipReason: 'dead', expected: [['error', 'dead-lettered', 'row-1']] },
      { skipReason: 'cancelled', expected: [] },
      { skipReason: 'expired', expected: [] },
      { skipReason: 'suppressed', expected: [] },
    ] as const)(
      'closed at its claim as $skipReason: a line only for a dead letter (a mail whose workers kept stopping)',
      async ({ skipReason, expected }) => {
        const { transport, messages } = transportAnswering(acceptedBy);
        const { delivery: deliveryOf, logged } = delivery(transport);
        await deliveryOf.deliver(claimedRow({ skipReason, attemptId: null }), pace, notStopping);
        expect(messages).toEqual([]);
        expect(logged.map(({ level, entry }) => [level, entry.msg, entry.id])).toEqual(expected);
      },
    );
  });
});
