import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { INestApplication } from '@nestjs/common';
import {
  type ConsoleAccess,
  type ConsolePermission,
  MailOutboxAdmin,
  MailOutboxService,
  type ReliableMailOptions,
} from '@reliable-mail/nestjs';
import type { createDemoApp } from '../apps/demo/src/app.module.js';
import { listeningDemo, serving } from './support/console-demo.js';
import { SmtpTestServer } from './support/smtp-test-server.js';
import { testMailOptions, waitFor } from './support/test-app.js';
import { createTestDatabase, type TestDatabase, withClient } from './support/test-database.js';

// The mail console over plain HTTP (fetch and node:http, no browser), on Express and on Fastify, against the demo
// shop on a real PostgreSQL and a scripted SMTP server: what a requester without the content permission sees, bulk
// actions on a filter, the suppression list, the unsubscribes, input refused with 400, the loopback-only console
// without authorize, cross-site reads, a global prefix, and authorize's denial on every route.

const CSRF_COOKIE = 'reliable_mail_console_csrf';

/** Who a request is: the app's `authorize` reads these two headers, and denies a request without them. */
type Who = Record<string, string>;
const as = (actor: string, permissions: ConsolePermission[]): Who => ({
  'x-test-user': actor,
  'x-test-permissions': permissions.join(','),
});
const VIEWER = as('viewer', ['view']);
const READER = as('reader', ['view', 'content']);
const OPERATOR = as('ops@example.com', ['view', 'act', 'content']);
const ACTOR_WITHOUT_CONTENT = as('blind-ops', ['view', 'act']);

function authorize(request: unknown): ConsoleAccess | null {
  const headers = (request as { headers: Record<string, string | string[] | undefined> }).headers;
  const actor = headers['x-test-user'];
  const permissions = headers['x-test-permissions'];
  if (typeof actor !== 'string' || actor === '' || typeof permissions !== 'string') return null;
  return { actor, permissions: permissions.split(',') as ConsolePermission[] };
}

/** A 550 at RCPT that names the address, as Postfix gives it. */
const refusal = (address: string) => ({ code: 550, text: `5.1.1 <${address}>: Recipient address rejected` });

interface Answer {
  status: number;
  headers: Headers;
  body: string;
}

/** Markup as the text it shows: tags stripped and spaces collapsed. */
function textOf(markup: string): string {
  return markup
    .replace(/<[^>]*>/g, ' ')
    .replace(/\s+/g, ' ')
    .trim();
}

/** The text of a page from the element with `data-testid="<id>"` on. */
function textFrom(body: string, testId: string, length = 2_000): string {
  const at = body.indexOf(`data-testid="${testId}"`);
  if (at < 0) return '';
  return textOf(body.slice(at, at + length).replace(/^[^>]*>/, ''));
}

/** The text of each cell of each row of the body of the table with `data-testid="<id>"`. */
function tableRows(body: string, testId: string): string[][] {
  const at = body.indexOf(`data-testid="${testId}"`);
  if (at < 0) return [];
  const rows = body.slice(body.indexOf('<tbody>', at), body.indexOf('</tbody>', at));
  return [...rows.matchAll(/<tr>([\s\S]*?)<\/tr>/g)].map(([, row]) =>
    [...row.matchAll(/<td[^>]*>([\s\S]*?)<\/td>/g)].map(([, cell]) => textOf(cell)),
  );
}

/** Where a page's "next" link goes, as a path; undefined on a last page. */
function nextOf(body: string): string | undefined {
  return /<a rel="next" href="([^"]+)"/.exec(body)?.[1].replaceAll('&amp;', '&');
}

/** The CSRF cookie a response sets, as `name=value`, with its attributes; undefined when it sets none. */
function csrfCookieOf(headers: Headers): { pair: string; token: string; attributes: string } | undefined {
  const line = headers.getSetCookie().find((value) => value.startsWith(`${CSRF_COOKIE}=`));
  if (!line) return undefined;
  const [pair, ...attributes] = line.split(';');
  return { pair: pair.trim(), token: pair.slice(CSRF_COOKIE.length + 1).trim(), attributes: attributes.join(';') };
}

/** Where `needle` occurs in `body`, with some text around it, for a failure that shows what leaked. */
function leaks(body: string, needles: string[]): string[] {
  return needles
    .filter((needle) => body.includes(needle))
    .map((needle) => {
      const at = body.indexOf(needle);
      return `${needle}: …${body.slice(Math.max(0, at - 80), at + needle.length + 80).replace(/\s+/g, ' ')}…`;
    });
}

/** A request with whatever Host header the test gives, which fetch does not let one set. */
function rawRequest(
  port: number,
  options: { method?: string; path: string; host: string; headers?: Record<string, string>; body?: string },
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }> {
  return new Promise((resolve, reject) => {
    const request = httpRequest(
      {
        host: '127.0.0.1',
        port,
        method: options.method ?? 'GET',
        path: options.path,
        headers: {
          host: options.host,
          ...options.headers,
          ...(options.body === undefined ? {} : { 'content-length': String(Buffer.byteLength(options.body)) }),
        },
      },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () =>
          resolve({
            status: response.statusCode ?? 0,
            headers: response.headers,
            body: Buffer.concat(chunks).toString('utf8'),
          }),
        );
        response.on('error', reject);
      },
    );
    request.on('error', reject);
    request.end(options.body);
  });
}

