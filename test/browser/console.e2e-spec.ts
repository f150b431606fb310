import { randomUUID } from 'node:crypto';
import { mkdir } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { INestApplication } from '@nestjs/common';
import { type ConsoleAccess, MailOutboxService } from '@reliable-mail/nestjs';
import type { Page } from 'playwright-core';
import { listeningDemo, serving } from '../support/console-demo.js';
import { launchBrowser, type TestBrowser } from '../support/browser.js';
import { SmtpTestServer } from '../support/smtp-test-server.js';
import { testMailOptions, waitFor } from '../support/test-app.js';
import { createTestDatabase, type TestDatabase, withClient } from '../support/test-database.js';

// The console in a real Chromium, against the demo shop on a real PostgreSQL and a real (scripted) SMTP server, on
// Express and on Fastify. With UPDATE_SCREENSHOTS=1 the Express run also writes the documentation's screenshots
// (docs/console/*.png); a normal run leaves them alone.

const SCREENSHOTS = process.env.UPDATE_SCREENSHOTS === '1';
const DOCS = fileURLToPath(new URL('../../docs/console/', import.meta.url));

/** The operator the browser is: the app's `authorize` knows a requester by this header, and denies any other. */
const OPERATOR = { 'x-test-user': 'ops@example.com' };
const POSTMARK = { username: 'postmark', password: 'console-browser-secret' };

function authorize(request: unknown): ConsoleAccess | null {
  const user = (request as { headers: Record<string, string | string[] | undefined> }).headers['x-test-user'];
  return typeof user === 'string' && user !== '' ? { actor: user, permissions: ['view', 'act', 'content'] } : null;
}

/** What the tests read of an element in the page: the project's TypeScript has no DOM types. */
interface PageElement {
  getAttribute(name: string): string | null;
  readonly textContent: string | null;
}

interface Placed {
  orderId: number;
  mail: { id: string; messageId: string };
}

