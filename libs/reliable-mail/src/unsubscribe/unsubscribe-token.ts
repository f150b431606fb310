// The token of a one-click unsubscribe link (RFC 8058): everything the route needs to act is in it, since a mailbox
// provider posts the link as it is, with no cookie and no login, long after the mail's row may have been deleted.
// It names the recipient (lower case), the category and the row of the mail it came in, under an HMAC of all three:
// a token for one address or category never verifies for another, so a recipient can unsubscribe nobody else.

import { createHmac, timingSafeEqual } from 'node:crypto';
import { ReliableMailError } from '../errors.js';
import { isUuid } from '../shared/uuid.js';

/** What a link unsubscribes: a recipient from a category, through the link of one mail. */
export interface UnsubscribeRequest {
  /** The row of the mail whose link it is. */
  rowId: string;
  category: string;
  /** Lower case, as the envelope has it. */
  address: string;
}

/** A token that is not one of this app's links, or not any more: nothing was written. Answered 400. */
export class UnsubscribeTokenError extends ReliableMailError {
  constructor(readonly reason: string) {
    super(`Unsubscribe link refused: ${reason}`);
  }
}

const ROW_ID_BYTES = 16;
/** 128 bits of HMAC-SHA256: a forger's chance is 2^-128 a try. */
const MAC_BYTES = 16;
const HEADER_BYTES = ROW_ID_BYTES + MAC_BYTES;
/** The longest category (63) and address (254), a newline, and the row id and MAC, in base64url, with room. */
const LONGEST_TOKEN = 1_000;
const BASE64URL = /^[A-Za-z0-9_-]+$/;
/** Keeps these MACs apart from anything else the app signs with the same secret. */
const MAC_CONTEXT = 'reliable-mail unsubscribe 1\n';
const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * The token for `request`, signed with the newest secret (the last): base64url of the row id's 16 bytes, the MAC's
 * 16 and `<category>\n<address>` in UTF-8.
 */
export function unsubscribeToken(secrets: readonly string[], { rowId, category, address }: UnsubscribeRequest): string {
  if (!isUuid(rowId)) throw new TypeError(`a row id is a UUID, got ${JSON.stringify(rowId)}`);
  const row = Buffer.from(rowId.replaceAll('-', ''), 'hex');
  const named = Buffer.from(`${category}\n${address}`, 'utf8');
  return Buffer.concat([row, macOf(secrets.at(-1)!, row, named), named]).toString('base64url');
}

/**
 * What a token unsubscribes, once its MAC verifies under one of the secrets; otherwise an `UnsubscribeTokenError`
 * saying whether it is malformed or its signature is not this app's (forged, altered, or signed with a retired key).
 */
export function readUnsubscribeToken(secrets: readonly string[], token: unknown): UnsubscribeRequest {
  if (typeof token !== 'string' || token.length === 0) throw malformed('the link has no token');
  const bytes = token.length <= LONGEST_TOKEN && BASE64URL.test(token) ? Buffer.from(token, 'base64url') : null;
  // Re-encoded, it must read the same: trailing bits that base64url drops would let one token take several forms.
  if (!bytes || bytes.length <= HEADER_BYTES || bytes.toString('base64url') !== token) {
    throw malformed('its token is not one this app makes');
  }
  const row = bytes.subarray(0, ROW_ID_BYTES);
  const named = bytes.subarray(HEADER_BYTES);
  const given = bytes.subarray(ROW_ID_BYTES, HEADER_BYTES);
  if (!secrets.some((secret) => timingSafeEqual(macOf(secret, row, named), given))) {
    throw new UnsubscribeTokenError(
      'its signature does not verify: it was altered, made for another address or category, or signed with a key this app no longer has',
    );
  }
  // Signed by this app, so as it wrote it; read with care all the same, in case a key leaked.
  let text: string;
  try {
    text = utf8.decode(named);
  } catch {
    throw malformed('its token does not name an address');
  }
  const newline = text.indexOf('\n');
  const category = text.slice(0, newline);
  const address = text.slice(newline + 1);
  if (newline < 1 || !address.includes('@')) throw malformed('its token does not name an address');
  return { rowId: uuidOf(row), category, address };
}

function malformed(why: string): UnsubscribeTokenError {
  return new UnsubscribeTokenError(`the link is malformed: ${why}`);
}

function macOf(secret: string, row: Buffer, named: Buffer): Buffer {
  return createHmac('sha256', secret).update(MAC_CONTEXT).update(row).update(named).digest().subarray(0, MAC_BYTES);
}

function uuidOf(bytes: Buffer): string {
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
