import { MailValidationError, OutboxFilterError } from '../errors.js';
import { isStorableDate, unstorableIn } from '../database/storable.js';
import { OUTBOX_STATUSES, type OutboxStatus } from '../outbox/mail.types.js';
import type { OutboxFilter } from '../outbox/operations.types.js';
import type { SearchFilter } from '../outbox/sql/filter.js';
import { toJsonValue } from '../outbox/validation/json.js';
import { shown } from '../shared/shown.js';
import { isUuid } from '../shared/uuid.js';

// An operator's selection of rows, checked as the SQL will get it, before any SQL runs: a filter whose field
// narrows nothing once serialised would match every row (`{ metadata: { orderId: undefined } }` is `@> '{}'`, which
// purge then deletes), and a value PostgreSQL cannot take (NUL, a cursor that is no uuid, a date past 9999) would
// end in a raw database error, aborting the operator's transaction.

const STATUSES = new Set<OutboxStatus>(OUTBOX_STATUSES);

type Rule = (field: string, value: unknown) => unknown;

/** Text as PostgreSQL takes it: NUL is refused, and a lone surrogate would be sent as U+FFFD, another text. */
function storable(field: string, value: string): string {
  const problem = unstorableIn(value);
  if (problem) throw new OutboxFilterError(field, `contains ${problem}, which no row can hold`);
  return value;
}

/** Text that selects something: not blank, and storable. */
function text(expected: string): Rule {
  return (field, value) => {
    if (typeof value !== 'string' || value.trim().length === 0) {
      throw new OutboxFilterError(field, `must be ${expected}, got ${shown(value)}`);
    }
    return storable(field, value);
  };
}

const date: Rule = (field, value) => {
  if (!isStorableDate(value)) {
    throw new OutboxFilterError(field, `must be a valid Date within the years 1 to 9999, got ${shown(value)}`);
  }
  return value;
};

/** What each field of a filter must be, and the value its clause gets: an empty or null one would narrow nothing. */
const FIELDS: Record<keyof OutboxFilter, Rule> = {
  ids: (field, value) => {
    if (!Array.isArray(value) || value.length === 0 || !value.every((id) => isUuid(id))) {
      throw new OutboxFilterError(field, `must be a non-empty array of row ids, got ${shown(value)}`);
    }
    return value as string[];
  },
  status: (field, value) => {
    const statuses = Array.isArray(value) ? value : [value];
    if (statuses.length === 0 || !statuses.every((status) => STATUSES.has(status as OutboxStatus))) {
      throw new OutboxFilterError(
        field,
        `must be a status or a non-empty array of them (${[...STATUSES].join(', ')}), got ${shown(value)}`,
      );
    }
    return value;
  },
  lane: text('a lane name'),
  recipient: text('an address'),
  idempotencyKey: text('an idempotency key'),
  // Serialised here as enqueue stores metadata (a Date as its ISO string), and refused wherever the JSON would
  // narrow less than the object: an undefined value, an empty object or array, at any depth.
  metadata: (field, value) => {
    if (!value || typeof value !== 'object' || Array.isArray(value)) {
      throw new OutboxFilterError(field, `must be an object with at least one key, got ${shown(value)}`);
    }
    try {
      return toJsonValue(field, value, { narrowing: true });
    } catch (error) {
      if (error instanceof MailValidationError) throw new OutboxFilterError(error.field, error.reason);
      throw error;
    }
  },
  createdAfter: date,
  createdBefore: date,
};

/**
 * What only a search (the console's) finds rows by. A Message-ID of another shape than reliable-mail's is taken,
 * and matches no row: it is an answer (not ours), not a mistake in the filter.
 */
const SEARCH_FIELDS: Record<keyof SearchFilter, Rule> = {
  ...FIELDS,
  messageId: text('a Message-ID such as <id@domain>'),
  providerMessageId: text("a provider's message id"),
};

function checkFields<F extends object>(filter: F, verb: string | null, fields: Record<keyof F, Rule>): F {
  if (!filter || typeof filter !== 'object' || Array.isArray(filter)) {
    throw new OutboxFilterError('filter', 'must be an object such as { status: "dead" }');
  }
  const checked: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(filter)) {
    if (value === undefined) continue;
    const rule = fields[key as keyof F] as Rule | undefined;
    if (!rule)
      throw new OutboxFilterError(`filter.${key}`, `is not a filter field (${Object.keys(fields).join(', ')})`);
    checked[key] = rule(`filter.${key}`, value);
  }
  if (verb !== null && Object.keys(checked).length === 0) {
    throw new OutboxFilterError('filter', `must name the rows to ${verb} (an empty filter would match every row)`);
  }
  return checked as F;
}

/**
 * The operator's filter as its clauses will take it, or an `OutboxFilterError`: every field given must narrow the
 * set (`{ lane: '' }`, `{ status: null }` or `{ metadata: { orderId: undefined } }` would otherwise match every
 * row), and a verb that changes rows needs at least one field. A field whose value is `undefined` is not given.
 */
export function checkFilter(filter: OutboxFilter, verb: string | null): OutboxFilter {
  return checkFields(filter, verb, FIELDS);
}

/** A search's filter (or an action's on its rows), checked as `checkFilter` checks the admin's, with its fields. */
export function checkSearchFilter(filter: SearchFilter, verb: string | null = null): SearchFilter {
  return checkFields(filter, verb, SEARCH_FIELDS);
}

/** A page's size: a whole number from 1, `fallback` when not given, at most `max` (a larger one is cut to it). */
export function checkLimit(field: string, value: unknown, fallback: number, max: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1) {
    throw new OutboxFilterError(field, `must be a whole number of rows from 1, got ${shown(value)}`);
  }
  return Math.min(value, max);
}

/** A page's cursor on rows: the id of the last row of the page before, as it came. */
export function checkRowId(field: string, value: unknown): string | undefined {
  if (value === undefined) return undefined;
  if (!isUuid(value)) {
    throw new OutboxFilterError(field, `must be a row id (the last id of the page before), got ${shown(value)}`);
  }
  return value as string;
}

/** A page's cursor on text (an address of the suppression list): any text PostgreSQL can compare. */
export function checkTextCursor(field: string, value: unknown): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string') throw new OutboxFilterError(field, `must be a string, got ${shown(value)}`);
  return storable(field, value);
}

/** A period [from, to) of creation times. */
export function checkPeriod(period: unknown): { from: Date; to: Date } {
  if (!period || typeof period !== 'object') throw new OutboxFilterError('period', 'must be { from: Date, to: Date }');
  const { from, to } = period as Record<string, unknown>;
  date('period.from', from);
  date('period.to', to);
  if ((to as Date).getTime() < (from as Date).getTime()) {
    throw new OutboxFilterError('period.to', `must not be before period.from, got ${shown(to)}`);
  }
  return { from: from as Date, to: to as Date };
}
