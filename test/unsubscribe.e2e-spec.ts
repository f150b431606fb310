import { generateKeyPairSync } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from '@jest/globals';
import {
  MailOutboxService,
  MailUnsubscribeService,
  MailValidationError,
  type ReliableMailOptions,
  type SmtpTransportOptions,
} from '@reliable-mail/nestjs';
import { dkimVerify } from 'mailauth';
import { unsubscribeToken } from '../libs/reliable-mail/src/unsubscribe/unsubscribe-token.js';
import type { ReceivedMessage } from './support/smtp-test-server.js';
import { testMailOptions, waitFor } from './support/test-app.js';
import { useTestBed } from './support/test-bed.js';
import { startWebhookApp } from './support/webhook-app.js';

const secret = 'an-unsubscribe-secret-of-32-characters-at-least';
/** The links' URL as configured: the test sends each link's path and query to the port the app listens on. */
const UNSUBSCRIBE_URL = 'http://127.0.0.1/webhooks/mail/unsubscribe';
const ONE_CLICK = { 'Content-Type': 'application/x-www-form-urlencoded' };
const ann = 'ann@example.org';
const bob = 'bob@example.org';

const options: Partial<ReliableMailOptions> = {
  lanes: {
    default: {},
    news: { transactional: false, category: 'newsletter' },
    digest: { transactional: false },
  },
  unsubscribe: { url: UNSUBSCRIBE_URL, secret },
};

/** The message's header fields, unfolded, by lower-case name: each name's values in order. */
function headersOf(message: ReceivedMessage): Map<string, string[]> {
  const block = message.raw.slice(0, message.raw.indexOf('\r\n\r\n')).replace(/\r\n[ \t]+/g, ' ');
  const headers = new Map<string, string[]>();
  for (const line of block.split('\r\n')) {
    const colon = line.indexOf(':');
    const name = line.slice(0, colon).toLowerCase();
    headers.set(name, [...(headers.get(name) ?? []), line.slice(colon + 1).trim()]);
  }
  return headers;
}

/** The one link of a copy's List-Unsubscribe header. */
function linkOf(message: ReceivedMessage): URL {
  const [value] = headersOf(message).get('list-unsubscribe') ?? [];
  return new URL(/^<([^>]+)>$/.exec(value)![1]);
}

/** A token with the MAC of `of` over another category and address: what someone holding a link can make of it. */
function spliced(of: string, category: string, address: string): string {
  const header = Buffer.from(of, 'base64url').subarray(0, 32);
  return Buffer.concat([header, Buffer.from(`${category}\n${address}`)]).toString('base64url');
}

