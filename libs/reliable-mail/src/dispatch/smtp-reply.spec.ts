import { describe, expect, it } from '@jest/globals';
import type { DeliveryReport } from '../transport/mail-transport.interface.js';
import {
  classifyDelivery,
  classifyFailure,
  enhancedStatusOf,
  providerMessageIdOf,
  type SmtpVerdict,
} from './smtp-reply.js';

type Failure = Parameters<typeof classifyFailure>[0];

/** A nodemailer error as it reaches the dispatcher: `message` carries the reply when there is one. */
function smtpError(code: string, responseCode: number, command: string, response: string): Failure {
  return { message: response, code, responseCode, command, response };
}

/** The expected reply fields, read off the test's own reply line (independently of the parser under test). */
function reply(response: string) {
  const [, code, status = null] = /^(\d{3}) (?:(\d\.\d+\.\d+) )?/.exec(response) ?? [];
  return { replyCode: Number(code), enhancedStatus: status, reply: response };
}

const transient = (response: string, slowDown: boolean): SmtpVerdict => ({
  kind: 'transient',
  ...reply(response),
  outcomeUnknown: false,
  slowDown,
});
const permanent = (response: string, hardBounce: boolean): SmtpVerdict => ({
  kind: 'permanent',
  ...reply(response),
  hardBounce,
  bouncedRecipients: null,
});
const sender = (response: string): SmtpVerdict => ({ kind: 'sender', ...reply(response) });
const noReply = (message: string, outcomeUnknown: boolean): SmtpVerdict => ({
  kind: 'transient',
  replyCode: null,
  enhancedStatus: null,
  reply: message,
  outcomeUnknown,
  slowDown: false,
});

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
  ])('$name', ({ input, expected }) => {
    expect(providerMessageIdOf(input)).toBe(expected);
  });
});

describe('classifyDelivery', () => {
  const rejected = [{ address: 'b@example.com', reply: '550 5.1.1 User unknown', replyCode: 550 }];

  it.each<{ name: string; report: DeliveryReport; expected: SmtpVerdict }>([
    {
      name: 'Postfix queue id',
      report: { accepted: ['a@example.com'], rejected: [], response: '250 2.0.0 Ok: queued as 4BZ1x2' },
      expected: {
        kind: 'sent',
        replyCode: 250,
        enhancedStatus: '2.0.0',
        reply: '250 2.0.0 Ok: queued as 4BZ1x2',
        providerMessageId: '4BZ1x2',
        accepted: ['a@example.com'],
        rejected: [],
      },
    },
    {
      name: 'no queue id',
      report: { accepted: ['a@example.com'], rejected: [], response: '250 OK' },
      expected: {
        kind: 'sent',
        replyCode: 250,
        enhancedStatus: null,
        reply: '250 OK',
        providerMessageId: null,
        accepted: ['a@example.com'],
        rejected: [],
      },
    },
    {
      name: 'partial reject passed through',
      report: { accepted: ['a@example.com'], rejected, response: '250 2.0.0 Ok: queued as 4BZ1x2' },
      expected: {
        kind: 'sent',
        replyCode: 250,
        enhancedStatus: '2.0.0',
        reply: '250 2.0.0 Ok: queued as 4BZ1x2',
        providerMessageId: '4BZ1x2',
        accepted: ['a@example.com'],
        rejected,
      },
    },
    {
      name: 'response without a reply code',
      report: { accepted: ['a@example.com'], rejected: [], response: 'Message accepted' },
      expected: {
        kind: 'sent',
        replyCode: null,
        enhancedStatus: null,
        reply: 'Message accepted',
        providerMessageId: null,
        accepted: ['a@example.com'],
        rejected: [],
      },
    },
  ])('$name', ({ report, expected }) => {
    expect(classifyDelivery(report)).toEqual(expected);
  });
});

