import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { propertyRuns } from '../../../../test/support/property-runs.js';
import {
  ADDRESS_DELIMITERS,
  cutAtWord,
  cutText,
  indexableKey,
  isStorableDate,
  MAX_IDENTIFIER_BYTES,
  storableIdentifier,
  storableJson,
  storableText,
  unstorableIn,
} from './storable.js';

/** Any string of UTF-16 code units: lone surrogates and NUL included. */
const anyText = fc.string({ unit: 'binary', maxLength: 300 });

describe('the values on their way to PostgreSQL', () => {
  it.each([
    ['plain', 'plain'],
    ['a\0b', 'ab'],
    ['half \uD83D of a character', 'half \uFFFD of a character'],
    ['a whole \uD83D\uDE00', 'a whole \uD83D\uDE00'],
    ['\uDE00 first', '\uFFFD first'],
  ])('%j is stored as %j', (value, stored) => {
    expect(storableText(value)).toBe(stored);
    expect(unstorableIn(stored)).toBeNull();
  });

  it('cuts on a character boundary, never between the halves of one', () => {
    // 999 ASCII characters, then an emoji whose halves sit at code units 999 and 1000.
    const text = `${'x'.repeat(998)}\uD83D\uDE00 and more`;
    const cut = cutText(text, 1_000);
    expect(cut).toBe(`${'x'.repeat(998)}…`);
    expect(unstorableIn(cut)).toBeNull();
    expect(cutText('short', 1_000)).toBe('short');
  });

  it.each([
    [
      'a cut inside an address goes back to before it: no part of one is left for the redactions to miss',
      `${'a'.repeat(1_990)} <john.smith@example.com> more`,
      `${'a'.repeat(1_990)} <…`,
    ],
    ['a cut after a word ends is where cutText makes it', `${'a'.repeat(1_999)} more`, `${'a'.repeat(1_999)}…`],
    ['a word longer than any address is cut where it is', 'x'.repeat(5_000), `${'x'.repeat(1_999)}…`],
    [
      'a long word with an address after the cut goes whole',
      `550 see https://example.com/bounce?${'x'.repeat(1_950)}&rcpt=john.smith@example.com`,
      // ':' ends a word for the redactions too: the word with the @ starts after it.
      '550 see https:…',
    ],
    ['a word of 254 before the cut goes', `${'a'.repeat(1_745)} ${'b'.repeat(300)}`, `${'a'.repeat(1_745)} …`],
    [
      'a word of 255 before the cut is cut where it is',
      `${'a'.repeat(1_743)} ${'b'.repeat(300)}`,
      `${'a'.repeat(1_743)} ${'b'.repeat(255)}…`,
    ],
    ['a text that fits is kept whole', 'short <ann@example.com>', 'short <ann@example.com>'],
  ])('cutAtWord: %s', (_case, text, cut) => {
    expect(cutAtWord(text, 2_000)).toBe(cut);
  });

  it('keeps a key of up to 512 UTF-8 bytes as it is, and writes a longer one as its SHA-256, the same each time', () => {
    expect(indexableKey('x'.repeat(512))).toBe('x'.repeat(512));
    // 171 characters of 3 bytes each: 513 bytes.
    expect(indexableKey('€'.repeat(171))).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(indexableKey('9'.repeat(10_000))).toBe(indexableKey('9'.repeat(10_000)));
    expect(indexableKey('9'.repeat(10_000))).not.toBe(indexableKey('9'.repeat(10_001)));
  });

  it('measures a key and an identifier alike: in UTF-8 bytes, once made storable', () => {
    // A NUL is dropped before the key is measured: 512 bytes are left, kept as they are.
    expect(indexableKey(`${'x'.repeat(512)}\0`)).toBe('x'.repeat(512));
    expect(indexableKey('key-\uD800')).toBe('key-\uFFFD');
    expect(indexableKey(`${'x'.repeat(600)}\uD800`)).toBe(indexableKey(`${'x'.repeat(600)}\uFFFD`));
    // 85 characters of 3 bytes: 255 bytes, an identifier; one more is past the bound, though 86 UTF-16 units.
    expect(storableIdentifier('€'.repeat(85))).toBe('€'.repeat(85));
    expect(storableIdentifier('€'.repeat(86))).toBeNull();
    expect(storableIdentifier(`${'x'.repeat(MAX_IDENTIFIER_BYTES)}\0`)).toBe('x'.repeat(MAX_IDENTIFIER_BYTES));
  });

  it('takes the dates PostgreSQL reads back from toISOString, and no others', () => {
    expect(isStorableDate(new Date('0001-01-01T00:00:00.000Z'))).toBe(true);
    expect(isStorableDate(new Date('9999-12-31T23:59:59.999Z'))).toBe(true);
    expect(isStorableDate(new Date('0000-12-31T23:59:59.999Z'))).toBe(false);
    expect(isStorableDate(new Date('+010000-01-01T00:00:00.000Z'))).toBe(false);
    expect(isStorableDate(new Date(Number.NaN))).toBe(false);
    expect(isStorableDate('2026-01-01')).toBe(false);
  });

  it('writes out-of-range dates in JSON as null and keeps the rest', () => {
    const json = storableJson({
      at: new Date('+200000-01-01T00:00:00.000Z'),
      yearZero: new Date('0000-06-01T00:00:00.000Z'),
      ok: new Date(0),
      text: '\uD800',
    });
    expect(JSON.parse(json)).toEqual({ at: null, yearZero: null, ok: '1970-01-01T00:00:00.000Z', text: '\uFFFD' });
  });

  it.each([
    { name: 'an id', value: '0100018c-7b2e-4f7a', stored: '0100018c-7b2e-4f7a' },
    { name: 'none', value: null, stored: null },
    { name: 'undefined', value: undefined, stored: null },
    { name: 'half a character', value: 'pm-\uD83D', stored: 'pm-\uFFFD' },
    {
      name: 'as long as an id may be',
      value: 'x'.repeat(MAX_IDENTIFIER_BYTES),
      stored: 'x'.repeat(MAX_IDENTIFIER_BYTES),
    },
    { name: 'longer: no id at all', value: 'x'.repeat(MAX_IDENTIFIER_BYTES + 1), stored: null },
  ])("a peer's identifier, $name, is stored as $stored", ({ value, stored }) => {
    expect(storableIdentifier(value)).toBe(stored);
  });

  it('property: a lone surrogate is named exactly where a code unit lacks its other half', () => {
    // Halves alone, whole pairs, NUL and plain text mixed: a surrogate and its pair rarely meet in random code units.
    const part = fc.constantFrom('a', ' ', '\0', '\uD83D', '\uDE00', '\uDBFF', '\uDC00', '\uD83D\uDE00');
    /** Counts the code units a high half does not precede or a low half does not follow, one by one. */
    const loneHalves = (value: string) => {
      let lone = 0;
      for (let index = 0; index < value.length; index++) {
        const unit = value.charCodeAt(index);
        const next = value.charCodeAt(index + 1);
        if (unit >= 0xd800 && unit <= 0xdbff) {
          if (next >= 0xdc00 && next <= 0xdfff) index++;
          else lone++;
        } else if (unit >= 0xdc00 && unit <= 0xdfff) lone++;
      }
      return lone;
    };
    fc.assert(
      fc.property(fc.array(part, { maxLength: 40 }), (parts) => {
        const value = parts.join('');
        const expected = value.includes('\0')
          ? 'a NUL character'
          : loneHalves(value) > 0
            ? 'a lone UTF-16 surrogate (half of a character)'
            : null;
        expect(unstorableIn(value)).toBe(expected);
      }),
      propertyRuns('unstorableIn'),
    );
  });

  it('property: any text, made storable, is storable, and storable text is left as it is', () => {
    fc.assert(
      fc.property(anyText, (value) => {
        const stored = storableText(value);
        expect(unstorableIn(stored)).toBeNull();
        if (unstorableIn(value) === null) expect(stored).toBe(value);
      }),
      propertyRuns('storableText'),
    );
  });

  it('property: a cut is never longer than asked and never leaves half a character', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 200 }), fc.integer({ min: 2, max: 250 }), (value, max) => {
        const cut = cutText(value, max);
        if (value.length <= max) expect(cut).toBe(value);
        else expect(cut.length).toBeLessThanOrEqual(max);
        expect(unstorableIn(cut)).toBeNull();
      }),
      propertyRuns('cutText'),
    );
  });

  it('property: a cut at a word keeps a prefix within the length, leaves no half character, drops no more than the word it falls in, and keeps a part of a word only past the length of an address with no @ after the cut', () => {
    const wordEnd = new RegExp(`[${ADDRESS_DELIMITERS}]`);
    const isWordEnd = (char: string | undefined) => char !== undefined && wordEnd.test(char);
    const part = fc.oneof(
      fc.string({ unit: 'grapheme', maxLength: 40 }),
      fc.constantFrom(' ', '<', ',', '@', '{', "'"),
      // Words around an address's length (254), with and without an @, and a character of two code units.
      fc.string({ unit: fc.constantFrom('a', 'b', '@', '\u{1F600}'), minLength: 240, maxLength: 270 }),
    );
    fc.assert(
      fc.property(fc.array(part, { maxLength: 30 }), fc.integer({ min: 1, max: 600 }), (parts, max) => {
        const value = parts.join('');
        const cut = cutAtWord(value, max);
        if (value.length <= max) return expect(cut).toBe(value);
        const kept = cut.length - 1;
        expect(cut.length).toBeLessThanOrEqual(max);
        expect(cut.endsWith('…') && value.startsWith(cut.slice(0, kept))).toBe(true);
        expect(unstorableIn(cut)).toBeNull();
        // Nothing dropped before the cut but the rest of the word it falls in (or half a character).
        expect(
          value
            .slice(kept, max - 1)
            .split('')
            .some(isWordEnd),
        ).toBe(false);
        if (kept === 0 || isWordEnd(value[kept - 1]) || isWordEnd(value[kept])) return;
        // A part of a word kept: longer than any address, and no @ in the rest of the word within that length.
        let start = kept;
        while (start > 0 && !isWordEnd(value[start - 1])) start--;
        expect(kept - start).toBeGreaterThan(254);
        const after = value.slice(kept, kept + 254);
        const wordEndAt = after.search(wordEnd);
        const rest = wordEndAt < 0 ? after : after.slice(0, wordEndAt);
        expect(rest.includes('@')).toBe(false);
      }),
      propertyRuns('cutAtWord'),
    );
  });

  it('property: the JSON of any value holds nothing jsonb refuses', () => {
    const anyJson = fc.jsonValue().map((value) => value as unknown);
    const withHostileLeaves = fc.letrec((tie) => ({
      value: fc.oneof(
        { depthSize: 'small' },
        anyText,
        fc.date({ noInvalidDate: false }),
        anyJson,
        fc.array(tie('value'), { maxLength: 4 }),
        fc.dictionary(anyText, tie('value'), { maxKeys: 4 }),
      ),
    })).value;
    fc.assert(
      fc.property(withHostileLeaves, (value) => {
        const json = storableJson(value);
        if (json === undefined) return;
        expect(json).not.toMatch(/\\u(0000|d[89a-f][0-9a-f]{2})/i);
        expect(json).not.toMatch(/"([+-]\d{6}|0000)-\d\d-\d\dT/);
        expect(unstorableIn(json)).toBeNull();
      }),
      propertyRuns('storableJson'),
    );
  });
});
