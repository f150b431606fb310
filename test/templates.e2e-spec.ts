import { randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import { describe, expect, it } from '@jest/globals';
import { EntityManager } from '@mikro-orm/postgresql';
import { Injectable, type OnModuleInit } from '@nestjs/common';
import {
  handlebarsTemplate,
  MailOutboxService,
  MailTemplateRegistry,
  MailValidationError,
  type MailTemplate,
  type OutgoingMail,
  type ReliableMailOptions,
} from '@reliable-mail/nestjs';
import { insertRows } from '../libs/reliable-mail/src/outbox/sql/insert.js';
import { OutboxDatabase } from '../libs/reliable-mail/src/database/outbox-database.js';
import { testMailOptions, waitFor } from './support/test-app.js';
import { type TestApp, type TestBed, useTestBed } from './support/test-bed.js';

interface MimePart {
  headers: string;
  /** The body with its transfer encoding undone. */
  body: string;
}

/** The leaf parts of a received message (one level of multipart is enough here), decoded. */
function partsOf(raw: string): MimePart[] {
  const boundary = /boundary="?([^";\r\n]+)"?/i.exec(raw)?.[1];
  const sections = boundary ? raw.split(`--${boundary}`).slice(1, -1) : [raw];
  return sections.map((section) => {
    const split = section.replace(/^\r?\n/, '').search(/\r?\n\r?\n/);
    const trimmed = section.replace(/^\r?\n/, '');
    const headers = trimmed.slice(0, split);
    const encoded = trimmed
      .slice(split)
      .replace(/^\r?\n\r?\n/, '')
      .replace(/\r?\n$/, '');
    const encoding = /Content-Transfer-Encoding:\s*([\w-]+)/i.exec(headers)?.[1]?.toLowerCase();
    const body =
      encoding === 'base64'
        ? Buffer.from(encoded, 'base64').toString('utf8')
        : encoding === 'quoted-printable'
          ? Buffer.from(
              encoded
                .replace(/=\r?\n/g, '')
                .replace(/=([0-9A-F]{2})/g, (_match, hex: string) => String.fromCharCode(Number.parseInt(hex, 16))),
              'latin1',
            ).toString('utf8')
          : encoded;
    return { headers, body };
  });
}

/** The decoded body of the part whose headers match. */
function partBody(raw: string, headers: RegExp): string {
  const part = partsOf(raw).find((candidate) => headers.test(candidate.headers));
  if (!part) throw new Error(`no part with headers matching ${headers} in:\n${raw}`);
  return part.body;
}

/** A renderer of the app's own, not Handlebars: what a React Email or MJML adapter would look like. */
const orderConfirmation: MailTemplate<{ orderId: string; items: { sku: string; qty: number }[]; total: string }> = {
  name: 'order-confirmation',
  version: 1,
  async render({ orderId, items, total }, { locale }) {
    const greeting = locale?.startsWith('de') ? 'Danke' : 'Thanks';
    return {
      subject: `Order ${orderId} confirmed`,
      html: `<h1>${greeting} for order ${orderId}</h1><ul>${items.map((item) => `<li>${item.qty} x ${item.sku}</li>`).join('')}</ul><p>Total ${total}</p>`,
    };
  },
  validate(params) {
    if (typeof params?.orderId !== 'string') throw new MailValidationError('orderId', 'must be a string');
    if (!Array.isArray(params.items)) throw new MailValidationError('items', 'must be an array');
  },
};

const welcomeV1 = handlebarsTemplate({
  name: 'welcome',
  version: 1,
  subject: 'Welcome v1, {{name}}',
  html: '<p>Hello {{name}} from v1</p>',
});
const welcomeV2 = handlebarsTemplate({
  name: 'welcome',
  version: 2,
  subject: 'Welcome v2, {{name}}',
  html: '<p>Hello {{name}} from v2</p>',
});

const exploding: MailTemplate = {
  name: 'exploding',
  version: 4,
  render: () => {
    throw new Error('Cannot read properties of undefined (reading "total")');
  },
};

/** Registers `welcome` v2 from a provider, as an app does for templates it builds itself. */
@Injectable()
class WelcomeV2Registration implements OnModuleInit {
  constructor(private readonly templates: MailTemplateRegistry) {}

  onModuleInit(): void {
    this.templates.register(welcomeV2);
  }
}

