import { describe, expect, it } from '@jest/globals';
import type { LaneUnsubscribe } from '../options/resolve-unsubscribe.js';
import { listUnsubscribeHeaders } from './list-unsubscribe.js';
import { readUnsubscribeToken } from './unsubscribe-token.js';

const rowId = '0190f0a2-1111-7000-8000-00000000000a';
const unsubscribe: LaneUnsubscribe = {
  url: 'https://example.com/webhooks/mail/unsubscribe',
  secrets: ['s'.repeat(32)],
  category: 'newsletter',
};

/** The token of the link a List-Unsubscribe header holds. */
function tokenOf(header: string): string {
  return new URL(/^<(https:\/\/[^>]+)>$/.exec(header)![1]).searchParams.get('token')!;
}

describe('listUnsubscribeHeaders: the one-click headers of one recipient’s copy', () => {
  it("hold the recipient's own link, signed for the lane's category and the row, and say a POST unsubscribes", () => {
    const headers = listUnsubscribeHeaders(unsubscribe, rowId, 'ann@example.org', {});
    expect(headers).toEqual({
      'List-Unsubscribe': expect.stringMatching(
        /^<https:\/\/example\.com\/webhooks\/mail\/unsubscribe\?token=[\w-]+>$/,
      ),
      'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click',
    });
    expect(readUnsubscribeToken(unsubscribe.secrets, tokenOf(headers['List-Unsubscribe']))).toEqual({
      rowId,
      category: 'newsletter',
      address: 'ann@example.org',
    });
  });

  it("keep the URL's own parameters and add the token", () => {
    const headers = listUnsubscribeHeaders(
      { ...unsubscribe, url: 'https://example.com/u?tenant=7' },
      rowId,
      'ann@example.org',
      {},
    );
    expect(headers['List-Unsubscribe']).toMatch(/^<https:\/\/example\.com\/u\?tenant=7&token=[\w-]+>$/);
  });

  it("replace the mail's own List-Unsubscribe and List-Unsubscribe-Post, whatever their case, and keep its other headers", () => {
    const headers = listUnsubscribeHeaders(unsubscribe, rowId, 'ann@example.org', {
      'X-Campaign': 'spring',
      'list-unsubscribe': '<mailto:unsubscribe@example.com>',
      'LIST-UNSUBSCRIBE-POST': 'List-Unsubscribe=One-Click',
      'List-Id': '<news.example.com>',
    });
    expect(Object.keys(headers)).toEqual(['X-Campaign', 'List-Id', 'List-Unsubscribe', 'List-Unsubscribe-Post']);
    expect(headers['List-Unsubscribe']).toMatch(/^<https:/);
  });
});
