import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { propertyRuns } from '../../../../test/support/property-runs.js';
import { loggedReply, withoutAddresses } from './logged-reply.js';

describe('loggedReply', () => {
  it.each([
    {
      name: "Postfix's refusal naming the recipient in brackets",
      reply: '550 5.1.1 <ann@example.com>: Recipient address rejected: User unknown in virtual mailbox table',
      shown: '550 5.1.1 <[address]>: Recipient address rejected: User unknown in virtual mailbox table',
    },
    {
      name: "Exchange's, bare and at the end of a sentence",
      reply: '550 5.1.10 RESOLVER.ADR.RecipientNotFound; Recipient Ann.Lee+orders@Mail.Example.COM not found.',
      shown: '550 5.1.10 RESOLVER.ADR.RecipientNotFound; Recipient [address] not found.',
    },
    {
      name: 'a greylisting deferral naming the sender and the recipient',
      reply: '451 4.7.1 <bob@example.org>: from=<shop@example.com> greylisted, try again in 300 seconds',
      shown: '451 4.7.1 <[address]>: from=<[address]> greylisted, try again in 300 seconds',
    },
    {
      name: 'a session refused, with no address',
      reply: '421 4.3.2 Service not available, closing transmission channel',
      shown: '421 4.3.2 Service not available, closing transmission channel',
    },
    {
      name: "a provider's error quoting the address",
      reply: '422 validation_error: Invalid `to` field "ann@example"',
      shown: '422 validation_error: Invalid `to` field "[address]"',
    },
    {
      name: 'an address with an apostrophe in its local part, quoted in single quotes',
      reply: "550 5.1.1 'o'brien@example.com' unknown",
      shown: '550 5.1.1 [address] unknown',
    },
    {
      name: 'an address with braces in its local part (RFC 5322 allows them), and one in a JSON body',
      reply: '550 5.1.1 <ann{shop}@example.com>: unknown; {"rcpt":"bob@example.org"}',
      shown: '550 5.1.1 <[address]>: unknown; {"rcpt":"[address]"}',
    },
  ])('$name', ({ reply, shown }) => {
    expect(loggedReply({ replyCode: 550, enhancedStatus: '5.1.1', reply })).toEqual({
      replyCode: 550,
      enhancedStatus: '5.1.1',
      reply: shown,
    });
  });

  it('no reply text: the code and status alone', () => {
    expect(loggedReply({ replyCode: null, enhancedStatus: null, reply: null })).toEqual({
      replyCode: null,
      enhancedStatus: null,
      reply: null,
    });
  });

  it("property: no address of any form RFC 5322 allows keeps its domain, wherever it stands in a server's text", () => {
    const text = fc.string({ unit: fc.constantFrom('a', 'Z', '9', '.', '-', ' ', '\n', 'é'), maxLength: 40 });
    const delimiter = fc.constantFrom(' ', '<', '>', '"', ',', ';', ':', '(', ')', '[', ']', '\n', '\t');
    fc.assert(
      fc.property(text, delimiter, fc.emailAddress(), delimiter, text, (before, open, address, close, after) => {
        const domain = address.slice(address.lastIndexOf('@'));
        expect(withoutAddresses(`${before}${open}${address}${close}${after}`)).not.toContain(domain);
      }),
      propertyRuns('withoutAddresses'),
    );
  });
});
