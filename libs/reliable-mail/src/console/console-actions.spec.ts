import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { propertyRuns } from '../../../../test/support/property-runs.js';
import { unstorableIn } from '../database/storable.js';
import { MailValidationError } from '../errors.js';
import { CATEGORY_PATTERN } from '../unsubscribe/unsubscribe-category.js';
import { unsubscribeOf } from './console-actions.js';

describe('unsubscribeOf: the unsubscribe an operator names in a form or a link', () => {
  const anyValue = fc.anything({ withBigInt: true, withNullPrototype: true, withObjectString: true });
  // Characters PostgreSQL refuses (NUL, half a character), blanks and upper case, often enough to be drawn.
  const hostileText = fc.string({
    unit: fc.constantFrom('a', 'B', ' ', '\t', '\0', '\uD800', '\uDC00', '@'),
    maxLength: 40,
  });
  const anyText = fc.oneof(hostileText, fc.string({ unit: 'binary', maxLength: 300 }), fc.emailAddress(), anyValue);
  const anyCategory = fc.oneof(anyText, fc.stringMatching(CATEGORY_PATTERN), fc.constantFrom(' newsletter', 'News'));

  it('property: any address and category give an unsubscribe as the rows keep one, or a MailValidationError', () => {
    fc.assert(
      fc.property(fc.oneof(fc.emailAddress(), anyText), anyCategory, (address, category) => {
        let named: ReturnType<typeof unsubscribeOf>;
        try {
          named = unsubscribeOf(address, category);
        } catch (error) {
          expect(error).toBeInstanceOf(MailValidationError);
          return;
        }
        expect(named.address).toBe(named.address.toLowerCase());
        // A category as a lane names it, which the rows hold: any other would match no row.
        expect(named.category).toMatch(CATEGORY_PATTERN);
        expect([unstorableIn(named.address), unstorableIn(named.category)]).toEqual([null, null]);
      }),
      propertyRuns('unsubscribeOf'),
    );
  });
});
