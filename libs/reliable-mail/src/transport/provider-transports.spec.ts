import { describe, expect, it } from '@jest/globals';
import { InvalidOptionsError } from '../errors.js';
import { requestEnvelopes } from './http/send-in-requests.js';
import type { OutboundMessage } from './mail-transport.interface.js';
import { requestAddressing } from './outbound-content.js';
import { PostmarkMailTransport } from './postmark/postmark-mail.transport.js';
import { SesMailTransport } from './ses/ses-mail.transport.js';
import { ResendMailTransport, resendIdempotencyKey } from './resend/resend-mail.transport.js';

function message(recipients: string[], idempotencyKey = 'order-confirmation:42'): OutboundMessage {
  return {
    messageId: '<m1@test.example.com>',
    idempotencyKey,
    lane: 'default',
    recipients,
    mail: {
      from: { address: 'shop@example.com' },
      to: [{ address: 'Ann@example.com' }],
      cc: [{ address: 'bob@example.com' }],
      bcc: [],
      replyTo: [],
      subject: 'Hi',
      text: 'Hello',
      headers: {},
      attachments: [],
    },
  };
}

describe('requestAddressing: the To, Cc and Bcc of a request to an API that requires a To', () => {
  const mail = {
    ...message([]).mail,
    cc: [{ address: 'bob@example.com' }, { address: 'cy@example.com' }],
    bcc: [{ address: 'eve@example.com' }, { address: 'joe@example.com' }],
  };
  const names = (list: Array<{ address: string }>) => list.map(({ address }) => address);
  it.each([
    { recipients: ['ann@example.com', 'bob@example.com', 'eve@example.com'], to: ['Ann'], cc: ['bob'], bcc: ['eve'] },
    { recipients: ['bob@example.com', 'eve@example.com'], to: ['bob'], cc: [], bcc: ['eve'] },
    { recipients: ['joe@example.com'], to: ['joe'], cc: [], bcc: [] },
    {
      recipients: ['bob@example.com', 'cy@example.com', 'joe@example.com'],
      to: ['bob', 'cy'],
      cc: [],
      bcc: ['joe'],
    },
  ])('to $recipients: To $to, Cc $cc, Bcc $bcc', ({ recipients, to, cc, bcc }) => {
    const domain = (list: string[]) => list.map((name) => `${name}@example.com`);
    const addressing = requestAddressing(mail, recipients);
    expect({ to: names(addressing.to), cc: names(addressing.cc), bcc: names(addressing.bcc) }).toEqual({
      to: domain(to),
      cc: domain(cc),
      bcc: domain(bcc),
    });
  });

  it('throws for several Bcc recipients and nobody else, rather than show them each other or send without a To', () => {
    expect(() => requestAddressing(mail, ['eve@example.com', 'joe@example.com'])).toThrow(/each must go alone/);
  });
});

describe('resendIdempotencyKey', () => {
  it("is the row's key when the attempt goes to every recipient", () => {
    expect(resendIdempotencyKey(message(['ann@example.com', 'bob@example.com']))).toBe('order-confirmation:42');
  });

  it('is a digest of the key and the envelope when the envelope is smaller (Resend refuses a key with another body)', () => {
    const key = resendIdempotencyKey(message(['bob@example.com']));
    expect(key).toMatch(/^reliable-mail:[0-9a-f]{64}$/);
    expect(resendIdempotencyKey(message(['bob@example.com']))).toBe(key);
    expect(resendIdempotencyKey(message(['ann@example.com']))).not.toBe(key);
  });

  it('is one of its own for each request of a mail sent in several, the same when those recipients are sent to again', () => {
    const bcc = Array.from({ length: 149 }, (_, index) => ({ address: `reader${index}@example.com` }));
    const mail = { ...message([]).mail, cc: [], bcc };
    const everyone = ['ann@example.com', ...bcc.map(({ address }) => address)];
    const keyOf = (recipients: string[]) => resendIdempotencyKey({ ...message(recipients), mail });
    const limits = { limit: 50, toRequired: true };
    // Ann and 49 Bcc recipients, then the other 100 Bcc recipients one to a request: 101 keys, none the row's.
    const keys = requestEnvelopes({ mail, recipients: everyone }, limits).map(keyOf);
    expect(new Set([...keys, 'order-confirmation:42']).size).toBe(102);
    // The retry of the later requests (the first was taken) sends the same sets, in any order.
    const retry = requestEnvelopes({ mail, recipients: everyone.slice(50).reverse() }, limits).map(keyOf);
    expect(retry).toEqual(keys.slice(1));
  });

  it('is a digest when the key is longer than the 256 characters Resend takes', () => {
    const key = resendIdempotencyKey(message(['ann@example.com', 'bob@example.com'], 'k'.repeat(257)));
    expect(key).toMatch(/^reliable-mail:[0-9a-f]{64}$/);
  });
});

describe('provider transport options are checked when the transport is made', () => {
  it.each<{ name: string; make: () => unknown; option: string }>([
    { name: 'Resend without an API key', make: () => new ResendMailTransport({ apiKey: '' }), option: 'resend.apiKey' },
    {
      name: 'Resend with a base URL that is not http(s)',
      make: () => new ResendMailTransport({ apiKey: 're_1', baseUrl: 'api.resend.com' }),
      option: 'resend.baseUrl',
    },
    {
      name: 'Resend with a rate of 0 requests a second',
      make: () => new ResendMailTransport({ apiKey: 're_1', requestsPerSecond: 0 }),
      option: 'resend.requestsPerSecond',
    },
    {
      name: 'Postmark without a server token',
      make: () => new PostmarkMailTransport({ serverToken: ' ' }),
      option: 'postmark.serverToken',
    },
    {
      name: 'Postmark with an unknown option',
      make: () => new PostmarkMailTransport({ serverToken: 't', stream: 'x' } as never),
      option: 'postmark.stream',
    },
    {
      name: 'Postmark with an empty lane stream',
      make: () => new PostmarkMailTransport({ serverToken: 't', messageStreamsByLane: { bulk: '' } }),
      option: 'postmark.messageStreamsByLane.bulk',
    },
    { name: 'SES with an empty region', make: () => new SesMailTransport({ region: '' }), option: 'ses.region' },
    {
      name: 'SES with credentials missing the secret',
      make: () => new SesMailTransport({ credentials: { accessKeyId: 'a' } as never }),
      option: 'ses.credentials',
    },
    {
      name: "SES with the SDK's own retries",
      make: () => new SesMailTransport({ maxAttempts: 3 } as never),
      option: 'ses.maxAttempts',
    },
  ])('$name: InvalidOptionsError naming $option', ({ make, option }) => {
    expect(make).toThrow(InvalidOptionsError);
    expect(make).toThrow(expect.objectContaining({ option }));
  });
});
