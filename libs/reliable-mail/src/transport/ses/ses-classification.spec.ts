import { describe, expect, it } from '@jest/globals';
import { classifySesError, type SesError } from './ses-classification.js';

const context = {
  recipients: ['ann@example.com', 'bob@example.com'],
  sender: 'shop@example.com',
  fromDefaultSender: true,
};
const status = (httpStatusCode: number) => ({ $metadata: { httpStatusCode, requestId: 'req-1' } });

describe('classifySesError: what an SES v2 SendEmail error means', () => {
  it.each<{ name: string; error: SesError; expected: object }>([
    {
      name: 'ThrottlingException (429, no class of its own): deferred, the lane slows down',
      error: { name: 'ThrottlingException', message: 'Rate exceeded', ...status(429) },
      expected: { status: 'deferred', slowDown: true, replyCode: 429, reply: '429 ThrottlingException: Rate exceeded' },
    },
    {
      name: 'TooManyRequestsException: deferred, slows down',
      error: { name: 'TooManyRequestsException', message: 'Too many requests', ...status(429) },
      expected: { status: 'deferred', slowDown: true },
    },
    {
      name: 'LimitExceededException (the daily quota, 400): an outage',
      error: { name: 'LimitExceededException', message: 'Daily message quota exceeded', ...status(400) },
      expected: { status: 'outage', replyCode: 400 },
    },
    {
      name: 'AccountSendingPausedException (the v1 name, as a generic exception): an outage',
      error: { name: 'AccountSendingPausedException', message: 'Sending paused', ...status(400) },
      expected: { status: 'outage' },
    },
    {
      name: 'SendingPausedException: an outage',
      error: { name: 'SendingPausedException', message: 'Paused for the configuration set', ...status(400) },
      expected: { status: 'outage' },
    },
    {
      name: 'AccountSuspendedException: an outage',
      error: { name: 'AccountSuspendedException', message: 'Suspended', ...status(400) },
      expected: { status: 'outage' },
    },
    {
      name: 'a configuration set that does not exist (NotFoundException): an outage',
      error: { name: 'NotFoundException', message: 'Configuration set <x> does not exist', ...status(404) },
      expected: { status: 'outage' },
    },
    {
      name: 'refused credentials (403): an outage',
      error: { name: 'UnrecognizedClientException', message: 'The security token is invalid', ...status(403) },
      expected: { status: 'outage' },
    },
    {
      name: 'no credentials at all (no HTTP status): an outage',
      error: { name: 'CredentialsProviderError', message: 'Could not load credentials from any providers' },
      expected: { status: 'outage', replyCode: null },
    },
    {
      name: 'MessageRejected: refused for good',
      error: { name: 'MessageRejected', message: 'Illegal header', ...status(400) },
      expected: { status: 'refused', refusedRecipients: [] },
    },
    {
      name: 'MessageRejected naming an unverified recipient: that one refused, the other goes again',
      error: {
        name: 'MessageRejected',
        message:
          'Email address is not verified. The following identities failed the check in region EU-WEST-1: Bob@example.com',
        ...status(400),
      },
      expected: { status: 'deferred', refusedRecipients: ['bob@example.com'] },
    },
    {
      name: "MessageRejected naming the module's own sender: an outage",
      error: {
        name: 'MessageRejected',
        message: 'Email address is not verified. The following identities failed the check: shop@example.com',
        ...status(400),
      },
      expected: { status: 'outage' },
    },
    {
      name: 'MailFromDomainNotVerifiedException for the own sender: an outage',
      error: { name: 'MailFromDomainNotVerifiedException', message: 'not verified', ...status(400) },
      expected: { status: 'outage' },
    },
    {
      name: 'InternalFailure (500): unknown, SES may have stored the message',
      error: { name: 'InternalFailure', message: 'internal error', ...status(500) },
      expected: { status: 'unknown', slowDown: false, replyCode: 500 },
    },
    ...[502, 504].map((code) => ({
      name: `a gateway's ${code}: unknown, its backend may have taken the message`,
      error: { name: 'UnknownError', message: 'gateway', ...status(code) },
      expected: { status: 'unknown', replyCode: code },
    })),
    {
      name: 'ServiceUnavailable (503): deferred',
      error: { name: 'ServiceUnavailable', message: 'unavailable', ...status(503) },
      expected: { status: 'deferred' },
    },
    {
      name: 'another 400 (BadRequestException): refused',
      error: { name: 'BadRequestException', message: 'bad', ...status(400) },
      expected: { status: 'refused' },
    },
    {
      name: 'nothing listening (ECONNREFUSED): deferred, the request never left',
      error: { name: 'Error', message: 'connect ECONNREFUSED 127.0.0.1:1', code: 'ECONNREFUSED' },
      expected: { status: 'deferred', replyCode: null },
    },
    {
      name: 'the connection dropped mid-request (TimeoutError, ECONNRESET): unknown',
      error: { name: 'TimeoutError', message: 'socket hang up', code: 'ECONNRESET' },
      expected: { status: 'unknown', replyCode: null, reply: 'TimeoutError: socket hang up (ECONNRESET)' },
    },
    {
      name: 'the send deadline cut the request (AbortError): unknown',
      error: { name: 'AbortError', message: 'Request aborted' },
      expected: { status: 'unknown' },
    },
  ])('$name', ({ error, expected }) => {
    expect(classifySesError(error, context)).toMatchObject(expected);
  });

  it('a sender refusal for a mail with a sender of its own refuses that mail only', () => {
    const error = { name: 'MailFromDomainNotVerifiedException', message: 'not verified', ...status(400) };
    expect(classifySesError(error, { ...context, fromDefaultSender: false })).toMatchObject({ status: 'refused' });
  });
});