describe.each(['express', 'fastify'] as const)('the mail console over HTTP, on %s', (platform) => {
  let database: TestDatabase;
  let smtp: SmtpTestServer;
  let app: INestApplication;
  let baseUrl: string;
  let mail: ReliableMailOptions;
  /** Apps besides the main one, closed after the tests. */
  const others: INestApplication[] = [];
  const refused = new Set(['bob.private@example.org', 'eve@example.com', 'again@example.org']);

  /** The mails of the privacy test, by the part they play. */
  const privateMails = {} as Record<'ann' | 'bob' | 'carol' | 'invoice' | 'keyed', string>;

  const sql = <T = Record<string, any>>(text: string, values: unknown[] = []) =>
    withClient(database.url, async (client) => (await client.query(text, values)).rows as T[]);
  const rowOf = async (id: string) => (await sql(`select * from reliable_mail.mail_outbox where id = $1`, [id]))[0];
  const auditCount = async () => Number((await sql(`select count(*) from reliable_mail.mail_console_audit`))[0].count);
  const statusOf = async (id: string) => (await rowOf(id)).status as string;
  /** One-click unsubscribes as the webhooks module records them: the demo shop's mails carry no link to follow. */
  const unsubscribe = (rows: { address: string; category: string; outboxId?: string }[]) =>
    sql(
      `insert into reliable_mail.mail_unsubscribe (address, category, outbox_id)
       select * from unnest($1::text[], $2::text[], $3::uuid[])`,
      [rows.map((row) => row.address), rows.map((row) => row.category), rows.map((row) => row.outboxId ?? null)],
    );
  const unsubscribes = async () =>
    (
      await sql<{ address: string; category: string }>(
        `select address, category from reliable_mail.mail_unsubscribe order by address, category`,
      )
    ).map((row) => `${row.address} ${row.category}`);

  async function get(path: string, who: Who, headers: Record<string, string> = {}, base = baseUrl): Promise<Answer> {
    const response = await fetch(`${base}${path}`, { headers: { ...who, ...headers }, redirect: 'manual' });
    return { status: response.status, headers: response.headers, body: await response.text() };
  }

  /** A page, answered 200, with the CSRF token its response sets (fetch keeps no cookie, so every page sets one). */
  async function pageWithToken(path: string, who: Who, base = baseUrl) {
    const page = await get(path, who, {}, base);
    expect([path, page.status]).toEqual([path, 200]);
    const cookie = csrfCookieOf(page.headers);
    expect(cookie?.token).toMatch(/^[A-Za-z0-9_-]{20,}$/);
    return { ...page, cookie: cookie! };
  }

  /**
   * An action posted as its form posts it: the cookie, the token, the confirmation and the reason. A field given a
   * list is posted once per value, as a form with that name repeated posts it.
   */
  async function post(
    path: string,
    who: Who,
    fields: Record<string, string | string[]>,
    cookie: { pair: string; token: string } | undefined,
    base = baseUrl,
  ): Promise<Answer> {
    const posted = { ...(cookie ? { _csrf: cookie.token } : {}), confirmed: 'yes', ...fields };
    const body = new URLSearchParams(
      Object.entries(posted).flatMap(([name, value]) => [value].flat().map((one): [string, string] => [name, one])),
    );
    const response = await fetch(`${base}${path}`, {
      method: 'POST',
      headers: {
        ...who,
        'content-type': 'application/x-www-form-urlencoded',
        ...(cookie ? { cookie: cookie.pair } : {}),
      },
      body: body.toString(),
      redirect: 'manual',
    });
    return { status: response.status, headers: response.headers, body: await response.text() };
  }

  async function enqueueAndSettle(
    mails: {
      mail: Parameters<MailOutboxService['enqueue']>[0];
      options?: Parameters<MailOutboxService['enqueue']>[1];
    }[],
  ): Promise<string[]> {
    const outbox = app.get(MailOutboxService);
    const ids: string[] = [];
    for (const { mail: outgoing, options } of mails) ids.push((await outbox.enqueue(outgoing, options)).id);
    await waitFor('the mails to be sent or refused', async () => {
      const rows = await sql<{ status: string }>(`select status from reliable_mail.mail_outbox where id = any($1)`, [
        ids,
      ]);
      return rows.every((row) => ['sent', 'failed', 'dead'].includes(row.status));
    });
    return ids;
  }

  /** Another demo app on the same database, sending nothing, listening on a port of its own. */
  async function otherApp(
    consoleOptions: Parameters<typeof createDemoApp>[0]['console'],
    prepare: (app: INestApplication) => void = () => undefined,
  ): Promise<{ app: INestApplication; port: number; url: string }> {
    const { app: other, url } = await listeningDemo(
      serving({ databaseUrl: database.url, smtpUrl: smtp.url, platform, mail, console: consoleOptions }),
      (created) => {
        others.push(created);
        prepare(created);
      },
    );
    const port = Number(new URL(url).port);
    return { app: other, port, url };
  }

  beforeAll(async () => {
    database = await createTestDatabase();
    smtp = new SmtpTestServer();
    smtp.script = { onRcptTo: (recipient) => (refused.has(recipient) ? refusal(recipient) : undefined) };
    await smtp.listen();
    mail = testMailOptions(smtp.url);
    ({ app, url: baseUrl } = await listeningDemo({
      databaseUrl: database.url,
      smtpUrl: smtp.url,
      platform,
      mail,
      console: { authorize },
    }));

    const [ann, bob, carol, invoice, keyed] = await enqueueAndSettle([
      { mail: { to: 'ann.private@example.com', subject: 'Welcome', text: 'Hello.' } },
      { mail: { to: 'bob.private@example.org', subject: 'Your order', text: 'Thanks.' } },
      {
        mail: {
          to: { name: 'Carol Private', address: 'carol.private@example.com' },
          cc: { name: 'Carol Private', address: 'carol.office.private@example.net' },
          subject: 'Your account',
          text: 'Details.',
        },
      },
      {
        mail: {
          to: 'invoice.private@example.com',
          subject: 'Your invoice',
          text: 'Attached.',
          attachments: [
            { filename: 'carol-invoice.pdf', contentType: 'application/pdf', content: Buffer.from('%PDF-1.4 test') },
          ],
        },
      },
      {
        mail: { to: 'keyed.private@example.com', subject: 'Welcome again', text: 'Hello again.' },
        options: { idempotencyKey: 'welcome:ann.private@example.com' },
      },
    ]);
    Object.assign(privateMails, { ann, bob, carol, invoice, keyed });
    expect(await statusOf(ann)).toBe('sent');
    expect(['failed', 'dead']).toContain(await statusOf(bob));
    await app
      .get(MailOutboxAdmin)
      .suppress('dave.private@example.net', 'dave.private@example.net asked us to stop writing');
    await unsubscribe([{ address: 'gina.private@example.com', category: 'newsletter', outboxId: ann }]);
  });

  afterAll(async () => {
    for (const other of others) await other.close();
    await app?.close();
    await smtp?.close();
    await database?.drop();
  });

  it('a denied request gets 401 on every route, no cookie, and changes nothing', async () => {
    const id = privateMails.ann;
    const gets = [
      '/mail',
      '/mail/mails',
      '/mail/mails?status=failed',
      '/mail/assets/console.css',
      '/mail/assets/console.js',
      '/mail/overview/figures',
      `/mail/mails/${id}`,
      `/mail/mails/${id}/message`,
      `/mail/mails/${id}/eml`,
      `/mail/mails/${id}/requeue`,
      `/mail/mails/${id}/cancel`,
      '/mail/mails/bulk/requeue',
      '/mail/mails/bulk/cancel?meta=batch%3Db1',
      '/mail/suppressions',
      '/mail/suppressions/add?address=x@example.com',
      '/mail/suppressions/remove?address=dave.private@example.net',
      '/mail/unsubscribes',
      '/mail/unsubscribes/resubscribe?address=gina.private@example.com&category=newsletter',
    ];
    for (const path of gets) {
      const answer = await get(path, {});
      expect([path, answer.status]).toEqual([path, 401]);
      expect([path, answer.headers.getSetCookie()]).toEqual([path, []]);
      expect([path, leaks(answer.body, ['<html', 'data-testid', 'private'])]).toEqual([path, []]);
    }
    const audits = await auditCount();
    const suppressed = await sql(`select address from reliable_mail.mail_suppression order by address`);
    const unsubscribed = await unsubscribes();
    const posts: [string, Record<string, string>][] = [
      [`/mail/mails/${privateMails.bob}/requeue`, { reason: 'denied' }],
      [`/mail/mails/${id}/cancel`, { reason: 'denied' }],
      ['/mail/mails/bulk/requeue', { reason: 'denied', status: 'failed' }],
      ['/mail/mails/bulk/cancel', { reason: 'denied', status: 'pending' }],
      ['/mail/suppressions/add', { reason: 'denied', address: 'x@example.com' }],
      ['/mail/suppressions/remove', { reason: 'denied', address: 'dave.private@example.net' }],
      [
        '/mail/unsubscribes/resubscribe',
        { reason: 'denied', address: 'gina.private@example.com', category: 'newsletter' },
      ],
    ];
    for (const [path, fields] of posts) {
      // Even with a cookie and a token that match: the denial comes first.
      const token = 'a'.repeat(43);
      const answer = await post(path, {}, fields, { pair: `${CSRF_COOKIE}=${token}`, token });
      expect([path, answer.status]).toEqual([path, 401]);
    }
    expect(await auditCount()).toBe(audits);
    expect(await sql(`select address from reliable_mail.mail_suppression order by address`)).toEqual(suppressed);
    expect(await unsubscribes()).toEqual(unsubscribed);
    expect(['failed', 'dead']).toContain(await statusOf(privateMails.bob));
  });

  it('a view-only requester sees no recipient’s address, display name, attachment name or key anywhere', async () => {
    const ids = Object.values(privateMails);
    const paths = [
      '/mail',
      '/mail/mails',
      '/mail/mails?status=failed',
      '/mail/overview/figures',
      '/mail/suppressions',
      '/mail/unsubscribes',
      ...ids.map((id) => `/mail/mails/${id}`),
    ];
    const needles = ['private', 'Carol Private', 'carol-invoice'];
    for (const path of paths) {
      const answer = await get(path, VIEWER);
      expect([path, answer.status]).toEqual([path, 200]);
      expect([path, leaks(answer.body, needles)]).toEqual([path, []]);
    }
    // The message itself needs the content permission, in the frame and as a file.
    for (const id of ids) {
      for (const path of [`/mail/mails/${id}/message`, `/mail/mails/${id}/eml`]) {
        const frame = await get(path, VIEWER);
        expect([path, frame.status]).toEqual([path, 403]);
        expect([path, leaks(frame.body, needles)]).toEqual([path, []]);
      }
    }

    // The same pages show them to a requester with the content permission: the pages above did have them to hide.
    const seen: string[] = [];
    for (const path of paths) {
      const answer = await get(path, READER);
      expect([path, answer.status]).toEqual([path, 200]);
      seen.push(answer.body);
    }
    const all = seen.join('\n');
    for (const shown of [
      'ann.private@example.com',
      'bob.private@example.org',
      'Carol Private',
      'carol.private@example.com',
      'carol.office.private@example.net',
      'invoice.private@example.com',
      'carol-invoice.pdf',
      'welcome:ann.private@example.com',
      'dave.private@example.net',
      'gina.private@example.com',
    ]) {
      expect([shown, all.includes(shown)]).toEqual([shown, true]);
    }
    // The refusal that names bob's address is shown to the reader, on the failed mails and on bob's timeline.
    expect((await get('/mail/mails?status=failed', READER)).body).toContain('bob.private@example.org');
    expect((await get(`/mail/mails/${privateMails.bob}`, READER)).body).toContain('bob.private@example.org');
    const frame = await get(`/mail/mails/${privateMails.ann}/message`, READER);
    expect(frame.status).toBe(200);
    expect(frame.body).toContain('Hello.');
    // The .eml is the message as the transport sends it: the stored Message-ID, the headers, the body.
    const eml = await get(`/mail/mails/${privateMails.ann}/eml`, READER);
    expect(eml.status).toBe(200);
    expect(eml.headers.get('content-type')).toMatch(/^message\/rfc822/);
    expect(eml.headers.get('content-disposition')).toBe(`attachment; filename="${privateMails.ann}.eml"`);
    const [{ message_id: messageId }] = await sql<{ message_id: string }>(
      `select message_id from reliable_mail.mail_outbox where id = $1`,
      [privateMails.ann],
    );
    expect(eml.body).toContain(`Message-ID: ${messageId}`);
    expect(eml.body).toContain('To: ann.private@example.com');
    expect(eml.body).toContain('Subject: Welcome');
  });

  it('?done= names only the console’s own notices: valueOf and its like answer 200', async () => {
    for (const done of ['valueOf', 'toString', 'hasOwnProperty', 'constructor', '__proto__', 'toLocaleString']) {
      const answer = await get(`/mail/mails?done=${done}&n=1`, OPERATOR);
      expect([done, answer.status]).toEqual([done, 200]);
      expect([done, leaks(answer.body, ['[object', 'function ', 'native code'])]).toEqual([done, []]);
    }
    for (const done of ['valueOf', 'hasOwnProperty']) {
      const answer = await get(`/mail/suppressions?done=${done}&n=1`, OPERATOR);
      expect([done, answer.status]).toEqual([done, 200]);
      const timeline = await get(`/mail/mails/${privateMails.ann}?done=${done}&n=1`, OPERATOR);
      expect([done, timeline.status]).toEqual([done, 200]);
    }
  });

  it('refuses a read another site makes, but not a link followed from elsewhere', async () => {
    // node:http, not fetch: Node's fetch sends `Sec-Fetch-Mode: cors` whatever the test asks for.
    const port = Number(new URL(baseUrl).port);
    const host = `127.0.0.1:${port}`;
    const read = (path: string, site: string, mode: string) =>
      rawRequest(port, { path, host, headers: { ...OPERATOR, 'sec-fetch-site': site, 'sec-fetch-mode': mode } });
    for (const path of ['/mail/mails', '/mail/overview/figures', `/mail/mails/${privateMails.ann}`]) {
      const cors = await read(path, 'cross-site', 'cors');
      expect([path, cors.status]).toEqual([path, 403]);
      expect([path, leaks(cors.body, ['data-testid', '<html', 'private'])]).toEqual([path, []]);
      expect([path, cors.headers['set-cookie']]).toEqual([path, undefined]);
    }
    const link = await read('/mail/mails', 'cross-site', 'navigate');
    expect(link.status).toBe(200);
    expect(link.body).toContain('data-testid="mails"');
    // The overview's own refresh is a same-origin fetch.
    const own = await read('/mail/overview/figures', 'same-origin', 'cors');
    expect(own.status).toBe(200);
  });

  it('input that cannot be used answers 400 with the reason, and changes nothing', async () => {
    const badMeta = await get('/mail/mails?meta=%3D1', OPERATOR);
    expect(badMeta.status).toBe(400);
    expect(badMeta.body).toContain('meta');
    const badFrom = await get('/mail/mails?from=yesterday', OPERATOR);
    expect(badFrom.status).toBe(400);
    expect(badFrom.body).toContain('from');
    // A cursor given twice is a list, on either list of addresses.
    for (const list of ['suppressions', 'unsubscribes']) {
      const twice = await get(`/mail/${list}?after=a%40example.com&after=b%40example.com&afterCategory=news`, OPERATOR);
      expect([list, twice.status, twice.body.includes('after')]).toEqual([list, 400, true]);
    }

    const id = privateMails.bob;
    const before = await rowOf(id);
    expect(['failed', 'dead']).toContain(before.status);
    const audits = await auditCount();
    const { cookie } = await pageWithToken(`/mail/mails/${id}/requeue`, OPERATOR);

    const noReason = await post(`/mail/mails/${id}/requeue`, OPERATOR, {}, cookie);
    expect(noReason.status).toBe(400);
    expect(noReason.body).toContain('reason');
    const blankReason = await post(`/mail/mails/${id}/requeue`, OPERATOR, { reason: '   ' }, cookie);
    expect(blankReason.status).toBe(400);
    const longReason = await post(`/mail/mails/${id}/requeue`, OPERATOR, { reason: 'x'.repeat(501) }, cookie);
    expect(longReason.status).toBe(400);
    expect(longReason.body).toContain('reason');

    expect(await rowOf(id)).toEqual(before);
    expect(await auditCount()).toBe(audits);
  });

  it('cancels every mail a metadata filter matches, after a count, in one audited action', async () => {
    const outbox = app.get(MailOutboxService);
    const later = { delayMs: 3_600_000 };
    const b1: string[] = [];
    for (const n of [1, 2, 3]) {
      b1.push(
        (
          await outbox.enqueue(
            { to: `batch${n}@example.com`, subject: 'Batch', text: 'Later.' },
            { ...later, metadata: { batch: 'b1' } },
          )
        ).id,
      );
    }
    const { id: b2 } = await outbox.enqueue(
      { to: 'batch4@example.com', subject: 'Batch', text: 'Later.' },
      { ...later, metadata: { batch: 'b2' } },
    );

    const preview = await pageWithToken('/mail/mails/bulk/cancel?meta=batch%3Db1', OPERATOR);
    expect(textFrom(preview.body, 'dry-run')).toContain('This would cancel 3');
    const done = await post(
      '/mail/mails/bulk/cancel',
      OPERATOR,
      { meta: 'batch=b1', reason: 'campaign withdrawn' },
      preview.cookie,
    );
    expect(done.status).toBe(303);
    const location = done.headers.get('location');
    expect(location).toEqual(expect.stringContaining('done=cancel'));
    expect(location).toEqual(expect.stringContaining('n=3'));

    const statuses = await sql<{ id: string; status: string }>(
      `select id, status from reliable_mail.mail_outbox where id = any($1) order by id`,
      [[...b1, b2]],
    );
    expect(Object.fromEntries(statuses.map((row) => [row.id, row.status]))).toEqual({
      ...Object.fromEntries(b1.map((id) => [id, 'cancelled'])),
      [b2]: 'pending',
    });
    const audit = await sql<{ actor: string; reason: string; outbox_ids: string[] }>(
      `select actor, reason, outbox_ids from reliable_mail.mail_console_audit where action = 'cancel'`,
    );
    expect(audit).toHaveLength(1);
    expect(audit[0].actor).toBe('ops@example.com');
    expect(audit[0].reason).toBe('campaign withdrawn');
    expect([...audit[0].outbox_ids].sort()).toEqual([...b1].sort());
  });

  it('a requeue’s page warns of the recipients on the suppression list, by name to who may read them', async () => {
    const [id] = await enqueueAndSettle([{ mail: { to: 'eve@example.com', subject: 'Hello', text: 'Hi.' } }]);
    expect(['failed', 'dead']).toContain(await statusOf(id));
    await app.get(MailOutboxAdmin).suppress('eve@example.com', 'hard bounce');

    const page = await get(`/mail/mails/${id}/requeue`, OPERATOR);
    expect(page.status).toBe(200);
    expect(page.body).toContain('data-testid="suppressed-warning"');
    expect(textFrom(page.body, 'suppressed-warning')).toContain('eve@example.com');
    expect(textFrom(page.body, 'dry-run')).toContain('This would requeue 1');
    // Without the content permission the warning is there, the address is not.
    const blind = await get(`/mail/mails/${id}/requeue`, ACTOR_WITHOUT_CONTENT);
    expect(blind.status).toBe(200);
    expect(blind.body).toContain('data-testid="suppressed-warning"');
    expect(blind.body).not.toContain('eve@example.com');
  });

  it('adds an address to the suppression list, finds it, and removes it, each audited', async () => {
    const listed = async () =>
      (await sql<{ address: string }>(`select address from reliable_mail.mail_suppression`)).map((row) => row.address);
    const auditsOf = (action: string) =>
      sql(`select actor, reason, outbox_ids from reliable_mail.mail_console_audit where action = $1`, [action]);

    /** The action's page, then its form as that page posts it. */
    const act = async (verb: 'add' | 'remove', address: string, reason: string) => {
      const { cookie } = await pageWithToken(`/mail/suppressions/${verb}?address=${address}`, OPERATOR);
      return post(`/mail/suppressions/${verb}`, OPERATOR, { address, reason }, cookie);
    };
    const added = await act('add', 'Frank@Example.com', 'asked by phone');
    expect(added.status).toBe(303);
    expect(await listed()).toContain('frank@example.com');
    expect(await listed()).not.toContain('Frank@Example.com');
    expect(await auditsOf('suppress')).toEqual([
      { actor: 'ops@example.com', reason: 'asked by phone', outbox_ids: [] },
    ]);
    const list = await get('/mail/suppressions', OPERATOR);
    expect(textFrom(list.body, 'suppressions', 100_000)).toContain('frank@example.com');

    // A search from an address starts at that address.
    const search = await get('/mail/suppressions?from=frank@example.com', OPERATOR);
    expect(search.status).toBe(200);
    expect(textFrom(search.body, 'suppressions', 100_000)).toContain('frank@example.com');
    const searchUpper = await get('/mail/suppressions?from=Frank@Example.com', OPERATOR);
    expect(textFrom(searchUpper.body, 'suppressions', 100_000)).toContain('frank@example.com');

    const removed = await act('remove', 'frank@example.com', 'customer asked again');
    expect(removed.status).toBe(303);
    expect(await listed()).not.toContain('frank@example.com');
    expect(await auditsOf('unsuppress')).toEqual([
      { actor: 'ops@example.com', reason: 'customer asked again', outbox_ids: [] },
    ]);
    const after = await get('/mail/suppressions', OPERATOR);
    expect(textFrom(after.body, 'suppressions', 100_000)).not.toContain('frank@example.com');

    // Taking off an address that is not on the list changes nothing, so nothing is recorded.
    const audits = await auditCount();
    const notListed = await act('remove', 'nobody@example.com', 'just in case');
    expect(notListed.status).toBeLessThan(500);
    expect(await auditCount()).toBe(audits);
  });

  it('lists the unsubscribes a page at a time by address and category, and from an address, to who may read them', async () => {
    // 60 addresses in 2 categories beside gina's row: the first page ends between an address's two categories.
    await unsubscribe(
      Array.from({ length: 60 }, (_, n) => `page${String(n).padStart(3, '0')}@example.com`).flatMap((address) =>
        ['digest', 'newsletter'].map((category) => ({ address, category })),
      ),
    );
    const listed = (body: string) =>
      tableRows(body, 'unsubscribes').map(([address, category]) => `${address} ${category}`);

    // Page after page by each page's link: every row of the table once, in the order of its key.
    const pages: string[][] = [];
    for (let path: string | undefined = '/mail/unsubscribes'; path !== undefined;) {
      const page = await get(path, OPERATOR);
      expect([path, page.status]).toEqual([path, 200]);
      pages.push(listed(page.body));
      path = nextOf(page.body);
    }
    expect(pages.map((rows) => rows.length)).toEqual([100, 21]);
    expect(pages.flat()).toEqual(await unsubscribes());
    expect([pages[0].at(-1), pages[1][0]]).toEqual(['page049@example.com digest', 'page049@example.com newsletter']);

    // Each row links to the mail its link came in, where it is known.
    const first = await get('/mail/unsubscribes', OPERATOR);
    const [gina, page000] = tableRows(first.body, 'unsubscribes');
    expect(gina.slice(0, 3)).toEqual(['gina.private@example.com', 'newsletter', 'the mail']);
    expect(first.body).toContain(`href="/mail/mails/${privateMails.ann}"`);
    expect(page000.slice(0, 3)).toEqual(['page000@example.com', 'digest', '—']);
    expect(first.body).toContain(
      'href="/mail/unsubscribes/resubscribe?address=page000%40example.com&amp;category=digest"',
    );

    // A search starts at an address, in any case, and its next page keeps to it.
    const search = await get('/mail/unsubscribes?from=Page005@Example.com', OPERATOR);
    expect(search.status).toBe(200);
    expect(nextOf(search.body)).toContain('from=Page005%40Example.com');
    const rest = await get(nextOf(search.body)!, OPERATOR);
    expect(nextOf(rest.body)).toBeUndefined();
    const all = await unsubscribes();
    expect([...listed(search.body), ...listed(rest.body)]).toEqual(
      all.slice(all.indexOf('page005@example.com digest')),
    );

    const cursorWithoutCategory = await get('/mail/unsubscribes?after=page000@example.com', OPERATOR);
    expect(cursorWithoutCategory.status).toBe(400);
    expect(cursorWithoutCategory.body).toContain('afterCategory');

    // Without content, the first page whatever the URL asks: no address, no search, no cursor, no next page.
    for (const who of [VIEWER, ACTOR_WITHOUT_CONTENT]) {
      const blind = await get(
        '/mail/unsubscribes?from=page050@example.com&after=page050@example.com&afterCategory=digest',
        who,
      );
      expect(blind.status).toBe(200);
      const rows = tableRows(blind.body, 'unsubscribes');
      expect(rows.map(([address, category]) => `${address} ${category}`)).toEqual(
        pages[0].map((row) => `hidden ${row.split(' ')[1]}`),
      );
      expect(leaks(blind.body, ['@example.com', 'after=', 'unsubscribes/resubscribe'])).toEqual([]);
    }
  });

  it('takes an unsubscribe back from its page, audited; refused without the token, the confirmation or a permission', async () => {
    await unsubscribe([
      { address: 'hank@example.com', category: 'digest' },
      { address: 'hank@example.com', category: 'newsletter' },
    ]);
    const path = '/mail/unsubscribes/resubscribe';
    const page = await pageWithToken(`${path}?address=Hank@Example.com&category=newsletter`, OPERATOR);
    expect(page.body).toContain(`action="${path}"`);
    expect(page.body).toContain('name="address" value="hank@example.com"');
    expect(page.body).toContain('name="category" value="newsletter"');
    const fields = { address: 'hank@example.com', category: 'newsletter', reason: 'opted in again at checkout' };
    const before = await unsubscribes();
    const audits = await auditCount();

    // The page and the post need act and content; the post, the page's token and its confirmation.
    for (const who of [READER, ACTOR_WITHOUT_CONTENT]) {
      expect((await get(`${path}?address=hank@example.com&category=newsletter`, who)).status).toBe(403);
      expect((await post(path, who, fields, page.cookie)).status).toBe(403);
    }
    const withoutToken = await post(path, OPERATOR, fields, undefined);
    expect(withoutToken.status).toBe(403);
    expect(withoutToken.body).toContain('CSRF');
    const unconfirmed = await post(path, OPERATOR, { ...fields, confirmed: 'no' }, page.cookie);
    expect(unconfirmed.status).toBe(400);
    expect(unconfirmed.body).toContain('confirmed');

    // Input that names no unsubscribe: 400 with the reason, on the page and in the post.
    const refusals: [Answer, string][] = [
      [await get(`${path}?category=newsletter`, OPERATOR), 'address'],
      [await get(`${path}?address=hank@example.com`, OPERATOR), 'category'],
      [await post(path, OPERATOR, { ...fields, address: '' }, page.cookie), 'address'],
      [await post(path, OPERATOR, { address: fields.address, reason: fields.reason }, page.cookie), 'category'],
      [await post(path, OPERATOR, { ...fields, category: ['newsletter', 'digest'] }, page.cookie), 'category'],
      [await post(path, OPERATOR, { address: fields.address, category: fields.category }, page.cookie), 'reason'],
    ];
    for (const [answer, field] of refusals) {
      expect([field, answer.status]).toEqual([field, 400]);
      // The field the refusal names, not a word of another's reason (the category's names the address).
      expect([field, answer.body]).toEqual([field, expect.stringContaining(`Invalid mail: ${field} `)]);
    }
    expect((await get(`/mail/unsubscribes/remove?address=hank@example.com&category=newsletter`, OPERATOR)).status).toBe(
      404,
    );
    expect((await post('/mail/unsubscribes/remove', OPERATOR, fields, page.cookie)).status).toBe(404);
    expect(await unsubscribes()).toEqual(before);
    expect(await auditCount()).toBe(audits);

    const done = await post(path, OPERATOR, fields, page.cookie);
    expect(done.status).toBe(303);
    const location = new URL(done.headers.get('location') ?? '', baseUrl);
    expect(`${location.pathname}${location.search}`).toBe('/mail/unsubscribes?done=resubscribe&n=1');
    expect(await unsubscribes()).toEqual(before.filter((row) => row !== 'hank@example.com newsletter'));
    expect(
      await sql(
        `select actor, reason, filter, outbox_ids from reliable_mail.mail_console_audit where action = 'resubscribe'`,
      ),
    ).toEqual([
      {
        actor: 'ops@example.com',
        reason: 'opted in again at checkout',
        filter: { address: 'hank@example.com', category: 'newsletter' },
        outbox_ids: [],
      },
    ]);
    const landed = await get(`${location.pathname}${location.search}`, OPERATOR);
    expect(landed.body).toContain('Unsubscribe taken back');

    // Taken back again: nothing was there, so nothing is recorded.
    const again = await post(path, OPERATOR, fields, page.cookie);
    expect(again.status).toBe(303);
    expect(again.headers.get('location')).toContain('n=0');
    expect(await auditCount()).toBe(audits + 1);
  });

  it('a console without authorize answers on a loopback Host only (DNS rebinding)', async () => {
    const open = await otherApp({ allowUnauthenticated: true });
    const id = privateMails.ann;
    const paths = [
      '/mail',
      '/mail/mails',
      '/mail/assets/console.css',
      '/mail/assets/console.js',
      '/mail/overview/figures',
      `/mail/mails/${id}`,
      `/mail/mails/${id}/message`,
      `/mail/mails/${id}/requeue`,
      '/mail/mails/bulk/cancel?status=pending',
      '/mail/suppressions',
      '/mail/suppressions/add?address=x@example.com',
    ];
    for (const path of paths) {
      for (const host of ['mail.example.com', `mail.example.com:${open.port}`, `localhost.attacker.example`]) {
        const answer = await rawRequest(open.port, { path, host });
        expect([path, host, answer.status]).toEqual([path, host, 403]);
        expect([path, host, leaks(answer.body, ['data-testid', '<html', 'private'])]).toEqual([path, host, []]);
        expect([path, host, answer.headers['set-cookie']]).toEqual([path, host, undefined]);
      }
      for (const host of [`127.0.0.1:${open.port}`, `localhost:${open.port}`]) {
        const answer = await rawRequest(open.port, { path, host });
        expect([path, host, answer.status]).toEqual([path, host, 200]);
      }
    }
    // An action posted through the rebound name, with a cookie and token that match, is refused and changes nothing.
    const target = privateMails.bob;
    const before = await rowOf(target);
    const audits = await auditCount();
    const token = 'b'.repeat(43);
    const posted = await rawRequest(open.port, {
      method: 'POST',
      path: `/mail/mails/${target}/requeue`,
      host: 'mail.example.com',
      headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: `${CSRF_COOKIE}=${token}` },
      body: new URLSearchParams({ _csrf: token, confirmed: 'yes', reason: 'rebound' }).toString(),
    });
    expect(posted.status).toBe(403);
    expect(await rowOf(target)).toEqual(before);
    expect(await auditCount()).toBe(audits);
  });

  it('under a global prefix, serves the console, its links, its cookie and its actions there', async () => {
    const [id] = await enqueueAndSettle([{ mail: { to: 'again@example.org', subject: 'Again', text: 'Hi.' } }]);
    expect(['failed', 'dead']).toContain(await statusOf(id));
    const prefixed = await otherApp({ authorize }, (other) => other.setGlobalPrefix('api'));

    const overview = await get('/api/mail', OPERATOR, {}, prefixed.url);
    expect(overview.status).toBe(200);
    expect(overview.body).toContain('href="/api/mail/mails"');
    expect(overview.body).toContain('href="/api/mail/assets/console.css"');
    expect(overview.body).not.toMatch(/(href|src|action)="\/mail[/"]/);
    const cookie = csrfCookieOf(overview.headers);
    expect(cookie?.attributes).toMatch(/(^|;)\s*Path=\/api\/mail\s*(;|$)/i);
    const css = await get('/api/mail/assets/console.css', OPERATOR, {}, prefixed.url);
    expect(css.status).toBe(200);

    const page = await pageWithToken(`/api/mail/mails/${id}/requeue`, OPERATOR, prefixed.url);
    expect(page.body).toContain(`action="/api/mail/mails/${id}/requeue"`);
    expect(page.cookie.attributes).toMatch(/(^|;)\s*Path=\/api\/mail\s*(;|$)/i);
    const done = await post(
      `/api/mail/mails/${id}/requeue`,
      OPERATOR,
      { reason: 'behind a prefix' },
      page.cookie,
      prefixed.url,
    );
    expect(done.status).toBe(303);
    const location = new URL(done.headers.get('location') ?? '', prefixed.url);
    expect(`${location.pathname}${location.search}`).toBe(`/api/mail/mails/${id}?done=requeue&n=1`);
    expect(
      await sql(`select actor, reason, outbox_ids from reliable_mail.mail_console_audit where action = 'requeue'`),
    ).toEqual([{ actor: 'ops@example.com', reason: 'behind a prefix', outbox_ids: [id] }]);
    const timeline = await get(location.pathname + location.search, OPERATOR, {}, prefixed.url);
    expect(timeline.status).toBe(200);
    expect(timeline.body).toContain('Requeued 1 mail');
  });
});
