import { describe, expect, it } from '@jest/globals';
import { malformedOutcome, outcomeFlaw } from './outcome-check.js';

const envelope = ['ann@example.com', 'bob@example.com'];
const accepted = (address: string) => ({
  address,
  status: 'accepted',
  replyCode: 250,
  enhancedStatus: '2.0.0',
  reply: '250 2.0.0 Ok',
  perRecipient: false,
});
const attempted = {
  kind: 'attempted',
  recipients: envelope.map(accepted),
  reply: '250 2.0.0 Ok',
  providerMessageId: null,
  slowDown: false,
};
const outage = { kind: 'outage', replyCode: 554, enhancedStatus: null, reply: '554 No SMTP service here' };
const withRecipient = (index: number, fields: Record<string, unknown>) => ({
  ...attempted,
  recipients: attempted.recipients.map((recipient, at) => (at === index ? { ...recipient, ...fields } : recipient)),
});
/** A value as a test name shows it: a string quoted, a date in ISO form. */
const shown = (value: unknown) =>
  value instanceof Date
    ? Number.isNaN(value.getTime())
      ? 'Invalid Date'
      : value.toISOString()
    : typeof value === 'string'
      ? JSON.stringify(value)
      : String(value);
const without = <T extends object>(value: T, field: keyof T) =>
  Object.fromEntries(Object.entries(value).filter(([key]) => key !== field));

