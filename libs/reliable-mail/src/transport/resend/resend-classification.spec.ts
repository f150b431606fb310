import { describe, expect, it } from '@jest/globals';
import { classifyResendError, type ResendErrorFields, takenByEarlierRequest } from './resend-classification.js';

describe('classifyResendError: what a Resend /emails error means', () => {
  it.each<{ name: string; error: ResendErrorFields; expected: object }>([
    {
      name: '429 rate_limit_exceeded: deferred, the lane slows down',
      error: { name: 'rate_limit_exceeded', message: 'Too many requests', statusCode: 429 },
      expected: { status: 'deferred', slowDown: true, reply: '429 rate_limit_exceeded: Too many requests' },
    },
    {
      name: '429 daily_quota_exceeded: an outage',
      error: { name: 'daily_quota_exceeded', message: 'quota', statusCode: 429 },
      expected: { status: 'outage' },
    },
    {
      name: '401 missing_api_key: an outage',
      error: { name: 'missing_api_key', message: 'Missing API key', statusCode: 401 },
      expected: { status: 'outage' },
    },
    {
      name: '401 restricted_api_key: an outage',
      error: { name: 'restricted_api_key', message: 'This key can only send', statusCode: 401 },
      expected: { status: 'outage' },
    },
    {
      name: '403 invalid_api_key: an outage',
      error: { name: 'invalid_api_key', message: 'API key is invalid', statusCode: 403 },
      expected: { status: 'outage' },
    },
    {
      name: '403 validation_error (domain not verified) for the own sender: an outage',
      error: { name: 'validation_error', message: 'The example.com domain is not verified', statusCode: 403 },
      expected: { status: 'outage' },
    },
    {
      name: '422 validation_error: refused',
      error: { name: 'validation_error', message: 'Invalid `to` field', statusCode: 422 },
      expected: { status: 'refused', replyCode: 422 },
    },
    {
      name: '422 missing_required_field: refused',
      error: { name: 'missing_required_field', message: 'Missing `subject`', statusCode: 422 },
      expected: { status: 'refused' },
    },
    {
      name: '409 concurrent_idempotent_requests: deferred (the first request is still in flight)',
      error: { name: 'concurrent_idempotent_requests', message: 'in flight', statusCode: 409 },
      expected: { status: 'deferred', slowDown: false },
    },
    {
      name: '409 invalid_idempotent_request (the key was used with another body, not by this row): refused',
      error: { name: 'invalid_idempotent_request', message: 'different payload', statusCode: 409 },
      expected: { status: 'refused' },
    },
    {
      name: '500 internal_server_error: unknown, Resend may have stored the message (the retry is deduplicated)',
      error: { name: 'internal_server_error', message: 'oops', statusCode: 500 },
      expected: { status: 'unknown', replyCode: 500 },
    },
    {
      name: '503 service_unavailable: deferred, not taken in',
      error: { name: 'service_unavailable', message: 'down', statusCode: 503 },
      expected: { status: 'deferred', replyCode: 503 },
    },
    {
      name: 'application_error without a status (any network failure): unknown, the retry is deduplicated',
      error: { name: 'application_error', message: 'Unable to fetch data.', statusCode: null },
      expected: { status: 'unknown', replyCode: null },
    },
  ])('$name', ({ error, expected }) => {
    expect(classifyResendError(error, { fromDefaultSender: true })).toMatchObject(expected);
  });

  it('403 validation_error for a mail with a sender of its own refuses that mail only', () => {
    const error = { name: 'validation_error', message: 'The other.example domain is not verified', statusCode: 403 };
    expect(classifyResendError(error, { fromDefaultSender: false })).toMatchObject({ status: 'refused' });
  });
});

describe("takenByEarlierRequest: a 409 invalid_idempotent_request is this row's own earlier request", () => {
  const reused = { name: 'invalid_idempotent_request', message: 'different payload', statusCode: 409 };
  const ann = 'ann@example.com';
  const bob = 'bob@example.com';
  it.each([
    { name: 'after an unknown attempt to these recipients: taken', error: reused, earlier: [ann, bob], taken: true },
    {
      name: 'after one to more recipients than this request: taken',
      error: reused,
      earlier: [ann, bob, 'c@x.io'],
      taken: true,
    },
    { name: 'on a first attempt (another sender used the key): not taken', error: reused, earlier: [], taken: false },
    {
      name: 'when only some of its recipients may have had it: not taken',
      error: reused,
      earlier: [ann],
      taken: false,
    },
    {
      name: 'another 409 (concurrent_idempotent_requests): not taken',
      error: { ...reused, name: 'concurrent_idempotent_requests' },
      earlier: [ann, bob],
      taken: false,
    },
    {
      name: 'invalid_idempotent_request with another status: not taken',
      error: { ...reused, statusCode: 422 },
      earlier: [ann, bob],
      taken: false,
    },
  ])('$name', ({ error, earlier, taken }) => {
    expect(takenByEarlierRequest(error, { recipients: [ann, bob], possiblyTakenBefore: earlier })).toBe(taken);
  });
});