describe('templates and attachments', () => {
  const bed = useTestBed();
  const startSmtp = () => bed.startSmtp();

  async function start(
    options: Partial<ReliableMailOptions>,
    providers: Parameters<TestBed['startApp']>[1] = [],
  ): Promise<{ app: TestApp; outbox: MailOutboxService }> {
    const app = await bed.startApp(testMailOptions(bed.smtpUrl, options), providers);
    return { app, outbox: app.get(MailOutboxService) };
  }

  const rowCount = async (app: TestApp) =>
    (await app.get(EntityManager).execute<{ count: number }[]>('select count(*)::int as count from mail_outbox'))[0]
      .count;

  it('a custom renderer renders at send time: the row holds the name, version and params; the message the rendered content', async () => {
    const server = await startSmtp();
    const { app, outbox } = await start({ templates: [orderConfirmation] });
    const params = { orderId: 'A-1001', items: [{ sku: 'MUG', qty: 2 }], total: '24.00 EUR' };
    const mail = await outbox.enqueue({
      to: 'ann@example.com',
      template: 'order-confirmation',
      params,
      locale: 'de-de',
    });

    const row = await outbox.get(mail.id);
    expect(row.payload).toMatchObject({
      v: 2,
      template: { name: 'order-confirmation', version: 1, params, locale: 'de-DE' },
    });
    expect(row.payload).not.toHaveProperty('html');
    expect(row.payload).not.toHaveProperty('subject');

    await waitFor('EmailSentEvent', () => app.events.sent.length === 1);
    const [received] = server.received;
    expect(received.messageId).toBe(mail.messageId);
    expect(received.raw).toMatch(/^Subject: Order A-1001 confirmed\r?$/m);
    expect(partBody(received.raw, /Content-Type: text\/html/)).toBe(
      '<h1>Danke for order A-1001</h1><ul><li>2 x MUG</li></ul><p>Total 24.00 EUR</p>',
    );
    expect((await outbox.get(mail.id)).status).toBe('sent');
  });

  it('a subject on the mail overrides the template subject; Handlebars escapes parameters in the html part', async () => {
    const server = await startSmtp();
    const { app, outbox } = await start({ templates: [welcomeV1] });
    await outbox.enqueue({
      to: 'ann@example.com',
      template: 'welcome',
      subject: 'A special welcome',
      params: { name: '<script>alert(1)</script>' },
    });
    await waitFor('EmailSentEvent', () => app.events.sent.length === 1);

    const raw = server.received[0].raw;
    expect(raw).toMatch(/^Subject: A special welcome\r?$/m);
    const html = partBody(raw, /Content-Type: text\/html/);
    expect(html).toBe('<p>Hello &lt;script&gt;alert(1)&lt;/script&gt; from v1</p>');
    expect(html).not.toContain('<script>');
    // The text part Handlebars derived from the html carries the parameter as text, which is no markup there.
    expect(partBody(raw, /Content-Type: text\/plain/)).toBe('Hello <script>alert(1)</script> from v1');
  });

  it('version pinning: a row enqueued with v1 renders with v1 in an instance that also has v2; new mails use v2', async () => {
    const server = await startSmtp();
    // An instance that only enqueues, and knows v1 only.
    const { outbox: producer } = await start({ templates: [welcomeV1], dispatcher: { enabled: false } });
    const pinned = await producer.enqueue(
      { to: 'ann@example.com', template: 'welcome', params: { name: 'Ann' } },
      { idempotencyKey: 'welcome:ann' },
    );
    expect((await producer.get(pinned.id)).payload).toMatchObject({ template: { name: 'welcome', version: 1 } });

    // A new instance: v1 from the options, v2 registered by a provider.
    const { app, outbox } = await start({ templates: [welcomeV1] }, [WelcomeV2Registration]);
    expect(app.get(MailTemplateRegistry).versions('welcome')).toEqual([1, 2]);
    await waitFor('the pinned row sent', () => app.events.sent.some((event) => event.id === pinned.id));
    const fresh = await outbox.enqueue({ to: 'bob@example.com', template: 'welcome', params: { name: 'Bob' } });
    expect((await outbox.get(fresh.id)).payload).toMatchObject({ template: { name: 'welcome', version: 2 } });
    await waitFor('the fresh row sent', () => app.events.sent.some((event) => event.id === fresh.id));

    const subjects = new Map(
      server.received.map((message) => [message.messageId, /^Subject: (.*?)\r?$/m.exec(message.raw)?.[1]]),
    );
    expect(subjects.get(pinned.messageId)).toBe('Welcome v1, Ann');
    expect(subjects.get(fresh.messageId)).toBe('Welcome v2, Bob');
    expect(partBody(server.received.find((message) => message.messageId === pinned.messageId)!.raw, /text\/html/)).toBe(
      '<p>Hello Ann from v1</p>',
    );

    // The same enqueue again, now that v2 is the newest: the same mail, not an idempotency conflict.
    const again = await outbox.enqueue(
      { to: 'ann@example.com', template: 'welcome', params: { name: 'Ann' } },
      { idempotencyKey: 'welcome:ann' },
    );
    expect(again).toMatchObject({ id: pinned.id, created: false });
  });

  it('a row whose template version is no longer registered fails permanently with the reason', async () => {
    await startSmtp();
    const { outbox: producer } = await start({ templates: [welcomeV1], dispatcher: { enabled: false } });
    const mail = await producer.enqueue({ to: 'ann@example.com', template: 'welcome', params: { name: 'Ann' } });

    const { app, outbox } = await start({ templates: [welcomeV2] });
    await waitFor('EmailFailedEvent', () => app.events.failed.length === 1);
    const reason =
      'template "welcome"@1 is not registered (registered versions: 2); a row renders only with the version it was enqueued with';
    expect(app.events.failed[0]).toMatchObject({
      id: mail.id,
      status: 'failed',
      permanent: false,
      cause: 'render',
      replyCode: null,
      reason,
    });
    expect(await outbox.get(mail.id)).toMatchObject({ status: 'failed', attempts: 1, lastError: reason });
    expect(bed.smtp.received).toHaveLength(0);
  });

  it('a template that throws at send time fails the row once, permanently, with the reason and one EmailFailedEvent', async () => {
    const server = await startSmtp();
    const { app, outbox } = await start({ templates: [exploding] });
    const mail = await outbox.enqueue({ to: 'ann@example.com', template: 'exploding', params: {} });
    await waitFor('EmailFailedEvent', () => app.events.failed.length === 1);
    await new Promise((resolve) => setTimeout(resolve, 300));

    const reason = 'template "exploding"@4 failed to render: Cannot read properties of undefined (reading "total")';
    expect(app.events.failed).toHaveLength(1);
    expect(app.events.repeated).toBe(0);
    expect(app.events.failed[0]).toMatchObject({
      id: mail.id,
      status: 'failed',
      permanent: false,
      cause: 'render',
      replyCode: null,
      enhancedStatus: null,
      deadLettered: false,
      nextAttemptAt: null,
      reason,
    });
    const row = await outbox.get(mail.id);
    expect(row).toMatchObject({ status: 'failed', attempts: 1, lastError: reason, lastReplyCode: null });
    expect(row.attemptLog.map((attempt) => [attempt.outcome, attempt.reply])).toEqual([['permanent', reason]]);
    expect(server.received).toHaveLength(0);
    expect(app.events.sent).toHaveLength(0);
  });

  it.each<{ name: string; mail: Record<string, unknown>; field: string; reason: RegExp }>([
    {
      name: 'an unknown template',
      mail: { template: 'no-such-template', params: {} },
      field: 'template',
      reason: /names no registered template: "no-such-template"/,
    },
    {
      name: 'params that fail the template validation',
      mail: { template: 'order-confirmation', params: { orderId: 1001, items: [] } },
      field: 'params.orderId',
      reason: /must be a string/,
    },
    {
      name: 'params that are not plain JSON',
      mail: { template: 'order-confirmation', params: { orderId: 'A', items: [], at: new Map() } },
      field: 'params.at',
      reason: /plain JSON/,
    },
    {
      name: 'html together with a template',
      mail: { template: 'order-confirmation', params: { orderId: 'A', items: [] }, html: '<p>x</p>' },
      field: 'html',
      reason: /together with template/,
    },
    {
      name: 'an oversized message',
      mail: {
        subject: 'Big',
        text: 'x',
        attachments: [{ filename: 'big.bin', contentType: 'application/octet-stream', content: Buffer.alloc(2_048) }],
      },
      field: 'size',
      reason: /over maxMessageBytes \(2000\)/,
    },
    {
      name: 'a header with CRLF',
      mail: { subject: 'Hi', text: 'x', headers: { 'X-Campaign': 'spring\r\nBcc: evil@example.com' } },
      field: 'headers.X-Campaign',
      reason: /CR, LF, NUL/,
    },
    {
      name: 'a Message-ID header',
      mail: { subject: 'Hi', text: 'x', headers: { 'Message-Id': '<forged@example.com>' } },
      field: 'headers.Message-Id',
      reason: /set by reliable-mail/,
    },
    {
      name: 'a Bcc header',
      mail: { subject: 'Hi', text: 'x', headers: { BCC: 'evil@example.com' } },
      field: 'headers.BCC',
      reason: /set by reliable-mail/,
    },
    {
      name: 'an attachment filename with CRLF',
      mail: {
        subject: 'Hi',
        text: 'x',
        attachments: [{ filename: 'a.txt\r\nX: y', contentType: 'text/plain', content: 'x' }],
      },
      field: 'attachments[0].filename',
      reason: /control characters/,
    },
    {
      name: 'a referenced attachment without a resolver',
      mail: {
        subject: 'Hi',
        text: 'x',
        attachments: [{ filename: 'a.pdf', contentType: 'application/pdf', ref: 's3://b/a.pdf' }],
      },
      field: 'attachments[0].ref',
      reason: /needs an attachmentResolver/,
    },
  ])('rejects $name at enqueue with MailValidationError and writes nothing', async ({ mail, field, reason }) => {
    const { app, outbox } = await start({
      templates: [orderConfirmation],
      maxMessageBytes: 2_000,
      dispatcher: { enabled: false },
    });
    const attempt = outbox.enqueue({ to: 'ann@example.com', ...mail } as unknown as OutgoingMail);
    await expect(attempt).rejects.toBeInstanceOf(MailValidationError);
    await expect(attempt).rejects.toMatchObject({ field, reason: expect.stringMatching(reason) });
    // In a batch, the one bad mail keeps the good one out as well.
    const batch = outbox.enqueueMany([
      { mail: { to: 'bob@example.com', subject: 'Fine', text: 'x' } },
      { mail: { to: 'ann@example.com', ...mail } as unknown as OutgoingMail },
    ]);
    await expect(batch).rejects.toMatchObject({ name: 'MailValidationError', field: `mails[1].${field}` });
    expect(await rowCount(app)).toBe(0);
  });

  it('an inline attachment is stored base64 in the row and arrives in the message', async () => {
    const server = await startSmtp();
    const { app, outbox } = await start({});
    const invoice = Buffer.from('INVOICE 1001\nTotal: 24.00 EUR\n');
    const mail = await outbox.enqueue({
      to: 'ann@example.com',
      subject: 'Your invoice',
      text: 'Attached.',
      attachments: [
        { filename: 'invoice-1001.txt', contentType: 'text/plain', content: invoice },
        { filename: 'notes.csv', contentType: 'text/csv', content: 'sku,qty\nMUG,2\n' },
      ],
    });
    expect((await outbox.get(mail.id)).payload).toMatchObject({
      attachments: [
        { filename: 'invoice-1001.txt', contentType: 'text/plain', content: invoice.toString('base64') },
        { filename: 'notes.csv', contentType: 'text/csv', content: Buffer.from('sku,qty\nMUG,2\n').toString('base64') },
      ],
    });
    await waitFor('EmailSentEvent', () => app.events.sent.length === 1);

    const raw = server.received[0].raw;
    expect(raw).toMatch(/Content-Type: multipart\/mixed/);
    expect(raw).toMatch(/Content-Disposition: attachment; filename=invoice-1001\.txt/);
    expect(raw).toMatch(/Content-Disposition: attachment; filename=notes\.csv/);
    // nodemailer picks the transfer encoding; either way the content is what was given.
    expect(partBody(raw, /filename=invoice-1001\.txt/).replace(/\r\n/g, '\n')).toBe(invoice.toString());
    expect(partBody(raw, /filename=notes\.csv/).replace(/\r\n/g, '\n')).toBe('sku,qty\nMUG,2\n');
  });

  it('a referenced attachment is resolved at send time, with a template, and arrives in the message', async () => {
    const server = await startSmtp();
    const resolved: string[] = [];
    const files: Record<string, () => Buffer | Readable> = {
      'reports/2026-11.pdf': () => Buffer.from('%PDF-1.7 the monthly report'),
      'exports/orders.csv': () => Readable.from(['id,total\n', '1001,24.00\n']),
    };
    const attachmentResolver = async (ref: string) => {
      resolved.push(ref);
      const file = files[ref];
      if (!file) throw new Error(`no such file: ${ref}`);
      return file();
    };
    // An instance that only enqueues: it needs a resolver to accept references, but never calls it.
    const { outbox } = await start({
      templates: [orderConfirmation],
      attachmentResolver,
      dispatcher: { enabled: false },
    });
    const mail = await outbox.enqueue({
      to: 'ann@example.com',
      template: 'order-confirmation',
      params: { orderId: 'A-7', items: [], total: '0' },
      attachments: [
        { filename: 'report.pdf', contentType: 'application/pdf', ref: 'reports/2026-11.pdf' },
        { filename: 'orders.csv', contentType: 'text/csv', ref: 'exports/orders.csv' },
      ],
    });
    expect((await outbox.get(mail.id)).payload).toMatchObject({
      attachments: [{ ref: 'reports/2026-11.pdf' }, { ref: 'exports/orders.csv' }],
    });
    expect(resolved).toEqual([]);

    const { app: dispatcher } = await start({ templates: [orderConfirmation], attachmentResolver });
    await waitFor('EmailSentEvent', () => dispatcher.events.sent.length === 1);
    expect(resolved).toEqual(['reports/2026-11.pdf', 'exports/orders.csv']);
    const raw = server.received[0].raw;
    expect(raw).toMatch(/^Subject: Order A-7 confirmed\r?$/m);
    expect(partBody(raw, /Content-Type: application\/pdf; name=report\.pdf/)).toBe('%PDF-1.7 the monthly report');
    expect(partBody(raw, /filename=orders\.csv/)).toBe('id,total\n1001,24.00\n');
  });

  it('an unresolvable reference fails the row permanently with the reason', async () => {
    const server = await startSmtp();
    const { app, outbox } = await start({
      attachmentResolver: async (ref) => {
        throw new Error(`NoSuchKey: ${ref}`);
      },
    });
    const mail = await outbox.enqueue({
      to: 'ann@example.com',
      subject: 'Report',
      text: 'Attached.',
      attachments: [{ filename: 'r.pdf', contentType: 'application/pdf', ref: 'gone.pdf' }],
    });
    await waitFor('EmailFailedEvent', () => app.events.failed.length === 1);
    const reason = 'attachment "r.pdf" (ref "gone.pdf") could not be resolved: NoSuchKey: gone.pdf';
    expect(app.events.failed[0]).toMatchObject({
      id: mail.id,
      status: 'failed',
      permanent: false,
      cause: 'render',
      replyCode: null,
      reason,
    });
    expect(await outbox.get(mail.id)).toMatchObject({ status: 'failed', attempts: 1, lastError: reason });
    expect(server.received).toHaveLength(0);
  });

  it('a v1 row written before the upgrade is still sent as it was stored', async () => {
    const server = await startSmtp();
    const { app } = await start({});
    const id = randomUUID();
    const messageId = `<${id}@test.example.com>`;
    await insertRows(
      app.get(OutboxDatabase),
      [
        {
          id,
          idempotencyKey: null,
          contentHash: 'v1',
          messageId,
          payload: {
            v: 1,
            from: { address: 'shop@example.com' },
            to: [{ address: 'ann@example.com' }],
            cc: [],
            bcc: [],
            replyTo: [],
            subject: 'Stored in v1',
            text: 'Old body',
            headers: {},
          },
          metadata: null,
          maxAttempts: 3,
          lane: 'default',
          notBefore: null,
          expiresAt: null,
        },
      ],
      true,
    );
    await waitFor('EmailSentEvent', () => app.events.sent.length === 1);
    expect(server.received[0].messageId).toBe(messageId);
    expect(server.received[0].raw).toMatch(/^Subject: Stored in v1\r?$/m);
    expect(server.received[0].raw).toContain('Old body');
  });
});
