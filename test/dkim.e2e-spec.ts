import { generateKeyPairSync } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { InvalidOptionsError, MailOutboxService, type SmtpTransportOptions } from '@reliable-mail/nestjs';
import { type DKIMResult, dkimVerify } from 'mailauth';
import { resolveSmtpOptions } from '../libs/reliable-mail/src/transport/smtp/smtp-transport-options.js';
import { SmtpMailTransport } from '../libs/reliable-mail/src/transport/smtp/smtp-mail.transport.js';
import type { ReceivedMessage } from './support/smtp-test-server.js';
import { testMailOptions, waitFor } from './support/test-app.js';
import { useTestBed } from './support/test-bed.js';

/** A selector's key pair, and the TXT record that publishes its public key. */
interface SelectorKey {
  selector: string;
  privateKey: string;
  record: string;
}

function selectorKey(selector: string): SelectorKey {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const p = publicKey.export({ type: 'spki', format: 'der' }).toString('base64');
  return {
    selector,
    privateKey: privateKey.export({ type: 'pkcs8', format: 'pem' }) as string,
    record: `v=DKIM1; k=rsa; p=${p}`,
  };
}

// The module's `from` is shop@example.com: the signing domain is the From domain, as DMARC alignment wants.
const DOMAIN = 'example.com';
const retiring = selectorKey('s2026a');
const current = selectorKey('s2026b');

/** A DNS resolver for mailauth holding the records of `published`: a TXT record's strings are 255 bytes at most. */
function dnsWith(...published: SelectorKey[]) {
  return async (name: string, type: string): Promise<string[][]> => {
    const key = published.find(({ selector }) => name === `${selector}._domainkey.${DOMAIN}`);
    if (type !== 'TXT' || !key) throw Object.assign(new Error(`no ${type} record at ${name}`), { code: 'ENOTFOUND' });
    return [key.record.match(/.{1,255}/g)!];
  };
}

/** What a receiver finds of the message's DKIM signatures, DNS holding the records of `published`. */
async function verified(raw: string, ...published: SelectorKey[]): Promise<DKIMResult[]> {
  const { results } = await dkimVerify(Buffer.from(raw), { resolver: dnsWith(...published) });
  return results;
}

const passing = (key: SelectorKey) => ({
  signingDomain: DOMAIN,
  selector: key.selector,
  status: expect.objectContaining({ result: 'pass', aligned: DOMAIN }),
});

