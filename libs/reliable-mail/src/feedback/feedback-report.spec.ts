import { describe, expect, it } from '@jest/globals';
import { addressIn, rowOfMessageId, statusIn } from './feedback-report.js';

describe('reading reports', () => {
  it.each([
    ['<0190F0A2-1111-7000-8000-00000000000A@mail.example.com>', '0190f0a2-1111-7000-8000-00000000000a'],
    [' <0190f0a2-1111-7000-8000-00000000000a@mail.example.com> ', '0190f0a2-1111-7000-8000-00000000000a'],
    ['<0190f0a2-1111-7000-8000-00000000000a.x@mail.example.com>', null],
    ['<20261203.ABC@mx.example.org>', null],
    ['0190f0a2-1111-7000-8000-00000000000a@mail.example.com', null],
    [null, null],
  ])('the Message-ID %j names row %j', (messageId, rowId) => {
    expect(rowOfMessageId(messageId).rowId).toBe(rowId);
  });

  it.each([
    ['smtp; 550 5.1.1 <a@example.org>: user unknown', '5.1.1'],
    ['552-5.2.2 The email account is over quota', '5.2.2'],
    ['Amazon SES has suppressed sending to this address', null],
    ['version 10.5.3.2', null],
    ['Mailbox full (5.2.2).', '5.2.2'],
  ])('the status in %j is %j', (text, status) => {
    expect(statusIn(text)).toBe(status);
  });

  it.each([
    ['Ann <Ann@Example.org>', 'ann@example.org'],
    ['rfc822; ann@example.org', 'ann@example.org'],
    ['rfc822;ann@example.org', 'ann@example.org'],
    ['ann@example.org', 'ann@example.org'],
    ['ann', null],
    ['', null],
  ])('the address in %j is %j', (text, address) => {
    expect(addressIn(text)).toBe(address);
  });
});
