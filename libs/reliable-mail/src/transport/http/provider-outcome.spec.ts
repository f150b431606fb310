import { describe, expect, it } from '@jest/globals';
import { addressedTo } from '../outbound-content.js';
import type { RenderedMail } from '../mail-transport.interface.js';
import { networkFailure, outcomeOf, verdictsOn } from './provider-outcome.js';

const request = { providerRequestId: 'req-1', deduplicatedByKey: false };

describe('networkFailure: a request without an answer', () => {
  it.each([
    { code: 'ECONNREFUSED', status: 'deferred' },
    { code: 'ENOTFOUND', status: 'deferred' },
    { code: 'UND_ERR_CONNECT_TIMEOUT', status: 'deferred' },
    { code: 'ECONNRESET', status: 'unknown' },
    { code: 'UND_ERR_SOCKET', status: 'unknown' },
    { code: null, status: 'unknown' },
  ])('$code: $status', ({ code, status }) => {
    expect(networkFailure(code, 'fetch failed')).toMatchObject({ status, replyCode: null });
  });
});

describe('networkFailure of an error whose code was lost (the AWS SDK wraps an error of another realm)', () => {
  it.each([
    { message: 'AWS SDK error wrapper for Error: connect ECONNREFUSED 127.0.0.1:4566', status: 'deferred' },
    {
      message: 'AWS SDK error wrapper for Error: getaddrinfo ENOTFOUND email.eu-west-1.amazonaws.com',
      status: 'deferred',
    },
    { message: 'AWS SDK error wrapper for Error: read ECONNRESET', status: 'unknown' },
    { message: 'AWS SDK error wrapper for Error: socket hang up', status: 'unknown' },
    { message: 'the server said connect ECONNREFUSED later', status: 'deferred' },
  ])('$message: $status', ({ message, status }) => {
    expect(networkFailure(undefined, message)).toMatchObject({ status, reply: message });
  });

  it('a code, when there is one, decides alone', () => {
    expect(networkFailure('ECONNRESET', 'connect ECONNREFUSED 127.0.0.1:4566')).toMatchObject({ status: 'unknown' });
  });
});

describe('outcomeOf', () => {
  const verdict = verdictsOn(422, '422 InactiveRecipientsError (406): …');

  it('recipients the provider named are refused alone; the others get the verdict', () => {
    const outcome = outcomeOf(
      ['ann@example.com', 'bob@example.com'],
      verdict('unknown', { refusedRecipients: ['Bob@example.com'] }),
      request,
    );
    expect(outcome).toMatchObject({
      kind: 'attempted',
      providerRequestId: 'req-1',
      recipients: [
        { address: 'ann@example.com', status: 'unknown', perRecipient: false },
        { address: 'bob@example.com', status: 'refused', perRecipient: true },
      ],
    });
  });

  it('an outage is not an attempt', () => {
    expect(outcomeOf(['ann@example.com'], verdict('outage'), request)).toEqual({
      kind: 'outage',
      replyCode: 422,
      enhancedStatus: null,
      reply: '422 InactiveRecipientsError (406): …',
      providerRequestId: 'req-1',
    });
  });

  it.each([
    { status: 'deferred' as const, retryAfterMs: 3_000 },
    { status: 'outage' as const, retryAfterMs: 3_000 },
    { status: 'refused' as const, retryAfterMs: undefined },
  ])('an answer with a Retry-After of 3 s, $status: retryAfterMs $retryAfterMs', ({ status, retryAfterMs }) => {
    const outcome = outcomeOf(['ann@example.com'], verdict(status), { ...request, retryAfterMs: 3_000 });
    expect(outcome.retryAfterMs).toBe(retryAfterMs);
  });
});

describe('addressedTo: the request names only this attempt’s envelope', () => {
  const mail: RenderedMail = {
    from: { address: 'shop@example.com' },
    to: [{ name: 'Ann', address: 'Ann@example.com' }, { address: 'carl@example.com' }],
    cc: [{ address: 'bob@example.com' }],
    bcc: [{ address: 'dora@example.com' }, { address: 'ann@example.com' }],
    replyTo: [],
    subject: 'Hi',
    headers: {},
    attachments: [],
  };

  it('keeps each recipient of the envelope once, where the mail put it first, with its name', () => {
    expect(addressedTo(mail, ['ann@example.com', 'bob@example.com', 'dora@example.com'])).toEqual({
      to: [{ name: 'Ann', address: 'Ann@example.com' }],
      cc: [{ address: 'bob@example.com' }],
      bcc: [{ address: 'dora@example.com' }],
    });
  });
});
