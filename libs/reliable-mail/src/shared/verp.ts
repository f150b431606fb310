// Variable envelope return paths: the SMTP envelope sender of every recipient's copy of a mail names its outbox
// row and carries an HMAC of (row, recipient), so a DSN (a bounce email, sent to that address) says which row it is
// about even when it quotes nothing of the original message, and proves which recipient it may speak for. Every
// recipient, Bcc included, sees its own return path: without the HMAC, one of them could forge a DSN about another.

import { createHmac, timingSafeEqual } from 'node:crypto';
import { isUuid } from './uuid.js';

export interface Verp {
  /** The domain whose mailbox receives the DSNs. */
  domain: string;
  /** What comes before `+<token>`. */
  localPart: string;
  /** The keys of the tokens, newest last: an address is signed with the newest, and verifies with any. */
  secrets: readonly string[];
}

/** RFC 4648 base32, lower case: it reads the same when a server lower-cases the local part, as some do. */
const BASE32 = 'abcdefghijklmnopqrstuvwxyz234567';
/** A row id's 16 bytes take 26 characters (130 bits, the last 2 zero), the MAC's 10 bytes (80 bits) 16. */
const ROW_ID_CHARACTERS = 26;
const MAC_BYTES = 10;
/** The token after `+`: 42 characters, so that with the `+` a local part of 21 characters fits the 64 of RFC 5321. */
export const VERP_TOKEN_LENGTH = ROW_ID_CHARACTERS + (MAC_BYTES * 8) / 5;
const TOKEN_PATTERN = new RegExp(`^[a-z2-7]{${VERP_TOKEN_LENGTH}}$`);
/** Keeps these MACs apart from anything else the app signs with the same secret. */
const MAC_CONTEXT = 'reliable-mail VERP 1';

/** The envelope sender of one recipient's copy of a row's mail: `<localPart>+<row id><MAC>@<domain>`. */
export function verpAddress(verp: Verp, rowId: string, recipient: string): string {
  const token = base32(Buffer.from(rowId.replaceAll('-', ''), 'hex')) + macOf(verp.secrets.at(-1)!, rowId, recipient);
  return `${verp.localPart}+${token}@${verp.domain}`;
}

/** What a VERP address of this module names. */
export interface VerpReturnPath {
  rowId: string;
  /** The token's MAC; null for an address of the form before tokens (`+<row id>`), which proves nothing. */
  mac: string | null;
}

/** The row (and MAC) a VERP address names, or null when the address is not one of this module's. */
export function readVerpAddress({ localPart, domain }: Verp, address: string): VerpReturnPath | null {
  const at = address.lastIndexOf('@');
  if (at < 0 || address.slice(at + 1).toLowerCase() !== domain.toLowerCase()) return null;
  const prefix = `${localPart.toLowerCase()}+`;
  const local = address.slice(0, at).toLowerCase();
  if (!local.startsWith(prefix)) return null;
  const token = local.slice(prefix.length);
  // Rows sent before per-recipient tokens: still linked, never authenticated.
  if (isUuid(token)) return { rowId: token, mac: null };
  if (!TOKEN_PATTERN.test(token)) return null;
  const rowId = fromBase32(token.slice(0, ROW_ID_CHARACTERS));
  return rowId === null ? null : { rowId, mac: token.slice(ROW_ID_CHARACTERS) };
}

/** Whether the address was made for `recipient` (lower case) of its row, under any of the secrets. */
export function verpCovers(verp: Verp, path: VerpReturnPath, recipient: string): boolean {
  if (path.mac === null) return false;
  const given = Buffer.from(path.mac);
  return verp.secrets.some((secret) => timingSafeEqual(Buffer.from(macOf(secret, path.rowId, recipient)), given));
}

function macOf(secret: string, rowId: string, recipient: string): string {
  const mac = createHmac('sha256', secret).update(`${MAC_CONTEXT}\n${rowId.toLowerCase()}\n${recipient}`).digest();
  return base32(mac.subarray(0, MAC_BYTES));
}

function base32(bytes: Buffer): string {
  let text = '';
  let bits = 0;
  let value = 0;
  for (const byte of bytes) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      bits -= 5;
      text += BASE32[(value >>> bits) & 31];
    }
    value &= (1 << bits) - 1;
  }
  return bits > 0 ? text + BASE32[(value << (5 - bits)) & 31] : text;
}

/** The row id of its 26 base32 characters, as a UUID; null when its last 2 bits are not the zeros base32 pads with. */
function fromBase32(text: string): string | null {
  let bits = 0;
  let value = 0;
  let hex = '';
  for (const character of text) {
    value = (value << 5) | BASE32.indexOf(character);
    bits += 5;
    if (bits >= 8) {
      bits -= 8;
      hex += ((value >>> bits) & 255).toString(16).padStart(2, '0');
      value &= (1 << bits) - 1;
    }
  }
  if (value !== 0) return null;
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
