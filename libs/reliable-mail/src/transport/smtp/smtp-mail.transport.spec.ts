import { PassThrough } from 'node:stream';
import { describe, expect, it } from '@jest/globals';
import type { OutboundAttachment, OutboundMessage } from '../mail-transport.interface.js';
import { SmtpMailTransport } from './smtp-mail.transport.js';
import { resolveSmtpOptions } from './smtp-transport-options.js';

// Nothing listens on port 1: a connection is refused before a byte of the message is sent.
const unreachable = resolveSmtpOptions({ host: '127.0.0.1', port: 1, secure: false, ignoreTLS: true }, 'transport');

function message(attachments: OutboundAttachment[] = []): OutboundMessage {
  return {
    messageId: '<m1@test.example.com>',
    idempotencyKey: 'order-1',
    lane: 'default',
    recipients: ['ann@example.com'],
    mail: {
      from: { address: 'shop@example.com' },
      to: [{ address: 'ann@example.com' }],
      cc: [],
      bcc: [],
      replyTo: [],
      subject: 'Report',
      text: 'Attached.',
      headers: {},
      attachments,
    },
  };
}

describe('SmtpMailTransport', () => {
  it('reports a refused connection as an outage of the lane, not a failure of the message', async () => {
    const transport = new SmtpMailTransport(unreachable, 1, 'shop@example.com');
    try {
      await expect(transport.send(message(), new AbortController().signal)).resolves.toMatchObject({
        kind: 'outage',
        replyCode: null,
        reply: expect.stringMatching(/ECONNREFUSED/),
      });
    } finally {
      await transport.close();
    }
  });

  it('stops building at the deadline: every recipient deferred, the attachment stream closed', async () => {
    const transport = new SmtpMailTransport(unreachable, 1, 'shop@example.com');
    // A stream that never ends, as a hung attachment fetch would give.
    const stream = new PassThrough();
    stream.write('the first bytes, and nothing after');
    const deadline = new AbortController();
    setTimeout(() => deadline.abort(), 50);
    try {
      const outcome = await transport.send(
        message([{ filename: 'report.csv', contentType: 'text/csv', content: stream }]),
        deadline.signal,
      );
      expect(outcome).toMatchObject({
        kind: 'attempted',
        recipients: [{ address: 'ann@example.com', status: 'deferred', reply: expect.stringMatching(/deadline/) }],
      });
      expect(stream.destroyed).toBe(true);
    } finally {
      await transport.close();
    }
  });
});
