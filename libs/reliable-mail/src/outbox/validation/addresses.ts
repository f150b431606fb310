import { MailValidationError } from '../../errors.js';
import type { MailAddress } from '../../transport/mail-transport.interface.js';
import type { MailAddressInput } from '../mail.types.js';
import { LINE_BREAK_OR_NUL } from '../../shared/characters.js';
import { checkStorable } from './json.js';

// A deliberately plain addr-spec check: one @, no spaces or brackets, a dotted domain. Exotic quoted local parts
// are refused rather than risked, since a bad address would only fail later at the SMTP server.
const ADDRESS_PATTERN = /^[^\s@<>()[\]\\,;:"]+@[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)+$/i;
// RFC 5321 4.5.3.1.3: a path is at most 256 octets with its angle brackets. No server takes a longer address, and
// the suppression list's primary key could not index one of some kilobytes (a btree entry holds at most 2,704 bytes).
const MAX_ADDRESS_OCTETS = 254;

export function parseAddress(field: string, input: MailAddressInput): MailAddress {
  let name: string | undefined;
  let address: string;
  if (typeof input === 'string') {
    const named = splitNamedAddress(input);
    name = named?.name.trim() || undefined;
    address = (named ? named.address : input).trim();
  } else if (input && typeof input === 'object' && typeof input.address === 'string') {
    name = input.name?.trim() || undefined;
    address = input.address.trim();
  } else {
    throw new MailValidationError(field, 'must be an email address or { name, address }');
  }
  checkStorable(field, address);
  if (!ADDRESS_PATTERN.test(address)) {
    throw new MailValidationError(field, `is not a valid email address: ${JSON.stringify(address)}`);
  }
  if (Buffer.byteLength(address) > MAX_ADDRESS_OCTETS) {
    throw new MailValidationError(field, `is longer than the ${MAX_ADDRESS_OCTETS} octets an email address may have`);
  }
  if (name !== undefined && LINE_BREAK_OR_NUL.test(name)) {
    throw new MailValidationError(field, 'has a display name with a line break');
  }
  if (name !== undefined) checkStorable(field, name);
  return name === undefined ? { address } : { name, address };
}

/**
 * `Name <address>` or `"Name" <address>` split into its parts; null for anything else (a bare address). Read by
 * index, not by a regular expression: the pattern it replaced (`^\s*"?([^"<]*?)"?\s*<([^<>]+)>\s*$`), which this
 * accepts exactly, backtracked in cubic time over whitespace with no `<` after it: 4,000 tabs before an address held
 * the event loop for 9.6 s, a million (a property test's input) for ever.
 */
export function splitNamedAddress(input: string): { name: string; address: string } | null {
  // trim() removes exactly what \s matches.
  const text = input.trim();
  const open = text.indexOf('<');
  if (!text.endsWith('>') || open < 0 || text.indexOf('<', open + 1) >= 0) return null;
  const address = text.slice(open + 1, -1);
  if (address.length === 0 || address.includes('>')) return null;
  // The name may sit in quotes, with whitespace between the closing one and the `<`; no quote within it.
  let name = text.slice(0, open).trimEnd();
  if (name.startsWith('"')) name = name.slice(1);
  if (name.endsWith('"')) name = name.slice(0, -1);
  return name.includes('"') ? null : { name, address };
}

export function parseAddressList(
  field: string,
  input: MailAddressInput | MailAddressInput[] | undefined,
): MailAddress[] {
  if (input === undefined || input === null) {
    return [];
  }
  const list = Array.isArray(input) ? input : [input];
  return list.map((item, index) => parseAddress(Array.isArray(input) ? `${field}[${index}]` : field, item));
}

/** A bare address, checked and in lower case, as the suppression list keeps it. */
export function normalizeAddress(field: string, input: string): string {
  return parseAddress(field, input).address.toLowerCase();
}
