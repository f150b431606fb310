import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { simpleParser } from 'mailparser';
import { ReliableMailSetupError } from '../../errors.js';
import type { OutboundMessage } from '../mail-transport.interface.js';
import { EmlFileTransport } from './eml-file.transport.js';

const message: OutboundMessage = {
  messageId: '<0190e4a0-0000-7000-8000-000000000001@shop.example.com>',
  idempotencyKey: 'order-1',
  lane: 'default',
  recipients: ['ann@example.com', 'audit@example.com'],
  mail: {
    from: { name: 'Shop', address: 'shop@example.com' },
    to: [{ address: 'ann@example.com' }],
    cc: [],
    bcc: [{ address: 'audit@example.com' }],
    replyTo: [],
    subject: 'Your order',
    text: 'Thanks for your order.',
    html: '<p>Thanks for your order.</p>',
    headers: { 'X-Order-Id': '1' },
    attachments: [],
  },
};

describe('EmlFileTransport', () => {
  let directory: string;

  beforeEach(async () => {
    directory = await mkdtemp(join(tmpdir(), 'eml-'));
  });
  afterEach(async () => {
    await rm(directory, { recursive: true, force: true });
  });

  it('writes the message as it would go over SMTP, and accepts every recipient', async () => {
    const transport = new EmlFileTransport({ directory: join(directory, 'mail') });
    await transport.verify();
    const outcome = await transport.send(message, new AbortController().signal);

    const files = await readdir(join(directory, 'mail'));
    expect(files).toEqual([
      expect.stringMatching(/^\d{4}-.*-0190e4a0-0000-7000-8000-000000000001@shop\.example\.com\.eml$/),
    ]);
    const parsed = await simpleParser(await readFile(join(directory, 'mail', files[0])));
    expect(parsed.messageId).toBe(message.messageId);
    expect(parsed.subject).toBe('Your order');
    expect(parsed.text?.trim()).toBe('Thanks for your order.');
    expect(parsed.headers.get('x-order-id')).toBe('1');
    // As on the wire: a Bcc recipient gets the message, and no one sees it in the headers.
    expect(parsed.headers.has('bcc')).toBe(false);
    expect(outcome).toMatchObject({
      kind: 'attempted',
      recipients: [
        { address: 'ann@example.com', status: 'accepted' },
        { address: 'audit@example.com', status: 'accepted' },
      ],
      reply: `written to ${files[0]}`,
    });
  });

  it('reports a file it cannot write as an outage, so that the mail waits without an attempt charged', async () => {
    const notADirectory = join(directory, 'taken');
    await writeFile(notADirectory, 'a file where the directory should be');
    const transport = new EmlFileTransport({ directory: notADirectory });
    await expect(transport.verify()).rejects.toThrow();
    await expect(transport.send(message, new AbortController().signal)).resolves.toMatchObject({
      kind: 'outage',
      reply: expect.stringMatching(/^could not write the \.eml file: /),
    });
  });

  it('refuses to be made without a directory', () => {
    expect(() => new EmlFileTransport({ directory: ' ' })).toThrow(ReliableMailSetupError);
    expect(() => new EmlFileTransport(undefined as never)).toThrow(ReliableMailSetupError);
  });
});
