import { createHash } from 'node:crypto';

// The one boundary every value crosses on its way to PostgreSQL. Text and jsonb refuse NUL and a lone UTF-16
// surrogate (half of a character, which a `slice` or a decoder can leave), and a timestamp outside the years 1–9999
// in the ISO form JavaScript writes (`+010000-…`, `-000001-…`) is an error. One such value fails the whole statement,
// and with it every row of a batch: what the library writes itself is made storable here, and what a caller gives
// is refused before any SQL runs (`unstorableIn`, `isStorableDate`).

/**
 * What in a string PostgreSQL cannot store (NUL, a lone surrogate), named for an error; null when it can. Caught at
 * enqueue, it is a validation error, not a database error that would abort the caller's transaction.
 */
export function unstorableIn(value: string): string | null {
  if (value.includes('\0')) return 'a NUL character';
  // A string is well formed when it has no UTF-16 surrogate without its pair (no character at all): the engine's own
  // check, which reads long text several times faster than a regular expression with lookarounds.
  if (!value.isWellFormed()) return 'a lone UTF-16 surrogate (half of a character)';
  return null;
}

/** `value` as PostgreSQL can store it: NUL removed, a lone surrogate replaced by U+FFFD. */
export function storableText(value: string): string {
  return value.includes('\0') ? value.replaceAll('\0', '').toWellFormed() : value.toWellFormed();
}

/**
 * `value` cut to at most `maxLength` UTF-16 code units, an ellipsis included, on a character's boundary: a cut
 * between the two halves of a character would leave one half, which PostgreSQL refuses.
 */
export function cutText(value: string, maxLength: number): string {
  if (value.length <= maxLength) return value;
  let end = maxLength - 1;
  const last = value.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end -= 1;
  return `${value.slice(0, end)}…`;
}

/** The longest address, in characters (RFC 5321 §4.5.3.1.3: a path is at most 256 octets, its brackets included). */
const LONGEST_ADDRESS = 254;

/**
 * The characters that end an address where it stands in a server's text (white space, brackets, double quotes,
 * punctuation), as a character class's body: the log's and the console's redaction (shared/logged-reply.ts) read
 * words by them too. Not braces or apostrophes, which RFC 5322 allows in a local part (`ann{shop}@example.com`,
 * `o'brien@example.com`): read as ends, they left such an address whole in the log, or its domain.
 */
export const ADDRESS_DELIMITERS = String.raw`\s<>()[\]",;:`;
const WORD_END = new RegExp(`[${ADDRESS_DELIMITERS}]`);
const isWordEnd = (char: string | undefined): boolean => char !== undefined && WORD_END.test(char);

/**
 * Outside text (a server's reply, a report's diagnostic) cut as `cutText` cuts it, but before the word the cut would
 * fall in when that word could hold an address: a part of one (`<john.smith…`) is no address to the redaction of the
 * log and the console, which redact a whole word with an `@` in it and would show the part. So the word goes when its
 * part before the cut is short enough to be an address, or an `@` follows within an address's length after the cut
 * (`?rcpt=john.smith@…` in a long URL); any other long word is cut where it is.
 */
export function cutAtWord(value: string, maxLength: number): string {
  if (value.length <= maxLength) return value;
  const kept = maxLength - 1;
  if (kept === 0 || isWordEnd(value[kept]) || isWordEnd(value[kept - 1])) return cutText(value, maxLength);
  let start = kept - 1;
  while (start > 0 && !isWordEnd(value[start - 1])) start--;
  if (kept - start <= LONGEST_ADDRESS || addressFollows(value, kept)) return `${value.slice(0, start)}…`;
  return cutText(value, maxLength);
}

/** Whether an `@` comes in the word at `from` within an address's length: the word names an address after `from`. */
function addressFollows(value: string, from: number): boolean {
  const end = Math.min(value.length, from + LONGEST_ADDRESS);
  for (let index = from; index < end && !isWordEnd(value[index]); index++) if (value[index] === '@') return true;
  return false;
}

/** The first and last instants PostgreSQL reads back from `Date.prototype.toISOString()`: years 1 to 9999. */
export const EARLIEST_STORABLE_DATE = new Date('0001-01-01T00:00:00.000Z');
export const LATEST_STORABLE_DATE = new Date('9999-12-31T23:59:59.999Z');

/** A valid Date within the years PostgreSQL stores as JavaScript writes them. */
export function isStorableDate(value: unknown): value is Date {
  if (!(value instanceof Date)) return false;
  const time = value.getTime();
  return time >= EARLIEST_STORABLE_DATE.getTime() && time <= LATEST_STORABLE_DATE.getTime();
}

/** `value` when it can be stored, else null (an invalid or out-of-range date a peer sent). */
export const storableDateOrNull = (value: Date | null | undefined): Date | null =>
  isStorableDate(value) ? value : null;

/** What `JSON.stringify` writes for a lone surrogate (`\ud800`) or NUL (`\u0000`). */
const UNSTORABLE_ESCAPE = /\\u(0000|d[89a-f][0-9a-f]{2})/i;
/** A Date's JSON for a year beyond 9999 or before 1 (`+010000-01-01T00:00:00.000Z`): no column or cast takes it. */
const UNSTORABLE_DATE = /^([+-]\d{6}|0000)-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
const UNSTORABLE_DATE_IN_JSON = /"([+-]\d{6}|0000)-\d\d-\d\dT/;

/**
 * The JSON of `value` as a jsonb parameter takes it: every string and key made storable, and a Date outside the
 * storable years written as null. The walk that does so is slow, so it runs only when the plain JSON shows such an
 * escape or date.
 */
export function storableJson(value: unknown): string {
  const json = JSON.stringify(value);
  if (json === undefined || (!UNSTORABLE_ESCAPE.test(json) && !UNSTORABLE_DATE_IN_JSON.test(json))) return json;
  return JSON.stringify(storableTree(JSON.parse(json) as unknown));
}

function storableTree(value: unknown): unknown {
  if (typeof value === 'string') return UNSTORABLE_DATE.test(value) ? null : storableText(value);
  if (Array.isArray(value)) return value.map(storableTree);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(Object.entries(value).map(([key, item]) => [storableText(key), storableTree(item)]));
}

/**
 * A peer's identifiers and keys are measured in UTF-8 bytes once made storable, as the index holds them: a btree
 * entry holds at most 2,704 bytes for all its columns, and a longer one fails the insert, and with it the
 * statement (a megabyte-long "message id" failed the settle of its row). An identifier that must match another (a
 * provider's message or request id, a queue id: the longest any provider sends is about 70 bytes) is none past
 * `MAX_IDENTIFIER_BYTES`, since cut it would match nothing; a key that must only stay unique (a report's dedupe
 * key) is kept past `MAX_KEY_BYTES` as its SHA-256 (`sha256:<hex>`), as unique as the value was.
 */
export const MAX_IDENTIFIER_BYTES = 255;
const MAX_KEY_BYTES = 512;

/** A peer's identifier as PostgreSQL can store and index it, or null when it is none (see above). */
export function storableIdentifier(value: string | null | undefined): string | null {
  if (value === null || value === undefined) return null;
  const stored = storableText(value);
  return Buffer.byteLength(stored) > MAX_IDENTIFIER_BYTES ? null : stored;
}

/** `value` as a column of a unique index takes it: storable, and as it is when short, else its SHA-256 (see above). */
export function indexableKey(value: string): string {
  const stored = storableText(value);
  return Buffer.byteLength(stored) <= MAX_KEY_BYTES
    ? stored
    : `sha256:${createHash('sha256').update(stored).digest('hex')}`;
}
