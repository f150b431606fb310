import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import { simpleParser } from 'mailparser';
import {
  fileTemplates,
  type FileTemplatesOptions,
  MailOutboxService,
  type MailPayloadV2,
  type ReliableMailOptions,
  ReliableMailSetupError,
} from '@reliable-mail/nestjs';
import { testMailOptions, waitFor } from './support/test-app.js';
import { type TestApp, useTestBed } from './support/test-bed.js';

const folders: string[] = [];

/** Writes `files` into `dir` (a fresh temporary folder when none is given), as a deploy lays out its templates. */
async function writeTemplates(files: Record<string, string>, dir?: string): Promise<string> {
  const folder = dir ?? (await mkdtemp(join(tmpdir(), 'mail-templates-')));
  if (!dir) folders.push(folder);
  for (const [path, content] of Object.entries(files)) {
    await mkdir(dirname(join(folder, path)), { recursive: true });
    await writeFile(join(folder, path), content);
  }
  return folder;
}

const FIRST_EDITION = {
  'welcome.subject.hbs': 'Welcome, {{name}}',
  'welcome.html.hbs': '<p>Hello {{name}}, from the first edition</p>{{> signature}}',
  'layouts/main.html.hbs': '<html><body>{{{body}}}</body></html>',
  'partials/signature.hbs': '<p>The first shop</p>',
};
/** What a deploy changes: the template itself and a partial it uses. */
const SECOND_EDITION = {
  'welcome.subject.hbs': 'Welcome aboard, {{name}}',
  'welcome.html.hbs': '<p>Hello {{name}}, from the second edition</p>{{> signature}}',
  'partials/signature.hbs': '<p>The second shop</p>',
};

afterAll(async () => {
  await Promise.all(folders.map((dir) => rm(dir, { recursive: true, force: true })));
});