describe.each(['express', 'fastify'] as const)('the mail console in Chromium, on %s', (platform) => {
  let database: TestDatabase;
  let smtp: SmtpTestServer;
  let app: INestApplication;
  let readOnlyApp: INestApplication;
  let baseUrl: string;
  let readOnlyUrl: string;
  let browser: TestBrowser;
  /** Each mail the tests look at, by the part it plays. */
  const mails = {} as Record<'first' | 'greylisted' | 'dead' | 'last', Placed> & { later: { id: string } };
  /** slow@ is greylisted once; dead@ is refused for now (until its mail is dead and the test fixes "the mailbox"). */
  const greylisted = new Set<string>();
  let deadMailboxFixed = false;

  const sql = <T = Record<string, any>>(text: string, values: unknown[] = []) =>
    withClient(database.url, async (client) => (await client.query(text, values)).rows as T[]);
  const rowOf = async (id: string) =>
    (await sql(`select status, requeued_at, attempts from reliable_mail.mail_outbox where id = $1`, [id]))[0];
  const auditCount = async () => Number((await sql(`select count(*) from reliable_mail.mail_console_audit`))[0].count);

  async function order(email: string): Promise<Placed> {
    const response = await fetch(`${baseUrl}/orders`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email, items: [{ sku: 'mug', qty: 1, price: 12.5 }] }),
    });
    expect(response.status).toBe(201);
    return (await response.json()) as Placed;
  }

  /** A page of the operator's, at `path` of the console, answered 200. */
  async function open(path: string): Promise<Page> {
    const page = await browser.newPage(OPERATOR);
    const response = await page.goto(`${baseUrl}${path}`);
    expect(response?.status()).toBe(200);
    return page;
  }

  async function screenshot(page: Page, name: string): Promise<void> {
    if (!SCREENSHOTS || platform !== 'express') return;
    await mkdir(DOCS, { recursive: true });
    // The whole page in the viewport rather than `fullPage`, which leaves the sandboxed message frame (a frame of
    // another process) blank.
    const height = await page.evaluate(
      () => (globalThis as unknown as { document: { body: { scrollHeight: number } } }).document.body.scrollHeight,
    );
    await page.setViewportSize({ width: 1280, height });
    await page.waitForTimeout(200);
    await page.screenshot({ path: `${DOCS}${name}.png` });
  }

  beforeAll(async () => {
    database = await createTestDatabase();
    smtp = new SmtpTestServer();
    smtp.script = {
      onRcptTo: (recipient) => {
        if (recipient === 'slow@example.org' && !greylisted.has(recipient)) {
          greylisted.add(recipient);
          return { code: 451, text: '4.7.1 Greylisted, please try again later' };
        }
        if (recipient === 'dead@example.org' && !deadMailboxFixed) {
          return { code: 451, text: '4.2.1 Mailbox temporarily unavailable' };
        }
        return undefined;
      },
      // A queue id in the 250, as Postfix gives: the row's provider message id, which a Postmark report names.
      onData: () => ({ code: 250, text: `2.0.0 Ok: queued as ${randomUUID()}` }),
    };
    await smtp.listen();
    // Short polls and retries; a mail deferred for 2 s is dead.
    const mail = testMailOptions(smtp.url, { retry: { baseDelayMs: 100, maxDelayMs: 400, maxAgeMs: 2_000 } });
    const demo = {
      databaseUrl: database.url,
      smtpUrl: smtp.url,
      platform,
      mail,
      console: { authorize },
      webhooks: { postmark: { basicAuth: POSTMARK } },
    };
    ({ app, url: baseUrl } = await listeningDemo(demo));
    // The same database and console, read-only; it sends nothing.
    ({ app: readOnlyApp, url: readOnlyUrl } = await listeningDemo(
      serving({ ...demo, console: { authorize, readOnly: true } }),
    ));
    browser = await launchBrowser();

    mails.first = await order('ann@example.org');
    mails.greylisted = await order('slow@example.org');
    mails.dead = await order('dead@example.org');
    mails.last = await order('bob@example.org');
    // Due in an hour: pending until then.
    mails.later = await app
      .get(MailOutboxService)
      .enqueue({ to: 'carol@example.org', subject: 'Your review', text: 'How was it?' }, { delayMs: 3_600_000 });
    await waitFor('the orders’ mails to be sent or dead', async () => {
      const statuses = await sql<{ status: string }>(
        `select status from reliable_mail.mail_outbox where id = any($1::uuid[])`,
        [[mails.first, mails.greylisted, mails.dead, mails.last].map((placed) => placed.mail.id)],
      );
      return statuses.filter((row) => row.status === 'sent' || row.status === 'dead').length === 4;
    });
  });

  afterAll(async () => {
    await browser?.close();
    await readOnlyApp?.close();
    await app?.close();
    await smtp?.close();
    await database?.drop();
  });

  it('the overview shows the counts that SQL shows', async () => {
    const page = await open('/mail');
    const cells = await page.locator('[data-testid="counts"] td[data-lane][data-status]').evaluateAll((tds) =>
      (tds as unknown as PageElement[]).map((td) => ({
        lane: td.getAttribute('data-lane')!,
        status: td.getAttribute('data-status')!,
        count: Number(td.textContent!.trim().replace(/,/g, '')),
      })),
    );
    const counted = await sql<{ status: string; lane: string; count: number }>(
      `select status, lane, count(*)::int as count from reliable_mail.mail_outbox group by 1, 2`,
    );
    const shown = new Map(cells.map((cell) => [`${cell.status}/${cell.lane}`, cell.count]));
    // Every count SQL has is on the page, and every non-zero cell of the page is a count SQL has.
    expect(counted.map((row) => [`${row.status}/${row.lane}`, shown.get(`${row.status}/${row.lane}`)])).toEqual(
      counted.map((row) => [`${row.status}/${row.lane}`, row.count]),
    );
    expect(cells.filter((cell) => cell.count > 0)).toHaveLength(counted.length);
    expect(counted).toEqual(
      expect.arrayContaining([
        { status: 'sent', lane: 'default', count: 3 },
        { status: 'dead', lane: 'default', count: 1 },
        { status: 'pending', lane: 'default', count: 1 },
      ]),
    );
    await expect(page.getByTestId('dead-letters').textContent()).resolves.toBe('1');
    await screenshot(page, 'overview');
  });

  it('a filter by metadata finds the mail, and only it', async () => {
    const page = await open('/mail/mails');
    // Unfiltered, every mail is listed.
    await expect(page.locator('[data-testid="mails"] tbody tr[data-id]').count()).resolves.toBe(5);
    await page.locator('[data-testid="filter"] input[name="meta"]').fill(`orderId=${mails.greylisted.orderId}`);
    await Promise.all([page.waitForURL(/meta=/), page.getByRole('button', { name: 'Search' }).click()]);
    const ids = await page
      .locator('[data-testid="mails"] tbody tr[data-id]')
      .evaluateAll((rows) => (rows as unknown as PageElement[]).map((row) => row.getAttribute('data-id')));
    expect(ids).toEqual([mails.greylisted.mail.id]);
    await expect(page.locator('[data-testid="mails"] tbody').textContent()).resolves.toContain('slow@example.org');
  });

  it('a timeline shows the deferral, then the delivery, then a bounce posted to the webhooks module', async () => {
    const { id } = mails.greylisted.mail;
    const [{ provider_message_id: providerMessageId }] = await sql(
      `select provider_message_id from reliable_mail.mail_outbox where id = $1`,
      [id],
    );
    expect(providerMessageId).toEqual(expect.any(String));
    // A hard bounce as Postmark posts it, naming the provider's message id (for SMTP, the 250's queue id).
    const answer = await fetch(`${baseUrl}/webhooks/mail/postmark`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        authorization: `Basic ${Buffer.from(`${POSTMARK.username}:${POSTMARK.password}`).toString('base64')}`,
      },
      body: JSON.stringify({
        RecordType: 'Bounce',
        MessageStream: 'outbound',
        ID: 4_323_372_036,
        Type: 'HardBounce',
        TypeCode: 1,
        Name: 'Hard bounce',
        MessageID: providerMessageId,
        ServerID: 23,
        Description: 'The server was unable to deliver your message (ex: unknown user, mailbox not found).',
        Details: 'smtp;550 5.1.1 The email account that you tried to reach does not exist.',
        Email: 'slow@example.org',
        From: 'shop@example.com',
        BouncedAt: new Date().toISOString(),
        Inactive: true,
        CanActivate: true,
        Subject: `Your order #${mails.greylisted.orderId} is confirmed`,
      }),
    });
    expect(answer.status).toBe(200);
    expect(await answer.json()).toMatchObject({ stored: 1, unlinked: 0 });

    // Reached from the filtered list, as an operator would.
    const page = await open(`/mail/mails?meta=orderId%3D${mails.greylisted.orderId}`);
    await Promise.all([page.waitForURL(`**/mail/mails/${id}`), page.locator(`tr[data-id="${id}"] a`).first().click()]);
    await expect(page.getByTestId('status').textContent()).resolves.toBe('sent');
    const steps = await page.locator('[data-testid="timeline"] li.step').evaluateAll((items) =>
      (items as unknown as PageElement[]).map((item) => ({
        kind: item.getAttribute('data-kind')!,
        text: item.textContent!,
      })),
    );
    const kinds = steps.map((step) => step.kind);
    const deferral = kinds.indexOf('attempt transient');
    const delivery = kinds.indexOf('attempt sent');
    const bounce = kinds.indexOf('feedback bounced');
    expect(kinds[0]).toBe('enqueued');
    expect(deferral).toBeGreaterThan(0);
    expect(delivery).toBeGreaterThan(deferral);
    expect(bounce).toBeGreaterThan(delivery);
    expect(steps[deferral].text).toContain('451');
    expect(steps[deferral].text).toContain('Greylisted');
    expect(steps[delivery].text).toContain(providerMessageId);
    expect(steps[bounce].text).toMatch(/bounced \(hard\)\s+for slow@example\.org, reported by postmark/);
    expect(steps[bounce].text).toContain('5.1.1');
    // The message as rendered, in its sandboxed frame.
    const frame = page.frameLocator('iframe[title="the message as rendered"]');
    await expect(frame.locator('body').textContent()).resolves.toContain('1 x mug @ 12.50');
    await screenshot(page, 'timeline');
  });

  it('a form post without the CSRF token is refused, and changes nothing', async () => {
    const { id } = mails.dead.mail;
    const page = await open(`/mail/mails/${id}/requeue`);
    const before = await rowOf(id);
    expect(before.status).toBe('dead');
    const post = (body: string) =>
      page.evaluate(
        async ({ url, body }) => {
          const answer = await fetch(url, {
            method: 'POST',
            headers: { 'content-type': 'application/x-www-form-urlencoded' },
            body,
            redirect: 'manual',
          });
          return { status: answer.status, text: await answer.text() };
        },
        { url: `${baseUrl}/mail/mails/${id}/requeue`, body },
      );
    // From the console's own page, with its cookie: without the token, and with one that is not the cookie's.
    const refusal = { status: 403, text: expect.stringContaining('CSRF token is missing or does not match') };
    expect(await post('confirmed=yes&reason=no+token')).toEqual(refusal);
    expect(await post(`confirmed=yes&reason=wrong+token&_csrf=${'x'.repeat(43)}`)).toEqual(refusal);
    // From outside the browser, with the session's cookie but no token.
    const [cookie] = await page.context().cookies(`${baseUrl}/mail`);
    expect(cookie).toMatchObject({ name: 'reliable_mail_console_csrf', httpOnly: true, sameSite: 'Strict' });
    const fromNode = await fetch(`${baseUrl}/mail/mails/${id}/requeue`, {
      method: 'POST',
      headers: {
        ...OPERATOR,
        'content-type': 'application/x-www-form-urlencoded',
        cookie: `${cookie.name}=${cookie.value}`,
      },
      body: 'confirmed=yes&reason=no+token',
      redirect: 'manual',
    });
    expect(fromNode.status).toBe(403);
    expect(await fromNode.text()).toContain('CSRF token is missing or does not match');
    expect(await rowOf(id)).toEqual(before);
    expect(await auditCount()).toBe(0);
  });

  it('requeueing a dead mail from its timeline gets it sent, and the timeline shows who did it and why', async () => {
    const { id, messageId } = mails.dead.mail;
    deadMailboxFixed = true;
    const page = await open(`/mail/mails/${id}`);
    await expect(page.getByTestId('status').textContent()).resolves.toBe('dead');
    await Promise.all([
      page.waitForURL(`**/mail/mails/${id}/requeue`),
      page.getByRole('link', { name: 'Requeue…' }).click(),
    ]);
    await expect(page.getByTestId('dry-run').textContent()).resolves.toMatch(/requeue\s+1\s+mail /);
    await page.locator('form.action input[name="reason"]').fill('mailbox fixed by the customer');
    await Promise.all([page.waitForURL(/done=requeue/), page.getByRole('button', { name: 'Requeue 1' }).click()]);
    await expect(page.locator('.notice').textContent()).resolves.toBe('Requeued 1 mail.');

    await waitFor('the requeued mail to be sent', async () => (await rowOf(id)).status === 'sent');
    expect(smtp.received.filter((message) => message.messageId === messageId)).toHaveLength(1);
    await page.reload();
    await expect(page.getByTestId('status').textContent()).resolves.toBe('sent');
    const audit = page.locator('[data-testid="timeline"] li.step[data-kind="audit"]');
    await expect(audit.count()).resolves.toBe(1);
    await expect(audit.textContent()).resolves.toMatch(
      /requeue\s+by\s+ops@example\.com: “mailbox fixed by the customer”/,
    );
    expect(await sql(`select actor, action, reason, outbox_ids from reliable_mail.mail_console_audit`)).toEqual([
      { actor: 'ops@example.com', action: 'requeue', reason: 'mailbox fixed by the customer', outbox_ids: [id] },
    ]);
  });

  it('the guard’s denial leaves nothing of the console served', async () => {
    const { id } = mails.first.mail;
    const page = await browser.newPage();
    for (const path of [
      '/mail',
      '/mail/mails',
      `/mail/mails?meta=orderId%3D${mails.first.orderId}`,
      '/mail/assets/console.css',
      '/mail/assets/console.js',
      '/mail/overview/figures',
      `/mail/mails/${id}`,
      `/mail/mails/${id}/message`,
      `/mail/mails/${id}/requeue`,
      '/mail/suppressions',
      '/mail/unsubscribes',
    ]) {
      const response = await page.goto(`${baseUrl}${path}`);
      expect([path, response?.status()]).toEqual([path, 401]);
      const body = await response!.text();
      for (const markup of ['<html', 'reliable-mail', 'data-testid', '@example.org', 'font:', 'querySelector']) {
        expect([path, body]).not.toEqual([path, expect.stringContaining(markup)]);
      }
      expect(response?.headers()['set-cookie']).toBeUndefined();
    }
    // Denied posts change nothing either.
    const denied = await fetch(`${baseUrl}/mail/mails/${mails.later.id}/cancel`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'confirmed=yes&reason=denied',
    });
    expect(denied.status).toBe(401);
    expect((await rowOf(mails.later.id)).status).toBe('pending');
  });

  it('read-only: an action is refused, even posted with a valid CSRF token, and changes nothing', async () => {
    const { id } = mails.later;
    const page = await browser.newPage(OPERATOR);
    const timeline = await page.goto(`${readOnlyUrl}/mail/mails/${id}`);
    expect(timeline?.status()).toBe(200);
    await expect(page.getByTestId('status').textContent()).resolves.toBe('pending');
    await expect(page.locator('header .badge').first().textContent()).resolves.toBe('read-only');
    await expect(page.getByRole('link', { name: 'Cancel…' }).count()).resolves.toBe(0);
    // The same mail on the console that allows actions offers the action: the difference is read-only alone.
    const writable = await open(`/mail/mails/${id}`);
    await expect(writable.getByRole('link', { name: 'Cancel…' }).count()).resolves.toBe(1);

    const actionPage = await page.goto(`${readOnlyUrl}/mail/mails/${id}/cancel`);
    expect(actionPage?.status()).toBe(403);
    await expect(actionPage!.text()).resolves.not.toContain('<form');
    await page.goto(`${readOnlyUrl}/mail`);
    const [cookie] = await page.context().cookies(`${readOnlyUrl}/mail`);
    expect(cookie.value).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const before = await rowOf(id);
    const audits = await auditCount();
    const refused = await page.evaluate(
      async ({ url, body }) => {
        const answer = await fetch(url, {
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          body,
          redirect: 'manual',
        });
        return { status: answer.status, text: await answer.text() };
      },
      {
        url: `${readOnlyUrl}/mail/mails/${id}/cancel`,
        body: `_csrf=${cookie.value}&confirmed=yes&reason=read-only+test`,
      },
    );
    expect(refused).toEqual({ status: 403, text: expect.stringContaining('the mail console is read-only') });
    expect(await rowOf(id)).toEqual(before);
    expect(before.status).toBe('pending');
    expect(await auditCount()).toBe(audits);
  });

  it('an unsubscribe taken back from the Unsubscribes page, through its confirmation, leaves the list', async () => {
    // As the webhooks module records a one-click unsubscribe: the demo shop's mails carry no link to follow.
    await sql(
      `insert into reliable_mail.mail_unsubscribe (address, category, outbox_id) values ('ann@example.org', 'newsletter', $1)`,
      [mails.first.mail.id],
    );
    const page = await open('/mail');
    await Promise.all([
      page.waitForURL('**/mail/unsubscribes'),
      page.locator('header nav').getByRole('link', { name: 'Unsubscribes' }).click(),
    ]);
    const rows = page.locator('[data-testid="unsubscribes"] tbody tr');
    await expect(rows.count()).resolves.toBe(1);
    await expect(rows.textContent()).resolves.toMatch(/ann@example\.org\s+newsletter\s+the mail/);
    await expect(rows.getByRole('link', { name: 'the mail' }).getAttribute('href')).resolves.toBe(
      `/mail/mails/${mails.first.mail.id}`,
    );

    await Promise.all([
      page.waitForURL(/\/mail\/unsubscribes\/resubscribe\?/),
      rows.getByRole('link', { name: 'take back…' }).click(),
    ]);
    await expect(page.locator('main p').first().textContent()).resolves.toMatch(/newsletter.*ann@example\.org/s);
    await page.locator('form.action input[name="reason"]').fill('asked for the newsletter again');
    await Promise.all([page.waitForURL(/done=resubscribe/), page.getByRole('button', { name: 'Take back' }).click()]);
    await expect(page.locator('.notice').textContent()).resolves.toBe(
      'Unsubscribe taken back: mail of its category goes to the address again.',
    );
    await expect(page.locator('[data-testid="unsubscribes"] tbody').textContent()).resolves.toMatch(
      /^\s*No unsubscribe\.\s*$/,
    );
    expect(await sql(`select address from reliable_mail.mail_unsubscribe`)).toEqual([]);
    expect(
      await sql(`select actor, reason, filter from reliable_mail.mail_console_audit where action = 'resubscribe'`),
    ).toEqual([
      {
        actor: 'ops@example.com',
        reason: 'asked for the newsletter again',
        filter: { address: 'ann@example.org', category: 'newsletter' },
      },
    ]);
  });
});
