import { Readable } from 'node:stream';
import { describe, expect, it } from '@jest/globals';
import type { Logger } from '@nestjs/common';
import type { AttachmentResolver } from '../options/reliable-mail-options.interface.js';
import type { LaneUnsubscribe } from '../options/resolve-unsubscribe.js';
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
import { readUnsubscribeToken } from '../unsubscribe/unsubscribe-token.js';
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
  {
    unsubscribe = null,
    attachmentResolver = null,
  }: { unsubscribe?: LaneUnsubscribe | null; attachmentResolver?: AttachmentResolver | null } = {},
) {
  const logged: Array<{ level: string; entry: Record<string, unknown> }> = [];
  const log = (level: string) => (entry: Record<string, unknown>) => logged.push({ level, entry });
  const logger = { debug: log('debug'), warn: log('warn'), error: log('error') } as unknown as Logger;
  const registry = new MailTemplateRegistry();
  for (const template of templates) registry.register(template);
  const renderer = new MailRenderer(registry, { attachmentResolver }, storedVersions);
  const made = new Delivery(renderer, transport, SEND_TIMEOUT_MS, STATEMENT_BOUND_MS, logger, null, unsubscribe);
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

  it('a transport that throws an error naming the recipients: every recipient deferred with it, the log line without the addresses', async () => {
    const { transport } = transportAnswering(async () => {
      throw new Error('550 5.1.1 <ann@example.com>: Recipient address rejected; bob@example.com also');
    });
    const { settled, logged } = delivery(transport);
    const { settlement } = await settled(claimedRow());
    expect(settlement).toMatchObject({ status: 'pending', outcome: 'transient' });
    expect(settlement.lastError).toContain('<ann@example.com>');
    expect(logged).toContainEqual({
      level: 'error',
      entry: expect.objectContaining({
        msg: 'the transport threw instead of reporting an outcome',
        error: 'Error: 550 5.1.1 <[address]>: Recipient address rejected; [address] also',
      }),
    });
  });

  describe('a lane that is not transactional: a copy for each recipient, with its own one-click unsubscribe link', () => {
    const unsubscribe: LaneUnsubscribe = {
      url: 'https://example.com/webhooks/mail/unsubscribe',
      secrets: ['s'.repeat(32)],
      category: 'newsletter',
    };
    const id = '0190f0a2-1111-7000-8000-00000000000a';
    /** Ann (To) and Bob (Cc), with a List-Unsubscribe of the mail's own. */
    const row = (overrides: Partial<ClaimedRow> = {}) =>
      claimedRow({
        id,
        idempotencyKey: 'order-7',
        payload: { ...claimedRow().payload, headers: { 'X-Campaign': 'spring', 'List-Unsubscribe': '<mailto:u@x>' } },
        ...overrides,
      });
    /** Answers each copy by its recipient: `accepted` unless `answers` says otherwise. */
    const answering = (answers: Record<string, () => Promise<unknown>> = {}) =>
      transportAnswering((message) => answers[message.recipients[0]]?.() ?? acceptedBy(message));
    const deferredBy = (message: OutboundMessage, reply = '451 4.7.1 greylisted') =>
      Promise.resolve({
        kind: 'attempted',
        recipients: message.recipients.map((address) => ({
          address,
          status: 'deferred',
          replyCode: 451,
          enhancedStatus: '4.7.1',
          reply,
          perRecipient: true,
        })),
        reply: null,
        providerMessageId: null,
        slowDown: false,
      });
    const tokenIn = (message: OutboundMessage) =>
      new URL(/^<([^>]+)>$/.exec(message.mail.headers['List-Unsubscribe'])![1]).searchParams.get('token');

    it('a transactional lane sends one message to every recipient, with the mail’s own headers and the row’s key', async () => {
      const { transport, messages } = transportAnswering(acceptedBy);
      await delivery(transport).delivery.attempt(row(), notStopping);
      expect(messages).toHaveLength(1);
      expect(messages[0]).toMatchObject({
        idempotencyKey: 'order-7',
        recipients: ['ann@example.com', 'bob@example.com'],
        mail: { headers: { 'X-Campaign': 'spring', 'List-Unsubscribe': '<mailto:u@x>' } },
      });
    });

    it('each recipient’s copy has the Message-ID, its own link signed for it, the one-click header and a key of its own', async () => {
      const { transport, messages } = answering();
      const { settlement } = await delivery(transport, [], null, { unsubscribe }).settled(row());
      expect(settlement).toMatchObject({ status: 'sent', acceptedRecipients: ['ann@example.com', 'bob@example.com'] });
      expect(
        messages.map((message) => ({
          messageId: message.messageId,
          recipients: message.recipients,
          idempotencyKey: message.idempotencyKey,
          headers: Object.keys(message.mail.headers),
          post: message.mail.headers['List-Unsubscribe-Post'],
          link: readUnsubscribeToken(unsubscribe.secrets, tokenIn(message)),
        })),
      ).toEqual(
        ['ann@example.com', 'bob@example.com'].map((address) => ({
          messageId: '<row-1@test.example.com>',
          recipients: [address],
          idempotencyKey: `order-7:${address}`,
          headers: ['X-Campaign', 'List-Unsubscribe', 'List-Unsubscribe-Post'],
          post: 'List-Unsubscribe=One-Click',
          link: { rowId: id, category: 'newsletter', address },
        })),
      );
    });

    it('a copy deferred: the rest are not tried in this attempt, and say why; the deferred one is retried', async () => {
      const { transport, messages } = answering({
        'ann@example.com': () => deferredBy({ recipients: ['ann@example.com'] } as OutboundMessage),
      });
      const { settlement } = await delivery(transport, [], null, { unsubscribe }).settled(row());
      expect(messages).toHaveLength(1);
      expect(settlement).toMatchObject({ status: 'pending', outcome: 'transient', refundAttempt: 0 });
      expect(settlement.attemptRecipients?.map(({ address, status, reply }) => ({ address, status, reply }))).toEqual([
        { address: 'ann@example.com', status: 'deferred', reply: '451 4.7.1 greylisted' },
        {
          address: 'bob@example.com',
          status: 'deferred',
          reply: 'not tried in this attempt: copy 1 of 2 was not taken (deferred: 451 4.7.1 greylisted)',
        },
      ]);
    });

    it('the first copy met an outage: the attempt is an outage, charged nothing, and the second copy is not tried', async () => {
      const outage = { kind: 'outage', replyCode: 421, enhancedStatus: '4.3.2', reply: '421 4.3.2 shutting down' };
      const { transport, messages } = answering({ 'ann@example.com': async () => outage });
      const { result, settlement } = await delivery(transport, [], null, { unsubscribe }).settled(row());
      expect(messages).toHaveLength(1);
      expect(result).toEqual(outage);
      expect(settlement).toMatchObject({ status: 'pending', outcome: 'outage', refundAttempt: 1 });
    });

    it('the second copy met an outage: the first stays taken, the second deferred with its reply', async () => {
      const outage = { kind: 'outage', replyCode: 421, enhancedStatus: '4.3.2', reply: '421 4.3.2 shutting down' };
      const { transport } = answering({ 'bob@example.com': async () => outage });
      const { settlement } = await delivery(transport, [], null, { unsubscribe }).settled(row());
      expect(settlement).toMatchObject({
        status: 'pending',
        outcome: 'partial',
        acceptedRecipients: ['ann@example.com'],
      });
      expect(settlement.attemptRecipients?.map(({ status, reply }) => [status, reply])).toEqual([
        ['accepted', '250 2.0.0 queued'],
        ['deferred', '421 4.3.2 shutting down'],
      ]);
    });

    it('the app began to shut down during the first copy: the second waits for the next claim, the attempt not charged', async () => {
      const stopping = new AbortController();
      const { transport, messages } = answering({
        'ann@example.com': () => {
          stopping.abort();
          return acceptedBy({ recipients: ['ann@example.com'] } as OutboundMessage);
        },
      });
      const made = delivery(transport, [], null, { unsubscribe }).delivery;
      const { result } = await made.attempt(row(), stopping.signal);
      expect(messages).toHaveLength(1);
      expect(result).toMatchObject({
        stoppedAtShutdown: true,
        recipients: [
          { address: 'ann@example.com', status: 'accepted' },
          {
            address: 'bob@example.com',
            status: 'deferred',
            reply: 'not tried in this attempt: the app shut down after copy 1 of 2',
          },
        ],
      });
      expect(settlementFor(row(), result, policy, new Date(), 0)).toMatchObject({
        status: 'pending',
        refundAttempt: 1,
      });
    });

    it('the send deadline passed during the first copy: the second is not tried', async () => {
      const { transport, messages } = answering({
        'ann@example.com': async () => {
          await new Promise((resolve) => setTimeout(resolve, 250));
          return acceptedBy({ recipients: ['ann@example.com'] } as OutboundMessage);
        },
      });
      const late = row({ leaseEndsAt: performance.now() + STATEMENT_BOUND_MS + SETTLE_MARGIN_MS + 100 });
      const { result } = await delivery(transport, [], null, { unsubscribe }).delivery.attempt(late, notStopping);
      expect(messages).toHaveLength(1);
      expect(result).toMatchObject({
        recipients: [
          { address: 'ann@example.com', status: 'accepted' },
          {
            address: 'bob@example.com',
            status: 'deferred',
            reply: 'not tried in this attempt: the send deadline passed after copy 1 of 2',
          },
        ],
      });
    });

    it('an attachment a resolver streams is read once, and every copy carries its bytes', async () => {
      let resolved = 0;
      const attachmentResolver: AttachmentResolver = () => {
        resolved++;
        return Readable.from([Buffer.from('%PDF-1.7 invoice')]);
      };
      const { transport, messages } = answering();
      const withFile = row({
        payload: {
          ...row().payload,
          attachments: [{ filename: 'invoice.pdf', contentType: 'application/pdf', ref: 'invoices/7' }],
        } as never,
      });
      const { settlement } = await delivery(transport, [], null, { unsubscribe, attachmentResolver }).settled(withFile);
      expect(settlement.status).toBe('sent');
      expect(resolved).toBe(1);
      expect(messages.map((message) => message.mail.attachments.map(({ content }) => content))).toEqual([
        [Buffer.from('%PDF-1.7 invoice')],
        [Buffer.from('%PDF-1.7 invoice')],
      ]);
    });

    it('a mail to one recipient is one copy: an attachment stream goes to the transport unread, as on any lane', async () => {
      const attachmentResolver: AttachmentResolver = () => Readable.from([Buffer.from('%PDF-1.7 invoice')]);
      const { transport, messages } = answering();
      const alone = row({
        payload: {
          ...row().payload,
          cc: [],
          attachments: [{ filename: 'invoice.pdf', contentType: 'application/pdf', ref: 'invoices/7' }],
        } as never,
      });
      await delivery(transport, [], null, { unsubscribe, attachmentResolver }).delivery.attempt(alone, notStopping);
      expect(messages.map((message) => message.recipients)).toEqual([['ann@example.com']]);
      expect(messages[0].mail.attachments[0].content).toBeInstanceOf(Readable);
    });
  });
});
