import { isStorableDate } from '../database/storable.js';
import { FeedbackPayloadError } from '../errors.js';
import type { BounceType, FeedbackKind } from '../outbox/feedback.types.js';
import { ENHANCED_STATUS_SOURCE } from '../shared/enhanced-status.js';
import { UUID_SOURCE } from '../shared/uuid.js';

// What every source's parser makes of a report, and the helpers they share to read it.

/** One recipient's feedback, as a source's parser reads it from a report. */
export interface FeedbackItem {
  /** Lower case. */
  recipient: string;
  kind: FeedbackKind;
  bounceType: BounceType | null;
  providerEventId: string;
  providerMessageId: string | null;
  /** The row id the report names by a VERP address or a Message-ID (`messageId` is then the Message-ID). */
  rowId: string | null;
  messageId: string | null;
  status: string | null;
  diagnostic: string | null;
  reportedAt: Date;
  payload: Record<string, unknown>;
  /**
   * A hard bounce or a complaint that names its recipient for sure: it puts the recipient on the suppression list.
   * False where a report names several recipients and cannot say which of them it is about.
   */
  suppress: boolean;
  /**
   * Whether the report proves that it speaks for this recipient: a provider's webhook (verified before its record is
   * read), or a DSN whose VERP token verifies for its row and this recipient. Only then does `suppress` suppress.
   */
  authenticated: boolean;
}

/** What one request or DSN carried: feedback, or nothing to store and why (an open event, an auto-reply, …). */
export interface FeedbackReport {
  items: FeedbackItem[];
  ignored: string | null;
}

export const ignoredReport = (reason: string): FeedbackReport => ({ items: [], ignored: reason });

/** A report of these items, none ignored. */
export const feedbackReport = (items: FeedbackItem[]): FeedbackReport => ({ items, ignored: null });

const ROW_MESSAGE_ID = new RegExp(`^<(${UUID_SOURCE})@[^<>@\\s]+>$`, 'i');
const ENHANCED_STATUS = new RegExp(String.raw`(?<![\w.])(${ENHANCED_STATUS_SOURCE})(?!\.?\d)`);
// No `@` on either side of the one: with it, `<@@@…` without a `>` was read in quadratic time (64,000: 2 s).
const ANGLE_ADDRESS = /<([^<>\s@]+@[^<>\s@]+)>/;
/** RFC 5321 §4.5.3.1.3: a path is at most 256 octets, its angle brackets included. */
const MAX_ADDRESS_LENGTH = 254;
/**
 * The deepest nesting of a report's JSON taken: providers' payloads nest a few levels. A deeper one is refused,
 * since writing it back (JSON.stringify) or reading it into jsonb (PostgreSQL's stack depth) would fail.
 */
const MAX_JSON_DEPTH = 64;

/**
 * The row a Message-ID names: reliable-mail's are `<row id@messageIdDomain>`. The statement that links it also
 * checks the row's stored Message-ID, so a foreign one of the same shape links nothing.
 */
export function rowOfMessageId(messageId: string | null | undefined): Pick<FeedbackItem, 'rowId' | 'messageId'> {
  const trimmed = messageId?.trim() ?? '';
  const match = ROW_MESSAGE_ID.exec(trimmed);
  return match ? { rowId: match[1].toLowerCase(), messageId: trimmed } : { rowId: null, messageId: null };
}

/** The RFC 3463 status code in a diagnostic text (`smtp; 550 5.1.1 user unknown` gives `5.1.1`). */
export function statusIn(text: string | null | undefined): string | null {
  return text ? (ENHANCED_STATUS.exec(text)?.[1] ?? null) : null;
}

/**
 * The bare address, lower case, of `Ann <ann@example.com>`, `rfc822; ann@example.com` or `ann@example.com`; null
 * when there is no address.
 */
export function addressIn(text: string): string | null {
  const bare = ANGLE_ADDRESS.exec(text)?.[1] ?? text.replace(/^[\w-]+\s*;/, '').trim();
  return bare.length <= MAX_ADDRESS_LENGTH && BARE_ADDRESS.test(bare) ? bare.toLowerCase() : null;
}

/**
 * `local@domain` with no white space, control character, `;` or angle bracket: what a report names is read once,
 * and what it gives must read the same again (`rfc822;0;@!` is no address, not the address `0;@!`).
 */
// eslint-disable-next-line no-control-regex -- control characters are exactly what this pattern refuses
const BARE_ADDRESS = /^[^\s@;<>\0-\x1f\x7f]+@[^\s@;<>\0-\x1f\x7f]+$/;

// Reading untrusted JSON: each helper names the field it found missing or of the wrong type.

export function objectAt(value: unknown, field: string): Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new FeedbackPayloadError(`${field} must be an object`);
  }
  return value as Record<string, unknown>;
}

export function stringAt(value: unknown, field: string): string {
  if (typeof value !== 'string' || value.length === 0) throw new FeedbackPayloadError(`${field} must be a string`);
  return value;
}

export function optionalStringAt(value: unknown, field: string): string | null {
  return value === undefined || value === null ? null : stringAt(value, field);
}

export function arrayAt(value: unknown, field: string): unknown[] {
  if (!Array.isArray(value)) throw new FeedbackPayloadError(`${field} must be an array`);
  return value;
}

/** A date within the years PostgreSQL stores (1 to 9999): `+200000-01-01T00:00:00Z` is a date to JavaScript. */
export function dateAt(value: unknown, field: string): Date {
  const date = new Date(stringAt(value, field));
  if (Number.isNaN(date.getTime())) throw new FeedbackPayloadError(`${field} must be a date`);
  if (!isStorableDate(date)) throw new FeedbackPayloadError(`${field} must be a date within the years 1 to 9999`);
  return date;
}

export function recipientAt(value: unknown, field: string): string {
  const address = addressIn(stringAt(value, field));
  if (address === null) throw new FeedbackPayloadError(`${field} must be an email address`);
  return address;
}

/** Parses a JSON body; a verified body that is not JSON, or nests too deep, is a payload error. */
export function parseJson(body: string, reviver?: Parameters<typeof JSON.parse>[1]): unknown {
  let value: unknown;
  try {
    value = JSON.parse(body, reviver) as unknown;
  } catch (error) {
    throw new FeedbackPayloadError(`the body is not JSON (${(error as Error).message})`);
  }
  if (depthExceeds(value, MAX_JSON_DEPTH)) {
    throw new FeedbackPayloadError(`the body nests deeper than ${MAX_JSON_DEPTH} levels`);
  }
  return value;
}

/** Whether `value` nests objects and arrays deeper than `limit`; a walk of its own, as deep input would overflow a recursive one. */
function depthExceeds(value: unknown, limit: number): boolean {
  const pending: Array<[unknown, number]> = [[value, 0]];
  while (pending.length > 0) {
    const [item, depth] = pending.pop()!;
    if (item === null || typeof item !== 'object') continue;
    if (depth === limit) return true;
    for (const child of Object.values(item)) pending.push([child, depth + 1]);
  }
  return false;
}
