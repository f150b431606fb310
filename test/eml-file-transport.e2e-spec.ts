import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { EmlFileTransport, MailOutboxService } from '@reliable-mail/nestjs';
import { testMailOptions, waitFor } from './support/test-app.js';
import { useTestBed } from './support/test-bed.js';

describe('EmlFileTransport in an app', () => {
  const bed = useTestBed();
  let directory: string;

  beforeAll(async () => {
    directory = await mkdtemp(join(tmpdir(), 'eml-app-'));
  });
  afterAll(async () => {
    await rm(directory, { recursive: true, force: true });
  });

  it('settles each mail sent once its file is written, named by its Message-ID', async () => {
    const app = await bed.startApp(
      testMailOptions('smtp://127.0.0.1:1', { transport: new EmlFileTransport({ directory }) }),
    );
    const outbox = app.get(MailOutboxService);
    const mails = await Promise.all(
      ['ann@example.com', 'bob@example.com'].map((to) => outbox.enqueue({ to, subject: 'Hello', text: 'Hi.' })),
    );
    await waitFor('both sent', async () =>
      (await Promise.all(mails.map((mail) => outbox.get(mail.id)))).every((row) => row.status === 'sent'),
    );
    const files = (await readdir(directory)).sort();
    expect(files).toHaveLength(2);
    for (const mail of mails) {
      const file = files.find((name) => name.endsWith(`-${mail.messageId.slice(1, -1)}.eml`));
      expect(file).toBeDefined();
      expect(await readFile(join(directory, file!), 'utf8')).toContain(`Message-ID: ${mail.messageId}`);
      const row = await outbox.get(mail.id);
      expect(row.attemptLog).toEqual([expect.objectContaining({ outcome: 'sent', reply: `written to ${file}` })]);
    }
  });
});