describe('DKIM: the SMTP transport signs every message with the configured key', () => {
  const bed = useTestBed();

  /** An app sending to the test server, signing with `key`. */
  async function signingWith(key: SelectorKey, transport: Partial<SmtpTransportOptions> = {}) {
    const options = testMailOptions(bed.smtp.url);
    const dkim = { domainName: DOMAIN, keySelector: key.selector, privateKey: key.privateKey };
    const app = await bed.startApp({
      ...options,
      transport: { ...(options.transport as SmtpTransportOptions), ...transport, dkim },
    });
    return { app, outbox: app.get(MailOutboxService) };
  }

  const copiesOf = (messageId: string): ReceivedMessage[] =>
    bed.smtp.received.filter((message) => message.messageId === messageId);

  it('a mail sent in two transactions arrives signed by the selector, the same signature in each, and it verifies', async () => {
    await bed.startSmtp();
    const { app, outbox } = await signingWith(current, { maxRecipientsPerTransaction: 1 });
    const mail = await outbox.enqueue({ to: 'ann@example.com', cc: 'bob@example.com', subject: 'Hi', text: 'Hello' });
    await waitFor('sent', () => app.events.sent.length === 1);

    const copies = copiesOf(mail.messageId);
    expect(copies.map((copy) => copy.recipients)).toEqual([['ann@example.com'], ['bob@example.com']]);
    // Signed once per attempt: every transaction carries the very same message.
    expect(copies[1].raw).toBe(copies[0].raw);
    expect(copies[0].raw).toMatch(/^DKIM-Signature: v=1; a=rsa-sha256; c=relaxed\/relaxed; d=example\.com;/);
    expect(await verified(copies[0].raw, current)).toEqual([expect.objectContaining(passing(current))]);
  });

  it('rotation: mail signed by the retiring key before the switch and by the new one after both verify while DNS holds both records', async () => {
    await bed.startSmtp();
    const before = await signingWith(retiring);
    const early = await before.outbox.enqueue({ to: 'ann@example.com', subject: 'Before', text: 'Hello' });
    await waitFor('sent before the switch', () => before.app.events.sent.length === 1);
    await before.app.close();

    const after = await signingWith(current);
    const late = await after.outbox.enqueue({ to: 'ann@example.com', subject: 'After', text: 'Hello' });
    await waitFor('sent after the switch', () => after.app.events.sent.length === 1);

    const [earlyCopy] = copiesOf(early.messageId);
    const [lateCopy] = copiesOf(late.messageId);
    expect(await verified(earlyCopy.raw, current, retiring)).toEqual([expect.objectContaining(passing(retiring))]);
    expect(await verified(lateCopy.raw, current, retiring)).toEqual([expect.objectContaining(passing(current))]);
    // Why the steps come in this order: the new record is published before the switch, the old one kept after it.
    expect(await verified(lateCopy.raw, retiring)).toEqual([
      expect.objectContaining({ status: expect.objectContaining({ result: 'neutral', comment: 'no key' }) }),
    ]);
    expect(await verified(earlyCopy.raw, current)).toEqual([
      expect.objectContaining({ status: expect.objectContaining({ result: 'neutral', comment: 'no key' }) }),
    ]);
  });

  it('a mail deferred while the retiring key signed is signed again by the new key at its retry after the switch', async () => {
    let switched = false;
    const refused: ReceivedMessage[] = [];
    await bed.startSmtp({
      onData: (message) => {
        if (switched) return undefined;
        refused.push(message);
        return { code: 451, text: '4.3.0 Try again later' };
      },
    });
    const before = await signingWith(retiring);
    const mail = await before.outbox.enqueue({ to: 'ann@example.com', subject: 'Hi', text: 'Hello' });
    await waitFor('an attempt deferred', () => refused.length > 0);
    await before.app.close();
    switched = true;

    const after = await signingWith(current);
    await waitFor('sent after the switch', () => after.app.events.sent.length === 1);
    const [delivered] = copiesOf(mail.messageId);
    expect(await verified(refused[0].raw, current, retiring)).toEqual([expect.objectContaining(passing(retiring))]);
    expect(await verified(delivered.raw, current, retiring)).toEqual([expect.objectContaining(passing(current))]);
    expect(delivered.messageId).toBe(refused[0].messageId);
  });

  it.each([
    {
      change: 'a word of its body',
      tamper: (raw: string) => raw.replace(/\r\nHello\r\n/, '\r\nHullo\r\n'),
      // mailauth's word for a body hash that does not match; to DMARC, anything but pass is no signature.
      result: 'neutral',
      comment: 'body hash did not verify',
    },
    {
      change: 'its Subject',
      tamper: (raw: string) => raw.replace(/^Subject: Hi$/m, 'Subject: Urgent'),
      result: 'fail',
      comment: 'bad signature',
    },
  ])('a message with $change changed on the way does not verify', async ({ tamper, result, comment }) => {
    await bed.startSmtp();
    const { app, outbox } = await signingWith(current);
    const mail = await outbox.enqueue({ to: 'ann@example.com', subject: 'Hi', text: 'Hello' });
    await waitFor('sent', () => app.events.sent.length === 1);
    const [copy] = copiesOf(mail.messageId);
    const tampered = tamper(copy.raw);
    expect(tampered).not.toBe(copy.raw);
    expect(await verified(tampered, current)).toEqual([
      expect.objectContaining({
        selector: current.selector,
        status: expect.objectContaining({ result, comment }),
      }),
    ]);
  });

  it('a key that cannot be read stops the start, naming the option and why', async () => {
    await bed.startSmtp();
    // As an environment variable often carries it: the line breaks written as \n.
    const start = signingWith({ ...current, privateKey: current.privateKey.replaceAll('\n', '\\n') });
    await expect(start).rejects.toBeInstanceOf(InvalidOptionsError);
    await expect(start).rejects.toMatchObject({
      option: 'transport.dkim.privateKey',
      reason: expect.stringMatching(/line breaks written as \\n/),
    });
  });

  it('a message the signer gives back unsigned is not sent: its recipients are deferred', async () => {
    const server = await bed.startSmtp();
    const options = resolveSmtpOptions(
      { host: '127.0.0.1', port: Number(new URL(server.url).port), secure: false, ignoreTLS: true },
      'transport',
    );
    // nodemailer's signer passes a message on unsigned when its key cannot make an rsa-sha256 signature; a key
    // checked at start cannot, so this one comes past the check.
    const { privateKey } = generateKeyPairSync('ed25519');
    const transport = new SmtpMailTransport(
      { ...options, dkim: { domainName: DOMAIN, keySelector: current.selector, privateKey } },
      1,
      'shop@example.com',
    );
    try {
      const outcome = await transport.send(
        {
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
            subject: 'Hi',
            text: 'Hello',
            headers: {},
            attachments: [],
          },
        },
        new AbortController().signal,
      );
      expect(outcome).toMatchObject({
        kind: 'attempted',
        recipients: [
          { address: 'ann@example.com', status: 'deferred', reply: expect.stringMatching(/^DKIM signing failed/) },
        ],
      });
      expect(server.sessions).toHaveLength(0);
    } finally {
      await transport.close();
    }
  });
});
