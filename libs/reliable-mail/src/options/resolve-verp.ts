import { InvalidOptionsError } from '../errors.js';
import type { Verp } from '../shared/verp.js';
import type { VerpOptions } from './reliable-mail-options.interface.js';
import { HOSTNAME_PATTERN } from './require.js';

/** A dot-atom local part without `+`, which separates it from the row id. */
const VERP_LOCAL_PART_PATTERN = /^[a-z0-9!#$%&'*/=?^_`{|}~-]+(\.[a-z0-9!#$%&'*/=?^_`{|}~-]+)*$/i;

/** The VERP return path, or null when the option is not given. */
export function resolveVerp(verp: VerpOptions | undefined): Verp | null {
  if (verp === undefined) return null;
  if (!verp || typeof verp.domain !== 'string' || !HOSTNAME_PATTERN.test(verp.domain)) {
    throw new InvalidOptionsError('verp.domain', `must be a domain name, got ${JSON.stringify(verp?.domain)}`);
  }
  const { localPart = 'bounces' } = verp;
  // The row id takes 37 characters of the 64 a local part may have.
  if (typeof localPart !== 'string' || localPart.length > 26 || !VERP_LOCAL_PART_PATTERN.test(localPart)) {
    throw new InvalidOptionsError(
      'verp.localPart',
      `must be up to 26 characters of an address's local part, without "+", got ${JSON.stringify(localPart)}`,
    );
  }
  return { domain: verp.domain, localPart };
}
