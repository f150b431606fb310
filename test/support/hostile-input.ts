import fc from 'fast-check';

// Arbitraries for what a peer may send: text with what PostgreSQL refuses (NUL, half of a surrogate pair) and what a
// naive cut splits (an emoji), very long text, dates JavaScript reads and PostgreSQL does not, extreme numbers, and
// JSON nested past any stack. A field of a realistic payload is now and then replaced by one of them (`orHostile`),
// so that the parsers read on past the first field and the statement gets to store what they made of it.

/** Code units that PostgreSQL refuses or that break a naive cut or parser, beside any code unit at all. */
const hostileUnit = fc.oneof(
  fc.constantFrom('\0', '\uD800', '\uDBFF', '\uDC00', '\uDFFF', '😀', '\u0301', '\uFEFF', '\r', '\n', '\\', '"'),
  fc.constantFrom('<', '>', '@', ';', ':', '(', ')', ' ', '=?', '?=', '+', '-', '.'),
  fc.integer({ min: 0, max: 0xffff }).map((code) => String.fromCharCode(code)),
  fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: 1 }),
);

/** Any text, now and then hundreds of thousands of code units long (up to 1 MB in UTF-8). */
export const hostileText: fc.Arbitrary<string> = fc.oneof(
  // Rarely long: a report has a dozen fields, and a long one in every second report would make a run slow.
  { weight: 30, arbitrary: fc.string({ unit: hostileUnit, maxLength: 40 }) },
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.string({ unit: hostileUnit, minLength: 1, maxLength: 4 }), fc.integer({ min: 300, max: 330_000 }))
      .map(([piece, length]) => piece.repeat(Math.ceil(length / piece.length)).slice(0, length)),
  },
);

/** Dates as text: ordinary ones, JavaScript's whole range (years -271821 to 275760), edges and non-dates. */
export const hostileDate: fc.Arbitrary<string> = fc.oneof(
  fc
    .date({ min: new Date('2020-01-01T00:00:00Z'), max: new Date('2030-01-01T00:00:00Z'), noInvalidDate: true })
    .map((date) => date.toISOString()),
  fc.date({ noInvalidDate: true }).map((date) => date.toISOString()),
  fc.constantFrom(
    '+200000-01-01T00:00:00Z',
    '+010000-01-01T00:00:00.000Z',
    '-000001-01-01T00:00:00Z',
    '0000-12-31T23:59:59.999Z',
    '0001-01-01T00:00:00.000Z',
    '9999-12-31T23:59:59.999Z',
    'Thu, 3 Dec 200000 10:10:10 +0000',
    'Thu, 3 Dec 2026 10:10:10 +0000 (UTC)',
    '',
  ),
  hostileText,
);

/** A piece of JSON text written as it is, where `JSON.stringify` could not write it: 1e400, 10,000 digits, deep nesting. */
export class RawJson {
  constructor(readonly text: string) {}
}

export const hostileNumber: fc.Arbitrary<number | RawJson> = fc.oneof(
  fc.double(),
  fc.constantFrom(Number.MAX_SAFE_INTEGER + 2, -0, 5e-324),
  fc
    .constantFrom('1e400', '-1e400', '4323372036854775807', '9'.repeat(10_000), '0.' + '0'.repeat(500) + '1')
    .map((text) => new RawJson(text)),
);

/** Arrays and objects nested `depth` deep, up to far past JavaScript's and PostgreSQL's stacks. */
export const deepJson: fc.Arbitrary<RawJson> = fc
  .tuple(fc.oneof(fc.integer({ min: 1, max: 100 }), fc.integer({ min: 1_000, max: 40_000 })), fc.boolean())
  .map(([depth, objects]) =>
    objects
      ? new RawJson(`${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`)
      : new RawJson(`${'['.repeat(depth)}${']'.repeat(depth)}`),
  );

/** Any JSON value a peer may put where a field was expected. */
export const hostileValue: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 4, arbitrary: hostileText },
  { weight: 1, arbitrary: hostileNumber },
  { weight: 1, arbitrary: fc.constantFrom(null, true, false) },
  { weight: 1, arbitrary: deepJson },
  { weight: 1, arbitrary: fc.array(hostileText, { maxLength: 3 }) },
  { weight: 1, arbitrary: fc.dictionary(hostileText, hostileText, { maxKeys: 3 }) },
);

/** The field as a provider sends it, now and then something else altogether, or missing (undefined). */
export function orHostile(valid: fc.Arbitrary<unknown>): fc.Arbitrary<unknown> {
  return fc.oneof(
    { weight: 6, arbitrary: valid },
    { weight: 2, arbitrary: hostileValue },
    { weight: 1, arbitrary: fc.constant(undefined) },
  );
}

/** `value` as JSON text, each `RawJson` written as it is. */
export function jsonText(value: unknown): string {
  const raw: string[] = [];
  const json = JSON.stringify(value, (_key, item: unknown) => {
    if (!(item instanceof RawJson)) return item;
    raw.push(item.text);
    return `\u0000raw${raw.length - 1}\u0000`;
  });
  return json.replace(/"\\u0000raw(\d+)\\u0000"/g, (_match, index: string) => raw[Number(index)]);
}

/** A diagnostic as servers write them, or hostile text: a status code in it makes a hard bounce more likely. */
export const diagnostic: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom('smtp; 550 5.1.1 user unknown', '552 5.2.2 Mailbox full', '250 2.0.0 Ok', '5.1.1'),
  fc.tuple(fc.constantFrom('550 5.1.1 ', 'smtp;550 5.1.1 ', ''), hostileText).map(([code, text]) => code + text),
);

/** Recipients as feedback names them: the app's, any address, or text that is none. */
export function recipient(known: string[]): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 4, arbitrary: fc.constantFrom(...known) },
    { weight: 1, arbitrary: fc.emailAddress() },
    { weight: 1, arbitrary: fc.tuple(hostileText, hostileText).map(([local, domain]) => `${local}@${domain}`) },
  );
}