describe('templates from files', () => {
  const bed = useTestBed();

  /** An instance of the app with the folder's templates: a process of one deploy. */
  async function instance(templates: FileTemplatesOptions, options: Partial<ReliableMailOptions> = {}) {
    const app = await bed.startApp(testMailOptions(bed.smtpUrl, { templates: [fileTemplates(templates)], ...options }));
    return { app, outbox: app.get(MailOutboxService) };
  }

  /** The subject and the text of the html part of the message received with `messageId`. */
  async function received(messageId: string): Promise<{ subject: string; html: string }> {
    const message = bed.smtp.received.find((candidate) => candidate.messageId === messageId);
    if (!message) throw new Error(`no message ${messageId} received`);
    const parsed = await simpleParser(message.raw);
    return { subject: parsed.subject ?? '', html: String(parsed.html) };
  }

  /** The template version the row was enqueued with. */
  const versionOf = async (outbox: MailOutboxService, id: string) =>
    ((await outbox.get(id)).payload as MailPayloadV2).template!.version;

  const sent = (app: TestApp, id: string) => () => app.events.sent.some((event) => event.id === id);

  it('a mail enqueued before a deploy that changed the files goes out as it was enqueued; one enqueued after, as changed', async () => {
    await bed.startSmtp();
    const dir = await writeTemplates(FIRST_EDITION);
    // The instance before the deploy enqueues, and stops before sending it.
    const before = await instance({ dir }, { dispatcher: { enabled: false } });
    const pinned = await before.outbox.enqueue({ to: 'ann@example.com', template: 'welcome', params: { name: 'Ann' } });
    const firstVersion = await versionOf(before.outbox, pinned.id);
    expect(firstVersion).toMatch(/^sha256:[0-9a-f]{16}$/);
    await before.app.close();

    // The deploy: new files in the same folder, a new process with the same database.
    await writeTemplates(SECOND_EDITION, dir);
    const after = await instance({ dir });
    await waitFor('the mail enqueued before the deploy sent', sent(after.app, pinned.id));
    expect(await received(pinned.messageId)).toEqual({
      subject: 'Welcome, Ann',
      html: '<html><body><p>Hello Ann, from the first edition</p><p>The first shop</p></body></html>',
    });

    const fresh = await after.outbox.enqueue({ to: 'bob@example.com', template: 'welcome', params: { name: 'Bob' } });
    const secondVersion = await versionOf(after.outbox, fresh.id);
    expect(secondVersion).toMatch(/^sha256:[0-9a-f]{16}$/);
    expect(secondVersion).not.toBe(firstVersion);
    await waitFor('the mail enqueued after the deploy sent', sent(after.app, fresh.id));
    expect(await received(fresh.messageId)).toEqual({
      subject: 'Welcome aboard, Bob',
      html: '<html><body><p>Hello Bob, from the second edition</p><p>The second shop</p></body></html>',
    });
    expect(await bed.execute('select name, version from mail_template_source order by created_at')).toEqual([
      { name: 'welcome', version: firstVersion },
      { name: 'welcome', version: secondVersion },
    ]);
  });

  it('in a rolling deploy, an instance of the old files sends a mail the new files made, and its own as before', async () => {
    await bed.startSmtp();
    const oldDir = await writeTemplates(FIRST_EDITION);
    const newDir = await writeTemplates({ ...FIRST_EDITION, ...SECOND_EDITION });
    const old = await instance({ dir: oldDir });
    const next = await instance({ dir: newDir }, { dispatcher: { enabled: false } });
    const fromNew = await next.outbox.enqueue({ to: 'bob@example.com', template: 'welcome', params: { name: 'Bob' } });
    const fromOld = await old.outbox.enqueue({ to: 'ann@example.com', template: 'welcome', params: { name: 'Ann' } });
    await waitFor('both sent by the old instance', () => sent(old.app, fromNew.id)() && sent(old.app, fromOld.id)());
    expect((await received(fromNew.messageId)).subject).toBe('Welcome aboard, Bob');
    expect((await received(fromOld.messageId)).subject).toBe('Welcome, Ann');
  });

  it('in a rolling deploy, a mail whose version calls a helper the deploy added waits for an instance that has it', async () => {
    await bed.startSmtp();
    const helpers = { shout: (value: string) => value.toUpperCase() };
    const oldDir = await writeTemplates(FIRST_EDITION);
    const newDir = await writeTemplates({ ...FIRST_EDITION, 'welcome.subject.hbs': 'Welcome, {{shout name}}' });
    const old = await instance({ dir: oldDir }, { retry: { baseDelayMs: 100, maxDelayMs: 100 } });
    const next = await instance({ dir: newDir, helpers }, { dispatcher: { enabled: false } });
    const mail = await next.outbox.enqueue({ to: 'ann@example.com', template: 'welcome', params: { name: 'Ann' } });
    await waitFor('two attempts of the old instance', async () => (await next.outbox.get(mail.id)).attempts >= 2);
    await old.app.close();
    expect(await next.outbox.get(mail.id)).toMatchObject({
      status: 'pending',
      lastReplyCode: null,
      lastError: expect.stringMatching(/failed to render: Missing helper: "shout"; an instance of the deploy that/),
    });
    expect(old.app.events.failed.filter((event) => event.permanent || event.cause !== 'deferred')).toEqual([]);

    const sender = await instance({ dir: newDir, helpers });
    await waitFor('sent by an instance of the new deploy', sent(sender.app, mail.id));
    expect((await received(mail.messageId)).subject).toBe('Welcome, ANN');
  });

  it('a mail whose version is kept nowhere fails permanently, saying so', async () => {
    await bed.startSmtp();
    const dir = await writeTemplates(FIRST_EDITION);
    const before = await instance({ dir }, { dispatcher: { enabled: false } });
    const mail = await before.outbox.enqueue({ to: 'ann@example.com', template: 'welcome', params: { name: 'Ann' } });
    const version = await versionOf(before.outbox, mail.id);
    await before.app.close();
    await bed.execute('delete from mail_template_source where version = $1', [version]);

    await writeTemplates(SECOND_EDITION, dir);
    const after = await instance({ dir });
    await waitFor('EmailFailedEvent', () => after.app.events.failed.length === 1);
    expect(after.app.events.failed[0]).toMatchObject({
      id: mail.id,
      cause: 'render',
      reason: expect.stringMatching(
        new RegExp(
          `^template "welcome"@${version} is not registered \\(registered versions: sha256:[0-9a-f]{16}\\) and its ` +
            'sources are not kept in the database; a row renders only with the version it was enqueued with$',
        ),
      ),
    });
    expect(bed.smtp.received).toHaveLength(0);
  });

  it('renders MJML into html and inlines its CSS', async () => {
    await bed.startSmtp();
    const dir = await writeTemplates({
      'receipt.subject.hbs': 'Receipt {{id}}',
      'receipt.mjml.hbs':
        '<mj-section><mj-column><mj-text css-class="total">Total {{total}}</mj-text></mj-column></mj-section>',
      'layouts/main.mjml.hbs':
        '<mjml><mj-head><mj-style>.total div { text-transform: uppercase; }</mj-style></mj-head><mj-body>{{{body}}}</mj-body></mjml>',
    });
    const { app, outbox } = await instance({ dir, inlineCss: true });
    const mail = await outbox.enqueue({
      to: 'ann@example.com',
      template: 'receipt',
      params: { id: 7, total: '9 EUR' },
    });
    await waitFor('sent', sent(app, mail.id));
    const { subject, html } = await received(mail.messageId);
    expect(subject).toBe('Receipt 7');
    expect(html).not.toContain('<mj-');
    expect(html).toMatch(/<div style="[^"]*text-transform: uppercase;[^"]*">Total 9 EUR<\/div>/);
  });

  it('a partial the folder lacks stops the start, naming the file that renders it', async () => {
    const dir = await writeTemplates({ ...FIRST_EDITION, 'partials/signature.hbs': '{{> legal}}' });
    const error = await instance({ dir }).catch((thrown: unknown) => thrown);
    expect(error).toBeInstanceOf(ReliableMailSetupError);
    expect((error as Error).message).toBe(
      `fileTemplates: ${join(dir, 'partials/signature.hbs')} renders the partial "legal", which the folder does not ` +
        `have (${join(dir, 'partials/legal.hbs')})`,
    );
  });

  it('a folder missing from the build stops the start, naming where it looked', async () => {
    const dir = join(await writeTemplates({}), 'dist', 'mail-templates');
    const error = await instance({ dir }).catch((thrown: unknown) => thrown);
    expect(error).toBeInstanceOf(ReliableMailSetupError);
    expect((error as Error).message).toContain(`fileTemplates: the folder ${dir} does not exist`);
  });
});