describe('outcomeFlaw', () => {
  it.each<{ name: string; outcome: unknown }>([
    { name: 'an attempt', outcome: attempted },
    {
      name: 'an attempt with every optional field',
      outcome: {
        ...withRecipient(0, { providerMessageId: 're_1' }),
        providerRequestId: 'req-1',
        acceptedAt: new Date('2026-12-01T12:00:00.000Z'),
        deduplicatedByKey: true,
        stoppedAtShutdown: false,
        retryAfterMs: 3_000,
      },
    },
    { name: 'optional fields null', outcome: { ...attempted, providerRequestId: null, acceptedAt: null } },
    { name: 'a Retry-After of 0', outcome: { ...attempted, retryAfterMs: 0 } },
    { name: 'recipients in another order', outcome: { ...attempted, recipients: [...attempted.recipients].reverse() } },
    {
      name: 'a recipient with no answer',
      outcome: withRecipient(1, { status: 'unknown', replyCode: null, reply: null }),
    },
    { name: 'an outage', outcome: outage },
    {
      name: 'an outage with a request id and a Retry-After',
      outcome: { ...outage, providerRequestId: 'r', retryAfterMs: 1 },
    },
    { name: 'a field the dispatcher does not know', outcome: { ...attempted, providerTrace: { hops: 3 } } },
  ])('$name: well-formed', ({ outcome }) => {
    expect(outcomeFlaw(outcome, envelope)).toBeNull();
  });

  it.each<{ name: string; outcome: unknown; flaw: string }>([
    { name: 'undefined', outcome: undefined, flaw: 'the outcome must be an object' },
    { name: 'a string', outcome: 'sent', flaw: 'the outcome must be an object' },
    { name: 'an array', outcome: [attempted], flaw: 'the outcome must be an object' },
    { name: '{}', outcome: {}, flaw: "kind must be 'attempted' or 'outage'" },
    { name: 'an unknown kind', outcome: { ...attempted, kind: 'sent' }, flaw: "kind must be 'attempted' or 'outage'" },
    { name: 'no recipients', outcome: without(attempted, 'recipients'), flaw: 'recipients must be an array' },
    { name: 'recipients not an array', outcome: { ...attempted, recipients: {} }, flaw: 'recipients must be an array' },
    {
      name: 'a recipient left out',
      outcome: { ...attempted, recipients: attempted.recipients.slice(1) },
      flaw: "recipients leave out 1 of the attempt's 2 recipients",
    },
    {
      name: 'a recipient twice',
      outcome: { ...attempted, recipients: [accepted('ann@example.com'), accepted('ann@example.com')] },
      flaw: 'recipients[1].address is reported twice',
    },
    {
      name: 'an address not of this attempt',
      outcome: withRecipient(1, { address: 'eve@example.com' }),
      flaw: 'recipients[1].address is not a recipient of this attempt',
    },
    {
      name: 'an address in another case',
      outcome: withRecipient(0, { address: 'Ann@example.com' }),
      flaw: 'recipients[0].address is not a recipient of this attempt',
    },
    {
      name: 'a recipient that is null',
      outcome: { ...attempted, recipients: [null] },
      flaw: 'recipients[0] must be an object',
    },
    {
      name: 'a bad status',
      outcome: withRecipient(0, { status: 'ok' }),
      flaw: "recipients[0].status must be one of 'accepted', 'deferred', 'refused', 'unknown'",
    },
    ...[1e12, 25, 250.5, Number.NaN, Infinity, '250', undefined].map((replyCode) => ({
      name: `a reply code of ${shown(replyCode)}`,
      outcome: withRecipient(0, { replyCode }),
      flaw: 'recipients[0].replyCode must be a three-digit reply code or null',
    })),
    {
      name: 'a recipient reply that is not text',
      outcome: withRecipient(1, { reply: { text: '250' } }),
      flaw: 'recipients[1].reply must be a string or null',
    },
    {
      name: 'no enhanced status',
      outcome: withRecipient(1, { enhancedStatus: undefined }),
      flaw: 'recipients[1].enhancedStatus must be a string or null',
    },
    {
      name: 'perRecipient missing',
      outcome: withRecipient(0, { perRecipient: undefined }),
      flaw: 'recipients[0].perRecipient must be a boolean',
    },
    {
      name: "a recipient's provider id that is a number",
      outcome: withRecipient(0, { providerMessageId: 7 }),
      flaw: 'recipients[0].providerMessageId must be a string or null',
    },
    { name: 'a reply that is a number', outcome: { ...attempted, reply: 250 }, flaw: 'reply must be a string or null' },
    {
      name: 'no providerMessageId',
      outcome: without(attempted, 'providerMessageId'),
      flaw: 'providerMessageId must be a string or null',
    },
    {
      name: 'a providerRequestId that is an object',
      outcome: { ...attempted, providerRequestId: {} },
      flaw: 'providerRequestId must be a string or null',
    },
    ...[
      new Date(Number.NaN),
      new Date('+200000-01-01T00:00:00.000Z'),
      new Date('0000-06-01T00:00:00.000Z'),
      '2026-12-01T12:00:00.000Z',
      1_764_590_400_000,
    ].map((acceptedAt) => ({
      name: `acceptedAt ${shown(acceptedAt)}`,
      outcome: { ...attempted, acceptedAt },
      flaw: 'acceptedAt must be a valid Date within the years 1 to 9999, or null',
    })),
    { name: 'slowDown missing', outcome: without(attempted, 'slowDown'), flaw: 'slowDown must be a boolean' },
    {
      name: 'deduplicatedByKey a string',
      outcome: { ...attempted, deduplicatedByKey: 'yes' },
      flaw: 'deduplicatedByKey must be a boolean',
    },
    ...[-1, Number.NaN, Infinity, '3000', null].map((retryAfterMs) => ({
      name: `a Retry-After of ${shown(retryAfterMs)}`,
      outcome: { ...attempted, retryAfterMs },
      flaw: 'retryAfterMs must be a finite number of milliseconds >= 0',
    })),
    { name: 'an outage without a reply', outcome: without(outage, 'reply'), flaw: 'reply must be a string' },
    {
      name: 'an outage with a bad reply code',
      outcome: { ...outage, replyCode: -1 },
      flaw: 'replyCode must be a three-digit reply code or null',
    },
    {
      name: 'an outage with a negative Retry-After',
      outcome: { ...outage, retryAfterMs: -5 },
      flaw: 'retryAfterMs must be a finite number of milliseconds >= 0',
    },
  ])('$name: $flaw', ({ outcome, flaw }) => {
    expect(outcomeFlaw(outcome, envelope)).toBe(flaw);
  });
});

describe('malformedOutcome', () => {
  it('is unknown for every recipient, with the flaw as the reason, and well-formed itself', () => {
    const outcome = malformedOutcome(envelope, 'recipients must be an array');
    expect(outcome).toMatchObject({
      kind: 'attempted',
      recipients: envelope.map((address) => ({
        address,
        status: 'unknown',
        replyCode: null,
        reply: 'the transport reported a malformed outcome: recipients must be an array',
      })),
    });
    expect(outcomeFlaw(outcome, envelope)).toBeNull();
  });
});
