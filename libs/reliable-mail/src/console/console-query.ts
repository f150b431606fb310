import { OutboxFilterError } from '../errors.js';
import type { ConsoleFilter } from './console-data.types.js';

// The Mails view's URL as a filter. What the URL cannot say (a metadata value's type, a time zone) is settled here
// the same way every time, so that a shared link finds the same mails.

/** The Mails view's filter as the URL carries it, so that a link shows the same mails to whoever opens it. */
export interface MailsQuery {
  status?: string;
  lane?: string;
  recipient?: string;
  key?: string;
  messageId?: string;
  providerMessageId?: string;
  /** `name=value`: a value that reads as JSON (1234, true, "1234") is that value, any other is a string. */
  meta?: string;
  from?: string;
  to?: string;
  before?: string;
}

export const MAILS_QUERY_FIELDS: readonly (keyof MailsQuery)[] = [
  'status',
  'lane',
  'recipient',
  'key',
  'messageId',
  'providerMessageId',
  'meta',
  'from',
  'to',
];

/** `name=value`, the value as JSON where it reads as JSON (1234, true, "1234"), otherwise as the text it is. */
function metadataOf(text: string): Record<string, unknown> {
  const at = text.indexOf('=');
  if (at <= 0)
    throw new OutboxFilterError('meta', `must be name=value, such as orderId=1234, got ${JSON.stringify(text)}`);
  const name = text.slice(0, at).trim();
  const value = text.slice(at + 1).trim();
  try {
    const parsed: unknown = JSON.parse(value);
    if (parsed === null || typeof parsed !== 'object') return { [name]: parsed };
  } catch {
    // Not JSON: the text itself.
  }
  return { [name]: value };
}

/** A time as `datetime-local` sends it (no zone: read as UTC, as the console shows times), or any ISO 8601 time. */
function timeOf(field: string, text: string): Date {
  const date = new Date(/[zZ]|[+-]\d\d:?\d\d$/.test(text) ? text : `${text}Z`);
  if (Number.isNaN(date.getTime())) {
    throw new OutboxFilterError(field, `must be a time such as 2026-12-01T09:30 (UTC), got ${JSON.stringify(text)}`);
  }
  return date;
}

/** A query parameter given twice arrives as an array; the console's links give each once, so the first counts. */
function single(value: unknown): string | undefined {
  const first: unknown = Array.isArray(value) ? value[0] : value;
  return typeof first === 'string' && first.trim() !== '' ? first.trim() : undefined;
}

export function mailsQueryOf(query: Record<string, unknown>): MailsQuery {
  const read: MailsQuery = {};
  for (const name of [...MAILS_QUERY_FIELDS, 'before'] as const) {
    const value = single(query[name]);
    if (value !== undefined) read[name] = value;
  }
  return read;
}

/** The filter a Mails URL names; its values are checked again, as every filter is, by `checkFilter`. */
export function filterOf(query: MailsQuery): ConsoleFilter {
  const filter: ConsoleFilter = {};
  if (query.status) filter.status = query.status as ConsoleFilter['status'];
  if (query.lane) filter.lane = query.lane;
  if (query.recipient) filter.recipient = query.recipient;
  if (query.key) filter.idempotencyKey = query.key;
  if (query.messageId) filter.messageId = query.messageId;
  if (query.providerMessageId) filter.providerMessageId = query.providerMessageId;
  if (query.meta) filter.metadata = metadataOf(query.meta);
  if (query.from) filter.createdAfter = timeOf('from', query.from);
  if (query.to) filter.createdBefore = timeOf('to', query.to);
  return filter;
}
