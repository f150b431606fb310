import { describe, expect, it } from '@jest/globals';
import type { Logger } from '@nestjs/common';
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
import { settlementFor } from './settlement.js';
import { claimedRow } from '../../../../test/support/settlements.js';

const policy: RetryPolicy = { maxAttempts: 3, baseDelayMs: 1_000, maxDelayMs: 60_000, maxAgeMs: 86_400_000 };
const SEND_TIMEOUT_MS = 3_000;
/** A statement's bound: 1 s of statement_timeout and the client's 5 s. */
const STATEMENT_BOUND_MS = 6_000;
const notStopping = new AbortController().signal;

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
  storedVersions: StoredTemplateVersions | null = null,
) {
  const logged: Array<{ level: string; entry: Record<string, unknown> }> = [];
  const log = (level: string) => (entry: Record<string, unknown>) => logged.push({ level, entry });
  const logger = { debug: log('debug'), warn: log('warn'), error: log('error') } as unknown as Logger;
  const registry = new MailTemplateRegistry();
  for (const template of templates) registry.register(template);
  const renderer = new MailRenderer(registry, { attachmentResolver: null }, storedVersions);
  const made = new Delivery(renderer, transport, SEND_TIMEOUT_MS, STATEMENT_BOUND_MS, logger, null);
  return {
    delivery: made,
    /** The attempt, and the settlement the lane loop decides on it. */
    settled: async (row: ClaimedRow) => {
      const { result, durationMs } = await made.attempt(row, notStopping);
      return { result, settlement: settlementFor(row, result, policy, new Date(), durationMs) };
    },
    logged,
  };
}

describe('Delivery', () => {
  it("cuts the send's deadline so that the settle keeps a statement's whole bound of the lease, and its margin", async () => {
    const hang: MailTemplate = { name: 'hang', version: 1, render: () => new Promise(() => undefined) };
    const { transport } = transportAnswering(acceptedBy);
    const row = claimedRow({
      payload: { ...claimedRow().payload, v: 2, template: { name: 'hang', version: 1, params: {} } } as never,
      leaseEndsAt: performance.now() + STATEMENT_BOUND_MS + SETTLE_MARGIN_MS + 300,
    });
    const { settlement } = await delivery(transport, [hang]).settled(row);
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
      const { result, settlement } = await delivery(transport, templates, stored).settled(claimedRow(row));
      // Three in a row would otherwise pause the lane as if its server had failed.
      expect(signalOf(result)).toBeNull();
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
    await delivery(transport).delivery.attempt(row, notStopping);
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
    const { settled, logged } = delivery(transport);
    const { settlement } = await settled(claimedRow());
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
    const { settled, logged } = delivery(transport);
    const { settlement } = await settled(claimedRow());
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
    const { settlement } = await delivery(transport).settled(claimedRow());
    expect(settlement).toMatchObject({
      status: 'pending',
      outcome: 'transient',
      lastError: 'the transport failed: a value that cannot be shown as text',
    });
  });
});
