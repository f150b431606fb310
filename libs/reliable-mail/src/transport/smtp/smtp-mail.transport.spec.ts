import { PassThrough } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { SmtpTestServer } from '../../../../../test/support/smtp-test-server.js';
import { waitFor } from '../../../../../test/support/test-app.js';
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

  describe("a lane's connections", () => {
    let server: SmtpTestServer;
    let transport: SmtpMailTransport | undefined;

    beforeEach(async () => {
      server = new SmtpTestServer();
      await server.listen();
    });

    afterEach(async () => {
      await transport?.close();
      await server.close();
    });

    const sendingTo = (maxMessages: number, connections = 1) => {
      const options = resolveSmtpOptions(
        { host: '127.0.0.1', port: Number(new URL(server.url).port), secure: false, ignoreTLS: true, maxMessages },
        'transport',
      );
      transport = new SmtpMailTransport(options, connections, 'shop@example.com');
      return (signal = new AbortController().signal) => transport!.send(message(), signal);
    };

    it('warm opens a connection before any mail, and the first mail goes over it', async () => {
      const send = sendingTo(100);
      transport!.warm();
      await waitFor('a connection opened ahead', () => server.sessions.length === 1, 5_000);
      await send();
      expect(server.sessions).toHaveLength(1);
      expect(server.received.map((received) => received.sessionId)).toEqual(server.sessions);
    });

    it('a mail that comes while the connection opened ahead waits for its greeting takes it, and opens no second', async () => {
      const send = sendingTo(100);
      transport!.warm();
      // smtp-server greets 100 ms after the connect: the send starts long before.
      await expect(send()).resolves.toMatchObject({ kind: 'attempted' });
      expect(server.sessions).toHaveLength(1);
    });

    it('a mail whose deadline passes while the connection opened ahead is still opening gives up at its deadline', async () => {
      // The connection ahead is not greeted before the test says so: it is still opening at the deadline, however
      // long building the message took on a busy machine.
      let greet = () => {};
      server.script = { onConnect: () => ({ acceptWhen: new Promise<void>((resolve) => (greet = resolve)) }) };
      const send = sendingTo(100);
      transport!.warm();
      const deadline = new AbortController();
      setTimeout(() => deadline.abort(), 200);
      await expect(send(deadline.signal)).resolves.toMatchObject({
        kind: 'outage',
        reply: expect.stringMatching(/deadline/),
      });
      expect(server.received).toHaveLength(0);
      greet();
    });

    it('a mail that takes the last open connection has the next opened meanwhile: a mail that comes while it is sent finds it', async () => {
      // The first message is held after its final dot until the test lets it go: the second comes while it is sent.
      let acceptFirst = () => {};
      const firstAccepted = new Promise<void>((resolve) => (acceptFirst = resolve));
      let messages = 0;
      server.script = { onData: () => (++messages === 1 ? { acceptWhen: firstAccepted } : undefined) };
      const send = sendingTo(100, 2);
      transport!.warm();
      await waitFor('the connection opened ahead', () => server.sessions.length === 1, 5_000);
      const first = send();
      await waitFor('the first message written', () => server.received.length === 1, 5_000);
      // Opened before any second mail: without it, that mail would connect and wait for the greeting itself.
      await waitFor('a second connection, opened ahead', () => server.sessions.length === 2, 5_000);
      await expect(send()).resolves.toMatchObject({ kind: 'attempted' });
      acceptFirst();
      await expect(first).resolves.toMatchObject({ kind: 'attempted' });
      expect(server.received.map((received) => received.sessionId)).toEqual(server.sessions);
      // The lane's two connections are both taken: none more.
      expect(server.sessions).toHaveLength(2);
    });

    it('verify opens a connection of its own and keeps it for the next mail', async () => {
      const send = sendingTo(100);
      await transport!.verify();
      await send();
      expect(server.sessions).toHaveLength(1);
      expect(server.received.map((received) => received.sessionId)).toEqual(server.sessions);
    });

    it('one that carried maxMessages is replaced at once, so the next mail does not wait for a connect', async () => {
      const send = sendingTo(2);
      await send();
      await send();
      // The first connection carried its two: a second is opened with no mail waiting for it.
      await waitFor('a second connection, opened ahead', () => server.sessions.length === 2, 5_000);
      await send();
      expect(server.sessions).toHaveLength(2);
      expect(server.received.map((received) => received.sessionId)).toEqual([
        server.sessions[0],
        server.sessions[0],
        server.sessions[1],
      ]);
    });

    it('a replacement the server refuses costs nothing: the next mail opens its own, and reports the outage', async () => {
      server.script = { onConnect: () => (server.sessions.length > 1 ? { code: 421, text: 'too busy' } : undefined) };
      const send = sendingTo(1);
      await expect(send()).resolves.toMatchObject({ kind: 'attempted' });
      await waitFor('the replacement refused', () => server.sessions.length === 2, 5_000);
      await expect(send()).resolves.toMatchObject({ kind: 'outage', replyCode: 421 });
      expect(server.sessions).toHaveLength(3);
      expect(server.received).toHaveLength(1);
    });
  });
});
