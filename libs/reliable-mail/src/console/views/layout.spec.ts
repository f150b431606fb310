import { describe, expect, it } from '@jest/globals';
import type { ConsolePermission } from '../console-options.js';
import { type PageContext, redacted } from './layout.js';

const pageFor = (permissions: ConsolePermission[]): PageContext => ({
  base: '/mail',
  access: { actor: 'ops', permissions },
  readOnly: false,
  csrfToken: 'token',
});

describe("the console's redaction", () => {
  it.each([
    ['a refusal naming the recipient', '550 5.1.1 <ann@example.com>: unknown', '550 5.1.1 <(address hidden)>: unknown'],
    [
      'an address with braces in its local part, at the end of a sentence',
      'bounced: ann{shop}@example.com. Next',
      'bounced: (address hidden). Next',
    ],
    ['no address', '421 4.3.2 Service not available', '421 4.3.2 Service not available'],
  ])('to who may not read content: %s', (_case, text, shown) => {
    expect(redacted(pageFor(['view']), text)).toBe(shown);
  });

  it('to who may read content: the text as it is', () => {
    expect(redacted(pageFor(['view', 'content']), 'bounced: ann{shop}@example.com.')).toBe(
      'bounced: ann{shop}@example.com.',
    );
  });
});
