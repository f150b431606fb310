import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { propertyRuns } from '../../../../test/support/property-runs.js';
import { storableIdentifier, storableJson } from '../database/storable.js';
import { isEnhancedStatus } from '../shared/enhanced-status.js';
import { MAX_REPLY_LENGTH } from '../shared/logged-reply.js';
import { TRANSPORT_NAME_PATTERN } from '../transport/failover/failover-transport.js';
import { malformedOutcome, readOutcome } from './outcome-check.js';

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
/** `base` with `fields` as they are defined: a getter stays a getter, not read until the check reads it. */
const withFields = (base: object, fields: object): Record<string, unknown> =>
  Object.defineProperties({ ...base }, Object.getOwnPropertyDescriptors(fields));
const withRecipient = (index: number, fields: object) => ({
  ...attempted,
  recipients: attempted.recipients.map((recipient, at) => (at === index ? withFields(recipient, fields) : recipient)),
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

function revokedProxy(): object {
  const { proxy, revoke } = Proxy.revocable({}, {});
  revoke();
  return proxy;
}

describe('readOutcome', () => {
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
  ])('$name: well-formed, copied as it is', ({ outcome }) => {
    const read = readOutcome(outcome, envelope);
    expect(read).toEqual({ outcome, flaw: null, dropped: [] });
    expect(read.outcome).not.toBe(outcome);
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
    { name: 'a reply that is a number', outcome: { ...attempted, reply: 250 }, flaw: 'reply must be a string or null' },
    {
      name: 'no providerMessageId',
      outcome: without(attempted, 'providerMessageId'),
      flaw: 'providerMessageId must be a string or null',
    },
    { name: 'slowDown missing', outcome: without(attempted, 'slowDown'), flaw: 'slowDown must be a boolean' },
    {
      name: 'deduplicatedByKey a string',
      outcome: { ...attempted, deduplicatedByKey: 'yes' },
      flaw: 'deduplicatedByKey must be a boolean',
    },
    { name: 'an outage without a reply', outcome: without(outage, 'reply'), flaw: 'reply must be a string' },
    {
      name: 'an outage with a bad reply code',
      outcome: { ...outage, replyCode: -1 },
      flaw: 'replyCode must be a three-digit reply code or null',
    },
    {
      name: 'more entries than recipients',
      outcome: { ...attempted, recipients: [...attempted.recipients, accepted('eve@example.com')] },
      flaw: "recipients report 3 entries for the attempt's 2 recipients",
    },
    {
      name: 'an outcome whose kind throws when it is read',
      outcome: {
        get kind(): never {
          throw new Error('the partner SDK broke');
        },
      },
      flaw: 'reading the outcome threw: Error: the partner SDK broke',
    },
    {
      name: 'a recipient whose status throws when it is read',
      outcome: withRecipient(1, {
        get status(): never {
          throw new TypeError('no status');
        },
      }),
      flaw: 'reading the outcome threw: TypeError: no status',
    },
    {
      name: 'a revoked Proxy',
      outcome: revokedProxy(),
      flaw: "reading the outcome threw: TypeError: Cannot perform 'IsArray' on a proxy that has been revoked",
    },
    {
      name: 'a throw that cannot be shown as text',
      outcome: {
        get kind(): never {
          // eslint-disable-next-line @typescript-eslint/only-throw-error -- what a careless SDK may throw
          throw {
            toString() {
              throw new Error('nor this');
            },
          };
        },
      },
      flaw: 'reading the outcome threw: a value that cannot be shown as text',
    },
  ])('$name: $flaw', ({ outcome, flaw }) => {
    expect(readOutcome(outcome, envelope)).toEqual({
      outcome: malformedOutcome(envelope, flaw),
      flaw,
      dropped: [],
    });
  });

  /** Facts the provider reported about the request: a wrong one is left out, and the recipients' verdict stands. */
  it.each<{ name: string; outcome: Record<string, unknown>; field: string; dropped: string }>([
    ...[
      new Date(Number.NaN),
      new Date('+200000-01-01T00:00:00.000Z'),
      new Date('0000-06-01T00:00:00.000Z'),
      '2026-12-01T12:00:00.000Z',
      1_764_590_400_000,
    ].map((acceptedAt) => ({
      name: `acceptedAt ${shown(acceptedAt)}`,
      outcome: { ...attempted, acceptedAt },
      field: 'acceptedAt',
      dropped: 'acceptedAt must be a valid Date within the years 1 to 9999, or null',
    })),
    {
      name: 'a providerRequestId that is an object',
      outcome: { ...attempted, providerRequestId: {} },
      field: 'providerRequestId',
      dropped: 'providerRequestId must be a string or null',
    },
    ...[-1, Number.NaN, Infinity, '3000', null].map((retryAfterMs) => ({
      name: `a Retry-After of ${shown(retryAfterMs)}`,
      outcome: { ...attempted, retryAfterMs },
      field: 'retryAfterMs',
      dropped: 'retryAfterMs must be a finite number of milliseconds >= 0',
    })),
    ...['x'.repeat(65), 'mail relay', ''].map((transport) => ({
      name: `a transport name FailoverTransport could not have given (${transport.length} characters)`,
      outcome: { ...attempted, transport },
      field: 'transport',
      dropped: `transport must be a name such as FailoverTransport gives (${TRANSPORT_NAME_PATTERN.source})`,
    })),
    {
      name: 'an outage with a negative Retry-After',
      outcome: { ...outage, retryAfterMs: -5 },
      field: 'retryAfterMs',
      dropped: 'retryAfterMs must be a finite number of milliseconds >= 0',
    },
  ])('$name: left out ($dropped), the rest kept', ({ outcome, field, dropped }) => {
    const { [field]: _left, ...kept } = outcome;
    expect(readOutcome(outcome, envelope)).toEqual({ outcome: kept, flaw: null, dropped: [dropped] });
    expect(readOutcome(outcome, envelope).outcome).not.toHaveProperty(field);
  });

  it('keeps no enhanced status that is none (RFC 3463), and no provider id too long to look up', () => {
    const long = { enhancedStatus: `5.1.1 ${'x'.repeat(100_000)}`, providerMessageId: 'y'.repeat(100_000) };
    const ids = { providerMessageId: 'y'.repeat(100_000), providerRequestId: 'z'.repeat(100_000) };
    const read = readOutcome({ ...withRecipient(1, long), ...ids }, envelope);
    expect(read.flaw).toBeNull();
    expect(read.outcome).toMatchObject({ providerMessageId: null, providerRequestId: null });
    expect(read.outcome.kind === 'attempted' && read.outcome.recipients[1]).toMatchObject({
      enhancedStatus: null,
      providerMessageId: null,
    });
    const down = readOutcome({ ...outage, enhancedStatus: '4.7.0 '.repeat(10) }, envelope).outcome;
    expect(down.kind === 'outage' && down.enhancedStatus).toBeNull();
    expect(readOutcome(withRecipient(1, { enhancedStatus: '5.999.999' }), envelope).outcome).toEqual(
      withRecipient(1, { enhancedStatus: '5.999.999' }),
    );
    for (const none of ['hello', '5.1.1 ', '9.1.1', '5.1'])
      expect(readOutcome(withRecipient(1, { enhancedStatus: none }), envelope).outcome).toEqual(
        withRecipient(1, { enhancedStatus: null }),
      );
  });

  it("a recipient's provider id that is a number: left out of that recipient, whose verdict stands", () => {
    const read = readOutcome(withRecipient(0, { providerMessageId: 7 }), envelope);
    expect(read).toEqual({
      outcome: attempted,
      flaw: null,
      dropped: ['recipients[0].providerMessageId must be a string or null'],
    });
    expect(read.outcome.kind === 'attempted' && read.outcome.recipients[0]).not.toHaveProperty('providerMessageId');
  });
});

