// What VERP costs an SMTP send: one transaction per recipient (MAIL FROM, RCPT TO, DATA with the whole message)
// where a mail to several took one. Sends mails of 1, 10 and 50 recipients, with a 2 KB and a 100 KB body, through
// the library's SmtpMailTransport to a local smtp-server, with and without VERP return paths, and prints the median
// send time of each. Run: scripts/node24.sh node --import @swc-node/register/esm-register bench/verp.ts
import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';
import type { OutboundMessage } from '../libs/reliable-mail/src/transport/mail-transport.interface.js';
import { SmtpMailTransport } from '../libs/reliable-mail/src/transport/smtp/smtp-mail.transport.js';
import { resolveSmtpOptions } from '../libs/reliable-mail/src/transport/smtp/smtp-transport-options.js';
import { verpAddress } from '../libs/reliable-mail/src/shared/verp.js';

const SENDS = Number(process.env.VERP_BENCH_SENDS ?? 30);
const verp = {
  domain: 'bounces.example.com',
  localPart: 'bounces',
  secrets: ['a-VERP-secret-of-at-least-32-characters'],
};
const rowId = '0190f0a2-1111-7000-8000-00000000000a';

const server = new SMTPServer({
  authOptional: true,
  disabledCommands: ['AUTH', 'STARTTLS'],
  logger: false,
  onData(stream, _session, callback) {
    stream.on('data', () => undefined);
    stream.on('end', () => callback());
  },
});
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
const port = (server.server.address() as AddressInfo).port;
const transport = new SmtpMailTransport(
  resolveSmtpOptions({ host: '127.0.0.1', port, secure: false, ignoreTLS: true }, 'transport'),
  1,
  'shop@example.com',
);

function message(recipients: string[], bodyBytes: number, withVerp: boolean): OutboundMessage {
  return {
    messageId: `<${rowId}@bench.example.com>`,
    idempotencyKey: rowId,
    lane: 'default',
    recipients,
    envelopeSenders: withVerp
      ? Object.fromEntries(recipients.map((address) => [address, verpAddress(verp, rowId, address)]))
      : undefined,
    mail: {
      from: { address: 'shop@example.com' },
      to: recipients.map((address) => ({ address })),
      cc: [],
      bcc: [],
      replyTo: [],
      subject: 'Your order',
      text: 'x'.repeat(bodyBytes),
      headers: {},
      attachments: [],
    },
  };
}

async function medianMs(recipients: string[], bodyBytes: number, withVerp: boolean): Promise<number> {
  const times: number[] = [];
  // The first sends warm the connection and the JIT up: left out.
  for (let send = -5; send < SENDS; send++) {
    const started = performance.now();
    const outcome = await transport.send(message(recipients, bodyBytes, withVerp), AbortSignal.timeout(30_000));
    if (send >= 0) times.push(performance.now() - started);
    if (outcome.kind !== 'attempted' || outcome.recipients.some(({ status }) => status !== 'accepted')) {
      throw new Error(`a send was not taken: ${JSON.stringify(outcome)}`);
    }
  }
  return times.sort((a, b) => a - b)[Math.floor(times.length / 2)];
}

console.log(`VERP cost: median of ${SENDS} sends over one pooled connection to a local smtp-server`);
console.log('recipients | body   | one transaction | VERP (one per recipient) | ratio');
for (const bodyBytes of [2_000, 100_000]) {
  for (const count of [1, 10, 50]) {
    const recipients = Array.from({ length: count }, (_, index) => `reader${index}@example.com`);
    const plain = await medianMs(recipients, bodyBytes, false);
    const perRecipient = await medianMs(recipients, bodyBytes, true);
    console.log(
      `${String(count).padStart(10)} | ${`${bodyBytes / 1_000} KB`.padEnd(6)} | ${plain.toFixed(1).padStart(12)} ms | ${perRecipient.toFixed(1).padStart(21)} ms | ${(perRecipient / plain).toFixed(1)}x`,
    );
  }
}
await transport.close();
await new Promise<void>((resolve) => server.close(() => resolve()));