describe('one-click unsubscribe (RFC 8058) of the lanes marked transactional: false', () => {
  const bed = useTestBed();
  afterEach(() => bed.execute('truncate mail_unsubscribe'));

  async function start(overrides: Partial<ReliableMailOptions> = options, http: 'express' | 'fastify' = 'express') {
    const started = await startWebhookApp(bed, {}, { overrides, http });
    const { port } = started.app.getHttpServer().address() as AddressInfo;
    const { app, outbox } = started;
    /** The link as a mail carries it, to the port the app listens on. */
    const at = (link: URL | string) => {
      const url = new URL(link);
      url.port = String(port);
      return url;
    };
    const received = () => bed.smtp.received;
    return {
      ...started,
      at,
      post: (
        link: URL | string,
        body: string | FormData = 'List-Unsubscribe=One-Click',
        headers: Record<string, string> = ONE_CLICK,
      ) => fetch(at(link), { method: 'POST', headers, body }),
      /** Enqueues a mail in `lane` and waits until it is settled, sent or suppressed. */
      async send(to: string[], lane: string) {
        const settled = () => app.events.sent.length + app.events.failed.length;
        const before = settled();
        const mail = await outbox.enqueue({ to, subject: `Hello from ${lane}`, text: 'Hi' }, { lane });
        await waitFor(`the ${lane} mail settled`, () => settled() > before);
        return { mail, copies: received().filter((message) => message.messageId === mail.messageId) };
      },
      unsubscribes: () =>
        bed.execute('select address, category, outbox_id, created_at from mail_unsubscribe order by address, category'),
    };
  }

  it('a newsletter to 2 recipients goes as 2 copies with its Message-ID, each with its own link and one-click header; transactional mail as one, with neither', async () => {
    const { send } = await start();
    const newsletter = await send([ann, bob], 'news');
    const receipt = await send([ann, bob], 'default');

    expect(newsletter.copies.map((copy) => copy.recipients)).toEqual([[ann], [bob]]);
    const [annLink, bobLink] = newsletter.copies.map(linkOf);
    for (const [copy, link] of [
      [newsletter.copies[0], annLink],
      [newsletter.copies[1], bobLink],
    ] as const) {
      expect(copy.messageId).toBe(newsletter.mail.messageId);
      expect(`${link.origin}${link.pathname}`).toBe(UNSUBSCRIBE_URL);
      expect(headersOf(copy).get('list-unsubscribe')).toHaveLength(1);
      expect(headersOf(copy).get('list-unsubscribe-post')).toEqual(['List-Unsubscribe=One-Click']);
    }
    expect(annLink.searchParams.get('token')).not.toBe(bobLink.searchParams.get('token'));

    expect(receipt.copies.map((copy) => copy.recipients)).toEqual([[ann, bob]]);
    expect(headersOf(receipt.copies[0]).has('list-unsubscribe')).toBe(false);
    expect(headersOf(receipt.copies[0]).has('list-unsubscribe-post')).toBe(false);
  });

  it("a POST of one recipient's link unsubscribes that recipient from the lane's category only: its newsletters are suppressed, its digests and transactional mail still go", async () => {
    const { send, post, unsubscribes, admin, outbox } = await start();
    const first = await send([ann, bob], 'news');
    const answer = await post(linkOf(first.copies[0]));
    expect(answer.status).toBe(200);
    expect(await answer.text()).toBe('');
    expect(await unsubscribes()).toEqual([
      { address: ann, category: 'newsletter', outbox_id: first.mail.id, created_at: expect.any(Date) },
    ]);

    const alone = await send([ann], 'news');
    expect(alone.copies).toEqual([]);
    expect(await outbox.get(alone.mail.id)).toMatchObject({
      status: 'suppressed',
      rejectedRecipients: [{ address: ann, reply: 'suppressed: not sent' }],
    });
    const both = await send([ann, bob], 'news');
    expect(both.copies.map((copy) => copy.recipients)).toEqual([[bob]]);
    expect(await outbox.get(both.mail.id)).toMatchObject({
      status: 'sent',
      acceptedRecipients: [bob],
      rejectedRecipients: [{ address: ann, reply: 'suppressed: not sent' }],
    });

    expect((await send([ann], 'digest')).copies.map((copy) => copy.recipients)).toEqual([[ann]]);
    expect((await send([ann], 'default')).copies.map((copy) => copy.recipients)).toEqual([[ann]]);
    // The suppression list, which holds for every mail, is left alone.
    expect(await admin.listSuppressions()).toEqual([]);
  });

  it('signed with DKIM, each copy’s signature covers List-Unsubscribe and List-Unsubscribe-Post, as RFC 8058 requires, and verifies', async () => {
    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const record = `v=DKIM1; k=rsa; p=${publicKey.export({ type: 'spki', format: 'der' }).toString('base64')}`;
    await bed.startSmtp();
    const base = testMailOptions(bed.smtp.url, options);
    const dkim = {
      domainName: 'example.com',
      keySelector: 's1',
      privateKey: privateKey.export({ type: 'pkcs8', format: 'pem' }) as string,
    };
    const app = await bed.startApp({ ...base, transport: { ...(base.transport as SmtpTransportOptions), dkim } });
    const mail = await app
      .get(MailOutboxService)
      .enqueue({ to: [ann, bob], subject: 'News', text: 'Hi' }, { lane: 'news' });
    await waitFor('sent', () => app.events.sent.length === 1);

    const copies = bed.smtp.received.filter((message) => message.messageId === mail.messageId);
    expect(copies).toHaveLength(2);
    for (const copy of copies) {
      const [signature] = headersOf(copy).get('dkim-signature')!;
      const signed = /\bh=([^;]+)/.exec(signature)![1].replace(/\s/g, '').toLowerCase().split(':');
      expect(signed).toEqual(expect.arrayContaining(['list-unsubscribe', 'list-unsubscribe-post']));
      const { results } = await dkimVerify(Buffer.from(copy.raw), {
        resolver: async (name: string) => {
          if (name !== 's1._domainkey.example.com') throw Object.assign(new Error(name), { code: 'ENOTFOUND' });
          return [record.match(/.{1,255}/g)!];
        },
      });
      expect(results.map(({ status }) => status.result)).toEqual(['pass']);
    }
  });

  it('a multipart/form-data POST, as RFC 8058 recommends, unsubscribes the same way', async () => {
    const { send, post, unsubscribes } = await start();
    const { copies } = await send([bob], 'digest');
    const form = new FormData();
    form.set('List-Unsubscribe', 'One-Click');
    expect((await post(linkOf(copies[0]), form, {})).status).toBe(200);
    expect(await unsubscribes()).toMatchObject([{ address: bob, category: 'digest' }]);
  });

  it('a replayed POST, or the link of another newsletter to the same recipient: 200, and still one unsubscribe, as it was', async () => {
    const { send, post, unsubscribes } = await start();
    const first = await send([ann], 'news');
    const second = await send([ann], 'news');
    expect((await post(linkOf(first.copies[0]))).status).toBe(200);
    const [unsubscribed] = await unsubscribes();
    for (const link of [linkOf(first.copies[0]), linkOf(first.copies[0]), linkOf(second.copies[0])]) {
      expect((await post(link)).status).toBe(200);
    }
    expect(await unsubscribes()).toEqual([unsubscribed]);
  });

  it('operators list the unsubscribes a page at a time, by address and category, and bad pages are refused; a resubscribe takes one back, and refuses a category no lane could have', async () => {
    const { send, post, admin, app } = await start();
    const news = await send([ann, bob], 'news');
    const digest = await send([ann], 'digest');
    for (const link of [...news.copies.map(linkOf), linkOf(digest.copies[0])])
      expect((await post(link)).status).toBe(200);

    const entry = (address: string, category: string, outboxId: string) => ({
      address,
      category,
      outboxId,
      createdAt: expect.any(Date),
    });
    expect(await admin.listUnsubscribes()).toEqual([
      entry(ann, 'digest', digest.mail.id),
      entry(ann, 'newsletter', news.mail.id),
      entry(bob, 'newsletter', news.mail.id),
    ]);
    const [first, second] = await admin.listUnsubscribes({ limit: 2 });
    expect(await admin.listUnsubscribes({ limit: 2, after: second })).toEqual([entry(bob, 'newsletter', news.mail.id)]);
    expect(await admin.listUnsubscribes({ after: first })).toHaveLength(2);

    for (const after of [ann, { address: ann }, null]) {
      await expect(admin.listUnsubscribes({ after } as never)).rejects.toThrow(/page\.after/);
    }

    const unsubscribe = app.get(MailUnsubscribeService);
    for (const category of [' newsletter', 'Newsletter', 'x'.repeat(100_000), 42]) {
      expect(() => unsubscribe.resubscribe(ann, category as string)).toThrow(MailValidationError);
    }
    expect(await unsubscribe.resubscribe(ann.toUpperCase(), 'digest')).toBe(true);
    expect(await admin.listUnsubscribes()).toEqual([
      entry(ann, 'newsletter', news.mail.id),
      entry(bob, 'newsletter', news.mail.id),
    ]);
  });

  it.each<{ name: string; token: (annToken: string) => string | null; reason: RegExp }>([
    {
      name: "Ann's token altered for Bob",
      token: (token) => spliced(token, 'newsletter', bob),
      reason: /signature does not verify/,
    },
    {
      name: 'a token for another category',
      token: (token) => spliced(token, 'digest', ann),
      reason: /signature does not verify/,
    },
    {
      name: 'a token signed with another secret',
      token: () =>
        unsubscribeToken(['another-secret-of-at-least-32-characters'], {
          rowId: '0190f0a2-1111-7000-8000-00000000000a',
          category: 'newsletter',
          address: ann,
        }),
      reason: /signature does not verify/,
    },
    { name: 'a malformed token', token: () => 'not-a-token', reason: /the link is malformed/ },
    { name: 'no token', token: () => null, reason: /the link is malformed: the link has no token/ },
  ])('$name: 400 with the reason, for the POST and the page, and nothing written', async ({ token, reason }) => {
    const { send, post, at, unsubscribes } = await start();
    const { copies } = await send([ann], 'news');
    const link = new URL(UNSUBSCRIBE_URL);
    const given = token(linkOf(copies[0]).searchParams.get('token')!);
    if (given !== null) link.searchParams.set('token', given);
    for (const answer of [await post(link), await fetch(at(link))]) {
      expect(answer.status).toBe(400);
      expect(((await answer.json()) as { message: string }).message).toMatch(reason);
    }
    expect(await unsubscribes()).toEqual([]);
  });

  it('a POST of another body is refused with 400, and nothing written: a one-click POST says List-Unsubscribe=One-Click', async () => {
    const { send, post, unsubscribes } = await start();
    const link = linkOf((await send([ann], 'news')).copies[0]);
    for (const body of ['', 'List-Unsubscribe=Yes', '{"List-Unsubscribe":"One-Click"}']) {
      const answer = await post(link, body, body.startsWith('{') ? { 'Content-Type': 'application/json' } : ONE_CLICK);
      expect(answer.status).toBe(400);
      expect(((await answer.json()) as { message: string }).message).toMatch(/List-Unsubscribe=One-Click \(RFC 8058\)/);
    }
    expect(await unsubscribes()).toEqual([]);
  });

  it('a GET of a link (a link scanner, a person in a browser) unsubscribes nobody: it answers a page whose button does', async () => {
    const { send, at, unsubscribes } = await start();
    const link = at(linkOf((await send([ann], 'news')).copies[0]));
    const page = await fetch(link);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(page.headers.get('referrer-policy')).toBe('no-referrer');
    expect(page.headers.get('cache-control')).toBe('no-store');
    const html = await page.text();
    expect(html).toContain(`Stop sending <strong>newsletter</strong> mail to <strong>${ann}</strong>?`);
    expect((await fetch(link, { method: 'HEAD' })).status).toBe(200);
    expect(await unsubscribes()).toEqual([]);

    // The button, as a browser submits it: the form's fields, form-encoded, to its action.
    const action = new URL(/<form method="post" action="([^"]+)"/.exec(html)![1].replaceAll('&amp;', '&'), link);
    const fields = new URLSearchParams();
    for (const [, name, value] of html.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]+)"/g)) {
      fields.append(name, value);
    }
    const done = await fetch(action, {
      method: 'POST',
      headers: { ...ONE_CLICK, Accept: 'text/html' },
      body: fields.toString(),
    });
    expect(done.status).toBe(200);
    expect(await done.text()).toContain(`<strong>${ann}</strong> will get no more <strong>newsletter</strong> mail.`);
    expect(await unsubscribes()).toMatchObject([{ address: ann, category: 'newsletter' }]);
  });

  it('on the Fastify adapter too: the page, and the form-encoded POST that unsubscribes', async () => {
    const { send, post, at, unsubscribes } = await start(options, 'fastify');
    const link = linkOf((await send([ann], 'news')).copies[0]);
    const page = await fetch(at(link));
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('<input type="hidden" name="List-Unsubscribe" value="One-Click" />');
    expect(await unsubscribes()).toEqual([]);
    expect((await post(link)).status).toBe(200);
    expect(await unsubscribes()).toMatchObject([{ address: ann, category: 'newsletter' }]);
  });

  it('where ReliableMailModule has no unsubscribe option, the route answers 404', async () => {
    const { app } = await startWebhookApp(bed, { resend: { secret: 'whsec_c2VjcmV0' } });
    const { port } = app.getHttpServer().address() as AddressInfo;
    const link = `http://127.0.0.1:${port}/webhooks/mail/unsubscribe?token=x`;
    expect((await fetch(link, { method: 'POST', headers: ONE_CLICK, body: 'List-Unsubscribe=One-Click' })).status).toBe(
      404,
    );
    expect((await fetch(link)).status).toBe(404);
  });

  it('a webhooks module with no source, beside a ReliableMailModule without unsubscribe, stops the start: it would serve nothing', async () => {
    await expect(startWebhookApp(bed, {})).rejects.toThrow(/ReliableMailWebhooksModule serves nothing/);
  });
});
