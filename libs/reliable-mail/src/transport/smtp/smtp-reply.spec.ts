import { describe, expect, it } from '@jest/globals';
import {
  asksToSlowDown,
  enhancedStatusOf,
  isTooManyRecipients,
  parseReply,
  providerMessageIdOf,
  recipientStatusOf,
  replyOfError,
} from './smtp-reply.js';
import { isHardBounceStatus } from '../../shared/enhanced-status.js';

describe('enhancedStatusOf', () => {
  it.each([
    { name: 'no reply', input: undefined, expected: null },
    { name: 'empty reply', input: '', expected: null },
    { name: 'status after a space', input: '550 5.1.1 <a@example.com>: User unknown', expected: '5.1.1' },
    { name: 'status on a continuation line', input: '550-5.7.1 Blocked', expected: '5.7.1' },
    { name: 'leading whitespace', input: '  451 4.3.0 Try again', expected: '4.3.0' },
    { name: 'three-digit detail', input: '554 5.7.515 Access denied', expected: '5.7.515' },
    { name: 'success status', input: '250 2.0.0 Ok', expected: '2.0.0' },
    { name: 'no enhanced status', input: '550 User unknown', expected: null },
    { name: 'class 3 is not an enhanced status', input: '550 3.1.1 odd', expected: null },
    { name: 'detail longer than three digits', input: '550 5.1.1234 odd', expected: null },
    { name: 'status not at the start', input: 'Error: 550 5.1.1 unknown', expected: null },
  ])('$name', ({ input, expected }) => {
    expect(enhancedStatusOf(input)).toBe(expected);
  });
});

describe('providerMessageIdOf', () => {
  it.each([
    { name: 'Postfix queued as', input: '250 2.0.0 Ok: queued as 4BZ1x2', expected: '4BZ1x2' },
    { name: 'Exim id=', input: '250 OK id=1tQ2aB-000Abc-3x', expected: '1tQ2aB-000Abc-3x' },
    { name: 'hex id after Ok', input: '250 2.0.0 Ok: 0123456789ABCDEF', expected: '0123456789ABCDEF' },
    { name: 'bare 250 OK', input: '250 OK', expected: null },
    { name: 'Accepted without id', input: '250 2.0.0 Accepted', expected: null },
    { name: 'short hex word is not an id', input: '250 Ok cafe', expected: null },
    {
      name: 'Amazon SES',
      input: '250 Ok 0100018b2c6f5f3e-5f3e3b1c-2a4b-4c5d-8e9f-0a1b2c3d4e5f-000000',
      expected: '0100018b2c6f5f3e-5f3e3b1c-2a4b-4c5d-8e9f-0a1b2c3d4e5f-000000',
    },
    {
      name: 'Gmail',
      input: '250 2.0.0 OK  1700000000 d9443c01a7336-2a1b3si123plj.123 - gsmtp',
      expected: 'd9443c01a7336-2a1b3si123plj.123',
    },
    {
      name: 'an id cut by the 512 characters searched (a reply longer than a line may be): none, not a part of it',
      input: `250 2.0.0 Ok: ${'x'.repeat(484)} queued as ABCDEF123456`,
      expected: null,
    },
  ])('$name', ({ input, expected }) => {
    expect(providerMessageIdOf(input)).toBe(expected);
  });
});

describe('recipientStatusOf: what a reply means for the recipients it covers', () => {
  it.each([
    { reply: '250 2.1.5 Ok', expected: 'accepted' },
    { reply: '251 User not local; will forward', expected: 'accepted' },
    { reply: '421 4.7.0 Try again later, closing connection', expected: 'deferred' },
    { reply: '450 4.2.1 Mailbox busy', expected: 'deferred' },
    { reply: '451 4.7.1 Greylisted, see https://example.com', expected: 'deferred' },
    { reply: '452 4.2.2 Mailbox over quota', expected: 'deferred' },
    { reply: '452 4.5.3 Too many recipients', expected: 'deferred' },
    { reply: '550 5.1.1 User unknown', expected: 'refused' },
    { reply: '553 5.7.1 Sender address rejected: not owned by user', expected: 'refused' },
    { reply: '554 5.7.1 Message rejected as spam', expected: 'refused' },
    { reply: '552 5.2.2 Mailbox full (X.2.2 is transient, RFC 3463)', expected: 'deferred' },
    { reply: '503 5.5.1 Bad sequence of commands (the session, not the recipient)', expected: 'deferred' },
    { reply: 'Connection closed unexpectedly (no reply code)', expected: 'deferred' },
  ])('$reply: $expected', ({ reply, expected }) => {
    expect(recipientStatusOf(parseReply(reply))).toBe(expected);
  });
});

