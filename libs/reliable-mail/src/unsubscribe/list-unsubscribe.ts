import type { LaneUnsubscribe } from '../options/resolve-unsubscribe.js';
import { unsubscribeToken } from './unsubscribe-token.js';

/** The headers each copy gets, which the mail's own may not set on such a lane (matched without regard to case). */
const LIST_UNSUBSCRIBE_HEADERS = new Set(['list-unsubscribe', 'list-unsubscribe-post']);

/** The link of one recipient's copy of a row's mail: the route's URL with the token signed for them. */
export function unsubscribeLink(unsubscribe: LaneUnsubscribe, rowId: string, recipient: string): string {
  const link = new URL(unsubscribe.url);
  link.searchParams.set(
    'token',
    unsubscribeToken(unsubscribe.secrets, { rowId, category: unsubscribe.category, address: recipient }),
  );
  return link.href;
}

/**
 * The headers of one recipient's copy on a non-transactional lane: the mail's own, with RFC 2369's `List-Unsubscribe`
 * holding that recipient's link and RFC 8058's `List-Unsubscribe-Post` saying that a POST to it unsubscribes at once.
 * The mail's own `List-Unsubscribe` and `List-Unsubscribe-Post` are replaced: RFC 8058 wants one of each, with one
 * HTTPS URI, and a link of the app's own would unsubscribe nobody from this lane's category.
 */
export function listUnsubscribeHeaders(
  unsubscribe: LaneUnsubscribe,
  rowId: string,
  recipient: string,
  headers: Readonly<Record<string, string>>,
): Record<string, string> {
  const own = Object.entries(headers).filter(([name]) => !LIST_UNSUBSCRIBE_HEADERS.has(name.toLowerCase()));
  return {
    ...Object.fromEntries(own),
    'List-Unsubscribe': `<${unsubscribeLink(unsubscribe, rowId, recipient)}>`,
    'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click',
  };
}