describe('readOutcome copies only the fields of a SendOutcome', () => {
  const circular: Record<string, unknown> = {};
  circular.self = circular;
  const unserialisable = {
    big: 10n,
    circular,
    toJSON: () => {
      throw new Error('not JSON');
    },
    get trace(): never {
      throw new Error('never read');
    },
  };

  it('leaves out what a transport adds, to the outcome and to each recipient: what is stored is only what is known', () => {
    const read = readOutcome(withFields(withRecipient(1, unserialisable), unserialisable), envelope);
    expect(read).toEqual({ outcome: attempted, flaw: null, dropped: [] });
    expect(() => JSON.stringify(read.outcome)).not.toThrow();
  });

  it('keeps heldBack, which makes the attempt uncharged: a transport that held its send back is not charged for it', () => {
    const held = { ...attempted, heldBack: true, retryAfterMs: 8_000 };
    expect(readOutcome(held, envelope)).toEqual({ outcome: held, flaw: null, dropped: [] });
  });

  it("bounds a custom transport's Retry-After to an hour, as a provider's header is: a lane is never paused for years", () => {
    const read = readOutcome({ ...attempted, retryAfterMs: 1e12 }, envelope);
    expect(read.outcome).toMatchObject({ retryAfterMs: 3_600_000 });
  });

  it('cuts a reply of a million characters to 2,000, of the outcome, of each recipient and of an outage', () => {
    // Lengths compared, not the strings: a failure would print a million characters.
    const long = `250 2.0.0 ${'x'.repeat(1_000_000)}`;
    const read = readOutcome({ ...withRecipient(1, { reply: long }), reply: long }, envelope).outcome;
    expect(read.kind === 'attempted' && [read.reply?.length, ...read.recipients.map((r) => r.reply?.length)]).toEqual([
      MAX_REPLY_LENGTH,
      attempted.recipients[0].reply.length,
      MAX_REPLY_LENGTH,
    ]);
    expect(read.kind === 'attempted' && read.reply?.startsWith('250 2.0.0 xxx') && read.reply.endsWith('…')).toBe(true);
    const down = readOutcome({ ...outage, reply: `554 ${'y'.repeat(1_000_000)}` }, envelope).outcome;
    expect(down.kind === 'outage' && down.reply.length).toBe(MAX_REPLY_LENGTH);
  });

  it('reads each field once: the value checked is the value kept', () => {
    let reads = 0;
    const changing = withRecipient(0, {
      get status() {
        reads += 1;
        return reads === 1 ? 'accepted' : 'sent';
      },
    });
    const read = readOutcome(changing, envelope);
    expect(read.flaw).toBeNull();
    expect(read.outcome.kind === 'attempted' && read.outcome.recipients[0].status).toBe('accepted');
    expect(reads).toBe(1);
  });

  it('keeps an accept time as a plain Date: a subclass with its own toJSON stays behind', () => {
    class HostileDate extends Date {
      override toJSON(): string {
        throw new Error('not JSON');
      }
    }
    const at = new HostileDate('2026-12-01T12:00:00.000Z');
    const read = readOutcome({ ...attempted, acceptedAt: at }, envelope);
    expect(read.flaw).toBeNull();
    const kept = read.outcome.kind === 'attempted' ? read.outcome.acceptedAt : undefined;
    expect(Object.getPrototypeOf(kept)).toBe(Date.prototype);
    expect(JSON.stringify(kept)).toBe('"2026-12-01T12:00:00.000Z"');
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
    expect(readOutcome(outcome, envelope)).toEqual({ outcome, flaw: null, dropped: [] });
  });
});