describe("asksToSlowDown: the lane pauses rather than spend every row's attempts", () => {
  it.each([
    { reply: '421 4.7.0 Too many connections from your IP', expected: true },
    { reply: '421 4.7.28 Our system has detected an unusual rate of mail', expected: true },
    { reply: '451 4.7.1 Rate limited, slow down', expected: true },
    { reply: '450 4.2.1 Throttling failure: daily message quota exceeded', expected: true },
    { reply: '452 4.5.3 Too many recipients', expected: false },
    { reply: '451 4.7.1 Greylisted, please try again later', expected: false },
    { reply: '451 4.3.0 Try again later', expected: false },
    { reply: '421 4.3.2 Service not available, closing channel', expected: false },
    { reply: '454 4.7.0 TLS not available due to local problem', expected: false },
    { reply: '550 5.7.1 Too many messages: rejected for good', expected: false },
  ])('$reply: $expected', ({ reply, expected }) => {
    expect(asksToSlowDown(parseReply(reply))).toBe(expected);
  });
});

describe('isTooManyRecipients: the rest go out in another transaction', () => {
  it.each([
    { reply: '452 4.5.3 Too many recipients', expected: true },
    { reply: '452 Too many recipients received this hour', expected: true },
    { reply: '452 4.2.2 Mailbox over quota', expected: false },
    { reply: '552 5.5.3 Too many recipients', expected: false },
  ])('$reply: $expected', ({ reply, expected }) => {
    expect(isTooManyRecipients(parseReply(reply))).toBe(expected);
  });
});

describe("isHardBounceStatus of a reply's enhanced status", () => {
  it.each([
    { reply: '550 5.1.1 User unknown', expected: true },
    { reply: '550 5.1.2 Bad destination domain', expected: true },
    { reply: '553 5.1.3 Bad address syntax', expected: true },
    { reply: '551 5.1.6 Mailbox has moved', expected: true },
    { reply: '550 5.7.1 Blocked', expected: false },
    { reply: '452 4.1.1 Maybe later', expected: false },
    { reply: null, expected: false },
  ])('$reply: $expected', ({ reply, expected }) => {
    expect(isHardBounceStatus(reply === null ? null : parseReply(reply).enhancedStatus)).toBe(expected);
  });
});

describe('replyOfError: what a nodemailer error says', () => {
  it.each([
    {
      name: 'a server reply',
      error: {
        code: 'EENVELOPE',
        responseCode: 550,
        response: '550 5.1.1 User unknown',
        message: 'Recipient command failed',
      },
      expected: { replyCode: 550, enhancedStatus: '5.1.1', reply: '550 5.1.1 User unknown' },
    },
    {
      name: 'no reply: the message',
      error: { code: 'ESOCKET', message: 'connect ECONNREFUSED 127.0.0.1:25' },
      expected: { replyCode: null, enhancedStatus: null, reply: 'connect ECONNREFUSED 127.0.0.1:25' },
    },
    {
      name: 'an enhanced status in a message is not a reply',
      error: { code: 'ETIMEDOUT', message: '550 5.1.1 in the text of a timeout' },
      expected: { replyCode: null, enhancedStatus: null, reply: '550 5.1.1 in the text of a timeout' },
    },
    {
      name: 'a code of more than three digits (nodemailer takes every leading digit): no reply code',
      error: { code: 'EENVELOPE', responseCode: 55_555_555_555, response: '55555555555 5.1.1 No', message: 'failed' },
      expected: { replyCode: null, enhancedStatus: null, reply: '55555555555 5.1.1 No' },
    },
  ])('$name', ({ error, expected }) => {
    expect(replyOfError(error)).toEqual(expected);
  });
});
