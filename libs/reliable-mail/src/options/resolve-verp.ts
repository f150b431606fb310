import { InvalidOptionsError } from '../errors.js';
import { type Verp, VERP_TOKEN_LENGTH } from '../shared/verp.js';
import type { VerpOptions } from './reliable-mail-options.interface.js';
import { HOSTNAME_PATTERN, requireSecrets } from './require.js';

/** A dot-atom local part without `+`, which separates it from the token. */
const VERP_LOCAL_PART_PATTERN = /^[a-z0-9!#$%&'*/=?^_`{|}~-]+(\.[a-z0-9!#$%&'*/=?^_`{|}~-]+)*$/i;
/** RFC 5321 §4.5.3.1.1: a local part of 64 octets at most, of which `+` and the token take 43. */
const MAX_LOCAL_PART_LENGTH = 64 - 1 - VERP_TOKEN_LENGTH;

/** The VERP return path, or null when the option is not given. */
export function resolveVerp(verp: VerpOptions | undefined): Verp | null {
  if (verp === undefined) return null;
  if (!verp || typeof verp.domain !== 'string' || !HOSTNAME_PATTERN.test(verp.domain)) {
    throw new InvalidOptionsError('verp.domain', `must be a domain name, got ${JSON.stringify(verp?.domain)}`);
  }
  const { localPart = 'bounces' } = verp;
  if (
    typeof localPart !== 'string' ||
    localPart.length > MAX_LOCAL_PART_LENGTH ||
    !VERP_LOCAL_PART_PATTERN.test(localPart)
  ) {
    throw new InvalidOptionsError(
      'verp.localPart',
      `must be up to ${MAX_LOCAL_PART_LENGTH} characters of an address's local part, without "+", got ${JSON.stringify(localPart)}`,
    );
  }
  const secrets = requireSecrets(
    'verp.secret',
    verp.secret,
    'every VERP address carries an HMAC of its row and recipient under it, without which a recipient could forge a DSN that suppresses the others',
  );
  return { domain: verp.domain, localPart, secrets };
}
