import { afterEach, describe, expect, it } from '@jest/globals';
import type { OutboundMessage } from '../libs/reliable-mail/src/transport/mail-transport.interface.js';
import { SmtpMailTransport } from '../libs/reliable-mail/src/transport/smtp/smtp-mail.transport.js';
import { resolveSmtpOptions } from '../libs/reliable-mail/src/transport/smtp/smtp-transport-options.js';
import { SmtpTestServer } from './support/smtp-test-server.js';
import { waitFor } from './support/test-app.js';

function message(n: number): OutboundMessage {
  return {
    messageId: `<m${n}@test.example.com>`,
    idempotencyKey: `order-${n}`,
    lane: 'default',
    recipients: ['ann@example.com'],
    mail: {
      from: { address: 'shop@example.com' },
      to: [{ address: 'ann@example.com' }],
      cc: [],
      bcc: [],
      replyTo: [],
      subject: `Code ${n}`,
      text: 'x',
      headers: {},
      attachments: [],
    },
  };
}

describe("a lane's SMTP connections", () => {
  let server: SmtpTestServer | undefined;
  let transport: SmtpMailTransport | undefined;

  afterEach(async () => {
    await transport?.close();
    await server?.close();
  });

  it('a connection that carried maxMessages is replaced at once, so the next mail does not wait for a connect', async () => {
    server = new SmtpTestServer();
    await server.listen();
    const { port } = new URL(server.url);
    const options = resolveSmtpOptions(
      { host: '127.0.0.1', port: Number(port), secure: false, ignoreTLS: true, maxMessages: 2 },
      'transport',
    );
    transport = new SmtpMailTransport(options, 1, 'shop@example.com');
    const send = (n: number) => transport!.send(message(n), new AbortController().signal);

    await send(1);
    await send(2);
    // The first connection carried its two: a second is opened with no mail waiting for it.
    await waitFor('a second connection, opened ahead', () => server!.sessions.length === 2, 5_000);
    await send(3);
    expect(server.sessions).toHaveLength(2);
    expect(server.received.map((received) => received.sessionId)).toEqual([
      server.sessions[0],
      server.sessions[0],
      server.sessions[1],
    ]);
  });
});