describe('classifyFailure', () => {
  describe('with an SMTP reply', () => {
    it.each<{ name: string; failure: Failure; expected: SmtpVerdict }>([
      {
        name: '421 on greeting',
        failure: smtpError('EPROTOCOL', 421, 'CONN', '421 4.3.2 Service not available'),
        expected: transient('421 4.3.2 Service not available', true),
      },
      {
        name: '421 on EHLO',
        failure: smtpError('ECONNECTION', 421, 'EHLO', '421 4.3.2 Shutting down'),
        expected: transient('421 4.3.2 Shutting down', true),
      },
      {
        name: '451 after the final dot',
        failure: smtpError('EMESSAGE', 451, 'DATA', '451 4.3.0 Try again later'),
        expected: transient('451 4.3.0 Try again later', false),
      },
      {
        name: '452 4.2.2 on RCPT',
        failure: smtpError('EENVELOPE', 452, 'RCPT TO', '452 4.2.2 Mailbox full'),
        expected: transient('452 4.2.2 Mailbox full', false),
      },
      {
        name: '550 5.1.1 on RCPT',
        failure: smtpError(
          'EENVELOPE',
          550,
          'RCPT TO',
          '550 5.1.1 <a@example.com>: Recipient address rejected: User unknown',
        ),
        expected: permanent('550 5.1.1 <a@example.com>: Recipient address rejected: User unknown', true),
      },
      {
        name: '550 5.1.2 bad destination system',
        failure: smtpError('EENVELOPE', 550, 'RCPT TO', '550 5.1.2 Host unknown'),
        expected: permanent('550 5.1.2 Host unknown', true),
      },
      {
        name: '550 5.1.3 bad address syntax',
        failure: smtpError('EENVELOPE', 550, 'RCPT TO', '550 5.1.3 Bad recipient address syntax'),
        expected: permanent('550 5.1.3 Bad recipient address syntax', true),
      },
      {
        name: '550 5.1.6 mailbox moved',
        failure: smtpError('EENVELOPE', 550, 'RCPT TO', '550 5.1.6 Mailbox has moved'),
        expected: permanent('550 5.1.6 Mailbox has moved', true),
      },
      {
        name: '554 5.6.0 on DATA',
        failure: smtpError('EMESSAGE', 554, 'DATA', '554 5.6.0 Message content rejected'),
        expected: permanent('554 5.6.0 Message content rejected', false),
      },
      {
        name: '552 5.2.2 mailbox full after the final dot',
        failure: smtpError('EMESSAGE', 552, 'DATA', '552 5.2.2 Mailbox full'),
        expected: transient('552 5.2.2 Mailbox full', false),
      },
      {
        name: '535 5.7.8 on AUTH',
        failure: smtpError('EAUTH', 535, 'AUTH PLAIN', '535 5.7.8 Error: authentication failed'),
        expected: sender('535 5.7.8 Error: authentication failed'),
      },
      {
        name: '530 5.7.0 authentication required',
        failure: smtpError('EENVELOPE', 530, 'MAIL FROM', '530 5.7.0 Authentication required'),
        expected: sender('530 5.7.0 Authentication required'),
      },
      {
        name: '550 5.7.1 on MAIL FROM',
        failure: smtpError('EENVELOPE', 550, 'MAIL FROM', '550 5.7.1 Sender address rejected: not owned by user'),
        expected: sender('550 5.7.1 Sender address rejected: not owned by user'),
      },
      {
        name: '550 5.7.1 on RCPT TO',
        failure: smtpError('EENVELOPE', 550, 'RCPT TO', '550 5.7.1 Relaying denied'),
        expected: permanent('550 5.7.1 Relaying denied', false),
      },
      {
        name: "554 5.7.1 after the final dot (rejected as spam): final, not the sender's configuration",
        failure: smtpError('EMESSAGE', 554, 'DATA', '554 5.7.1 Message rejected as spam'),
        expected: permanent('554 5.7.1 Message rejected as spam', false),
      },
      {
        name: '454 4.7.0 rate limited',
        failure: smtpError('EENVELOPE', 454, 'RCPT TO', '454 4.7.0 Temporary service failure'),
        expected: transient('454 4.7.0 Temporary service failure', true),
      },
      {
        name: '421 4.7.0 rate limited',
        failure: smtpError('EMESSAGE', 421, 'DATA', '421 4.7.0 Our system has detected an unusual rate of mail'),
        expected: transient('421 4.7.0 Our system has detected an unusual rate of mail', true),
      },
      {
        name: '450 with rate limit text',
        failure: smtpError('EENVELOPE', 450, 'RCPT TO', '450 rate limit exceeded'),
        expected: transient('450 rate limit exceeded', true),
      },
    ])('$name', ({ failure, expected }) => {
      expect(classifyFailure(failure)).toEqual(expected);
    });
  });

  describe('without an SMTP reply', () => {
    it.each<{ name: string; failure: Failure; expected: SmtpVerdict }>([
      {
        name: 'ECONNECTION drop after the final dot',
        failure: { message: 'Connection closed unexpectedly', code: 'ECONNECTION', command: 'CONN' },
        expected: noReply('Connection closed unexpectedly', true),
      },
      {
        name: 'ETIMEDOUT',
        failure: { message: 'Timeout', code: 'ETIMEDOUT' },
        expected: noReply('Timeout', true),
      },
      {
        name: 'ESOCKET connection refused',
        failure: {
          message: 'connect ECONNREFUSED 127.0.0.1:1',
          code: 'ESOCKET',
          errno: 'ECONNREFUSED',
          command: 'CONN',
        },
        expected: noReply('connect ECONNREFUSED 127.0.0.1:1', false),
      },
      {
        name: 'ESOCKET refused, known only from the message',
        failure: { message: 'connect ECONNREFUSED 127.0.0.1:1', code: 'ESOCKET', errno: -111 },
        expected: noReply('connect ECONNREFUSED 127.0.0.1:1', false),
      },
      {
        name: 'EDNS',
        failure: { message: 'getaddrinfo ENOTFOUND smtp.invalid', code: 'EDNS', command: 'CONN' },
        expected: noReply('getaddrinfo ENOTFOUND smtp.invalid', false),
      },
      {
        name: 'EDNS with an unrelated message',
        failure: { message: 'DNS lookup failed', code: 'EDNS' },
        expected: noReply('DNS lookup failed', false),
      },
    ])('$name', ({ failure, expected }) => {
      expect(classifyFailure(failure)).toEqual(expected);
    });
  });
});

describe('classifyFailure with per-recipient replies (every recipient refused at RCPT)', () => {
  it('names only the recipients whose own reply is a hard bounce', () => {
    const verdict = classifyFailure({
      message: "Can't send mail - all recipients were rejected",
      code: 'EENVELOPE',
      responseCode: 550,
      response: '550 5.7.1 Relaying denied',
      command: 'RCPT TO',
      rejectedErrors: [
        { recipient: 'Gone@Example.com', response: '550 5.1.1 No such user' },
        { recipient: 'blocked@example.com', response: '550 5.7.1 Relaying denied' },
      ],
    });
    expect(verdict).toEqual({
      kind: 'permanent',
      replyCode: 550,
      enhancedStatus: '5.7.1',
      reply: '550 5.7.1 Relaying denied',
      hardBounce: true,
      bouncedRecipients: ['gone@example.com'],
    });
  });
});