describe('readOutcome of any value', () => {
  const anyValue = fc.anything({ withBigInt: true, withDate: true, withMap: true, withNullPrototype: true });
  /** Text of any length around the bounds, or any value where text belongs. */
  const anyText = fc.oneof(fc.string({ unit: 'binary', maxLength: 3_000 }), anyValue);
  const anyRecipient = fc.record(
    {
      address: fc.oneof(fc.constantFrom(...envelope), anyValue),
      status: fc.oneof(fc.constantFrom('accepted', 'deferred', 'refused', 'unknown'), anyValue),
      replyCode: fc.oneof(fc.constantFrom(250, 451, 550, null), anyValue),
      enhancedStatus: anyText,
      reply: anyText,
      perRecipient: fc.oneof(fc.boolean(), anyValue),
      providerMessageId: anyText,
    },
    { requiredKeys: [] },
  );
  const anyOutcome = fc.oneof(
    anyValue,
    fc.record(
      {
        kind: fc.oneof(fc.constantFrom('attempted', 'outage'), anyValue),
        recipients: fc.oneof(fc.array(anyRecipient, { maxLength: 3 }), anyValue),
        replyCode: fc.oneof(fc.constantFrom(421, 554, null), anyValue),
        enhancedStatus: anyText,
        reply: anyText,
        providerMessageId: anyText,
        providerRequestId: anyText,
        acceptedAt: anyValue,
        slowDown: fc.oneof(fc.boolean(), anyValue),
        retryAfterMs: anyValue,
        transport: anyText,
      },
      { requiredKeys: [] },
    ),
  );

  it('property: never throws, and what it keeps writes as storable JSON, every reply within its bound, every status, provider id and transport name one that can be stored and looked up', () => {
    fc.assert(
      fc.property(anyOutcome, (value) => {
        const { outcome, flaw } = readOutcome(value, envelope);
        expect(flaw === null || typeof flaw === 'string').toBe(true);
        expect(() => storableJson(outcome)).not.toThrow();
        const texts = outcome.kind === 'outage' ? [outcome] : [outcome, ...outcome.recipients];
        for (const { reply } of texts) expect((reply ?? '').length).toBeLessThanOrEqual(MAX_REPLY_LENGTH);
        for (const item of texts)
          if ('enhancedStatus' in item && typeof item.enhancedStatus === 'string')
            expect(isEnhancedStatus(item.enhancedStatus)).toBe(true);
        const ids = [
          ...(outcome.kind === 'attempted' ? [outcome, ...outcome.recipients] : []).map(
            (item) => item.providerMessageId,
          ),
          outcome.providerRequestId,
        ];
        for (const id of ids) if (typeof id === 'string') expect(storableIdentifier(id)).toBe(id);
        if (outcome.transport !== undefined) expect(outcome.transport).toMatch(TRANSPORT_NAME_PATTERN);
      }),
      propertyRuns('readOutcome of any value'),
    );
  });
});
