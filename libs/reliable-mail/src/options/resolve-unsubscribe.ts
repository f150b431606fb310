import { InvalidOptionsError } from '../errors.js';
import { requireSecrets } from './require.js';
import type { ResolvedDkimOptions } from '../transport/smtp/dkim-options.js';
import type { LaneOptions, UnsubscribeOptions } from './reliable-mail-options.interface.js';
import type { ResolvedTransport } from './resolve-options.js';
import { CATEGORY_PATTERN } from '../unsubscribe/unsubscribe-category.js';

/** Where the one-click links point, and the keys they are signed with, newest last. */
export interface ResolvedUnsubscribe {
  url: string;
  secrets: readonly string[];
}

/** A non-transactional lane's one-click unsubscribe: what its recipients unsubscribe from, and the module's links. */
export interface LaneUnsubscribe extends ResolvedUnsubscribe {
  category: string;
}

/**
 * A link is the URL, `?token=` and up to some 470 characters of token (the longest address and category): the
 * header line stays well within RFC 5322's 998 characters.
 */
const LONGEST_URL = 400;
const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]']);
/** RFC 8058 §3.1: the DKIM signature must cover both, or receivers do not offer one-click. */
const SIGNED_HEADERS = ['list-unsubscribe', 'list-unsubscribe-post'];

/** The module's `unsubscribe`, or null when it is not given. */
export function resolveUnsubscribe(unsubscribe: UnsubscribeOptions | undefined): ResolvedUnsubscribe | null {
  if (unsubscribe === undefined) return null;
  const given: unknown = unsubscribe?.url;
  let url: URL | null = null;
  try {
    url = typeof given === 'string' && given.length <= LONGEST_URL ? new URL(given) : null;
  } catch {
    // Not a URL: refused below, with the others.
  }
  const secure = url?.protocol === 'https:' || (url?.protocol === 'http:' && LOOPBACK_HOSTS.has(url.hostname));
  if (
    !url ||
    !secure ||
    url.hash !== '' ||
    url.username !== '' ||
    url.password !== '' ||
    url.searchParams.has('token')
  ) {
    throw new InvalidOptionsError(
      'unsubscribe.url',
      `must be the public https URL of ReliableMailWebhooksModule's unsubscribe route, such as ` +
        `https://example.com/webhooks/mail/unsubscribe (RFC 8058 requires https; http only on a loopback host), ` +
        `without credentials, a fragment or a token parameter, at most ${LONGEST_URL} characters; got ${JSON.stringify(given)}`,
    );
  }
  const secrets = requireSecrets(
    'unsubscribe.secret',
    unsubscribe.secret,
    'every link carries an HMAC of its recipient and category under it, without which anyone could unsubscribe anyone',
  );
  return { url: url.href, secrets };
}

/**
 * The lane's one-click unsubscribe; null for a transactional lane. An SMTP transport whose DKIM signing would leave
 * the one-click headers unsigned is refused for a non-transactional lane.
 */
export function resolveLaneUnsubscribe(
  name: string,
  lane: Pick<LaneOptions, 'transactional' | 'category' | 'transport'>,
  unsubscribe: ResolvedUnsubscribe | null,
  transport: ResolvedTransport,
): LaneUnsubscribe | null {
  const { transactional = true, category } = lane;
  if (typeof transactional !== 'boolean') {
    throw new InvalidOptionsError(
      `lanes.${name}.transactional`,
      `must be a boolean, got ${JSON.stringify(transactional)}`,
    );
  }
  if (transactional) {
    if (category !== undefined) {
      throw new InvalidOptionsError(
        `lanes.${name}.category`,
        'is what a non-transactional lane is unsubscribed from: give it with transactional: false, or leave it out',
      );
    }
    return null;
  }
  const resolvedCategory = category ?? name;
  if (typeof resolvedCategory !== 'string' || !CATEGORY_PATTERN.test(resolvedCategory)) {
    throw new InvalidOptionsError(
      `lanes.${name}.category`,
      `must be lower-case letters, digits, _ and -, starting with a letter, at most 63, got ${JSON.stringify(category)}`,
    );
  }
  if (unsubscribe === null) {
    throw new InvalidOptionsError(
      'unsubscribe',
      `is required by lanes.${name}, which is not transactional: its mail carries one-click unsubscribe links, ` +
        'which need the URL of the unsubscribe route and the secret they are signed with',
    );
  }
  if (transport.kind === 'smtp' && transport.options.dkim) {
    const option = `${lane.transport === undefined ? '' : `lanes.${name}.`}transport.dkim`;
    requireSignedHeaders(name, transport.options.dkim, option);
  }
  return { ...unsubscribe, category: resolvedCategory };
}

function requireSignedHeaders(lane: string, { headerFieldNames, skipFields }: ResolvedDkimOptions, option: string) {
  const skipped = SIGNED_HEADERS.filter((header) => skipFields?.split(':').includes(header));
  const unlisted = SIGNED_HEADERS.filter((header) => headerFieldNames && !headerFieldNames.split(':').includes(header));
  const unsigned = skipped.length > 0 ? skipped : unlisted;
  if (unsigned.length > 0) {
    throw new InvalidOptionsError(
      `${option}.${skipped.length > 0 ? 'skipFields' : 'headerFieldNames'}`,
      `leaves ${unsigned.join(' and ')} unsigned, which lanes.${lane} (not transactional) sends: RFC 8058 one-click ` +
        'unsubscribe needs the DKIM signature to cover List-Unsubscribe and List-Unsubscribe-Post',
    );
  }
}
