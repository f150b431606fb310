import { Readable } from 'node:stream';
import { describe, expect, it } from '@jest/globals';
import { SmtpMailTransport } from './smtp-mail.transport.js';

describe('SmtpMailTransport', () => {
  it('closes an attachment stream that a failed send left unread', async () => {
    // Nothing listens on port 1: the connection is refused before a byte of the message is read.
    const transport = new SmtpMailTransport({ host: '127.0.0.1', port: 1, secure: false, ignoreTLS: true }, 1);
    const stream = Readable.from(['never read']);
    try {
      await expect(
        transport.send({
          messageId: '<m1@test.example.com>',
          payload: {
            from: { address: 'shop@example.com' },
            to: [{ address: 'ann@example.com' }],
            cc: [],
            bcc: [],
            replyTo: [],
            subject: 'Report',
            text: 'Attached.',
            headers: {},
            attachments: [{ filename: 'report.csv', contentType: 'text/csv', content: stream }],
          },
        }),
      ).rejects.toMatchObject({ message: expect.stringMatching(/ECONNREFUSED/) });
      expect(stream.destroyed).toBe(true);
    } finally {
      await transport.close();
    }
  });
});
