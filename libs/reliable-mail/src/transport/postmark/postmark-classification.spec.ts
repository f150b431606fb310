import { describe, expect, it } from '@jest/globals';
import { classifyPostmarkError, inactiveInAnswer, type PostmarkErrorFields } from './postmark-classification.js';

const context = { recipients: ['ann@example.com', 'bob@example.com'], fromDefaultSender: true };

describe('classifyPostmarkError: what a Postmark /email error means', () => {
  it.each<{ name: string; error: PostmarkErrorFields; networkCode?: string; expected: object }>([
    {
      name: 'RateLimitExceededError (429): deferred, the lane slows down',
      error: { name: 'RateLimitExceededError', message: 'Rate limit exceeded', code: 0, statusCode: 429 },
      expected: { status: 'deferred', slowDown: true, replyCode: 429 },
    },
    {
      name: 'InternalServerError (500): unknown, Postmark may have stored the message',
      error: { name: 'InternalServerError', message: 'Internal error', code: 0, statusCode: 500 },
      expected: { status: 'unknown', slowDown: false, replyCode: 500 },
    },
    {
      name: 'ServiceUnavailablerError (100, 503, maintenance): deferred',
      error: { name: 'ServiceUnavailablerError', message: 'Maintenance', code: 100, statusCode: 503 },
      expected: { status: 'deferred' },
    },
    {
      name: 'InvalidAPIKeyError (10, 401): an outage',
      error: { name: 'InvalidAPIKeyError', message: 'Bad or missing server token', code: 10, statusCode: 401 },
      expected: { status: 'outage', replyCode: 401 },
    },
    {
      name: 'sender signature not confirmed (401, 422) for the own sender: an outage',
      error: { name: 'ApiInputError', message: 'Sender signature not confirmed', code: 401, statusCode: 422 },
      expected: { status: 'outage', reply: '422 ApiInputError (401): Sender signature not confirmed' },
    },
    {
      name: 'sender signature not found (400, 422): an outage',
      error: { name: 'ApiInputError', message: 'Sender signature not found', code: 400, statusCode: 422 },
      expected: { status: 'outage' },
    },
    {
      name: 'not allowed to send (405, 422): an outage',
      error: { name: 'ApiInputError', message: 'Not allowed to send', code: 405, statusCode: 422 },
      expected: { status: 'outage' },
    },
    {
      name: 'account pending approval (412, 422): an outage',
      error: { name: 'ApiInputError', message: 'Account is pending', code: 412, statusCode: 422 },
      expected: { status: 'outage' },
    },
    {
      name: 'InvalidEmailRequestError (300, 422): refused',
      error: { name: 'InvalidEmailRequestError', message: 'Invalid email request', code: 300, statusCode: 422 },
      expected: { status: 'refused' },
    },
    {
      name: 'InactiveRecipientsError naming one of two: it refused, the other unknown (Postmark may have sent it)',
      error: {
        name: 'InactiveRecipientsError',
        message: 'Found inactive addresses: Bob@example.com. Inactive recipients are ones that…',
        code: 406,
        statusCode: 422,
        recipients: ['Bob@example.com'],
      },
      expected: { status: 'unknown', refusedRecipients: ['bob@example.com'] },
    },
    {
      name: 'InactiveRecipientsError for all of them: every recipient refused on its own',
      error: {
        name: 'InactiveRecipientsError',
        message: 'You tried to send to recipients that have all been marked as inactive.',
        code: 406,
        statusCode: 422,
        recipients: [],
      },
      expected: { status: 'refused', refusedRecipients: ['ann@example.com', 'bob@example.com'] },
    },
    {
      name: 'another 4xx (413 payload too large): refused',
      error: { name: 'UnknownError', message: 'Payload too large', code: 0, statusCode: 413 },
      expected: { status: 'refused' },
    },
    {
      name: 'no answer, nothing listening: deferred',
      error: { name: 'PostmarkError', message: 'fetch failed', statusCode: 0 },
      networkCode: 'ECONNREFUSED',
      expected: { status: 'deferred', replyCode: null },
    },
    {
      name: 'no answer after the request went (a drop, UND_ERR_SOCKET): unknown',
      error: { name: 'PostmarkError', message: 'fetch failed', statusCode: 0 },
      networkCode: 'UND_ERR_SOCKET',
      expected: { status: 'unknown' },
    },
    {
      name: 'no answer before the send deadline (an abort, no code): unknown',
      error: { name: 'PostmarkError', message: 'This operation was aborted', statusCode: 0 },
      expected: { status: 'unknown' },
    },
  ])('$name', ({ error, networkCode, expected }) => {
    expect(classifyPostmarkError(error, { ...context, networkCode })).toMatchObject(expected);
  });

  it('a sender signature refused for a mail with a sender of its own refuses that mail only', () => {
    const error = { name: 'ApiInputError', message: 'Sender signature not found', code: 400, statusCode: 422 };
    expect(classifyPostmarkError(error, { ...context, fromDefaultSender: false })).toMatchObject({ status: 'refused' });
  });
});

describe('inactiveInAnswer: the recipients a 200 says Postmark will not deliver to', () => {
  const recipients = ['ann@example.com', 'bob@example.com', 'carl@example.com'];
  it.each([
    { name: 'a plain OK names nobody', message: 'OK', inactive: [] },
    { name: 'no message names nobody', message: undefined, inactive: [] },
    {
      name: 'one inactive address, as Postmark words it',
      message: 'Message OK, but will not deliver to these inactive addresses: Bob@Example.com',
      inactive: ['bob@example.com'],
    },
    {
      name: 'several, comma-separated, with a closing dot and sentence',
      message:
        'Message OK, but will not deliver to these inactive addresses: carl@example.com, ann@example.com. Inactive recipients are ones that have generated a hard bounce.',
      inactive: ['ann@example.com', 'carl@example.com'],
    },
    {
      name: 'an address that is not a recipient of the request is ignored, and so is a longer one that contains one',
      message: 'Message OK, but will not deliver to these inactive addresses: zed@example.com, xbob@example.com',
      inactive: [],
    },
  ])('$name', ({ message, inactive }) => {
    expect(inactiveInAnswer(message, recipients)).toEqual(inactive);
  });
});
