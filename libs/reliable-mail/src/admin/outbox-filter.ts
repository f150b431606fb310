import { MailValidationError } from '../errors.js';
import { OUTBOX_STATUSES, type OutboxStatus } from '../outbox/mail.types.js';
import type { OutboxFilter } from '../outbox/operations.types.js';
import { isUuid } from '../shared/uuid.js';

const STATUSES = new Set<OutboxStatus>(OUTBOX_STATUSES);

const nonEmptyString = (value: unknown) => typeof value === 'string' && value.trim().length > 0;
const validDate = (value: unknown) => value instanceof Date && !Number.isNaN(value.getTime());

/** What each field of a filter must be: an empty or null value would otherwise narrow nothing. */
const FIELDS: Record<keyof OutboxFilter, { valid: (value: unknown) => boolean; expected: string }> = {
  ids: {
    valid: (value) => Array.isArray(value) && value.length > 0 && value.every((id) => isUuid(String(id))),
    expected: 'a non-empty array of row ids',
  },
  status: {
    valid: (value) => {
      const statuses = Array.isArray(value) ? value : [value];
      return statuses.length > 0 && statuses.every((status) => STATUSES.has(status as OutboxStatus));
    },
    expected: `a status or a non-empty array of them (${[...STATUSES].join(', ')})`,
  },
  lane: { valid: nonEmptyString, expected: 'a lane name' },
  recipient: { valid: nonEmptyString, expected: 'an address' },
  idempotencyKey: { valid: nonEmptyString, expected: 'an idempotency key' },
  metadata: {
    valid: (value) => !!value && typeof value === 'object' && !Array.isArray(value) && Object.keys(value).length > 0,
    expected: 'an object with at least one key',
  },
  createdAfter: { valid: validDate, expected: 'a valid Date' },
  createdBefore: { valid: validDate, expected: 'a valid Date' },
};

/**
 * Checks an operator's filter before it reaches SQL: every field given must narrow the set (`{ lane: '' }` or
 * `{ status: null }` would otherwise match every row), and a verb that changes rows needs at least one field.
 */
export function checkFilter(filter: OutboxFilter, verb: string | null): void {
  if (!filter || typeof filter !== 'object' || Array.isArray(filter)) {
    throw new MailValidationError('filter', 'must be an object such as { status: "dead" }');
  }
  const given = Object.entries(filter).filter(([, value]) => value !== undefined);
  for (const [key, value] of given) {
    const rule = FIELDS[key as keyof OutboxFilter];
    if (!rule)
      throw new MailValidationError(`filter.${key}`, `is not a filter field (${Object.keys(FIELDS).join(', ')})`);
    if (!rule.valid(value))
      throw new MailValidationError(`filter.${key}`, `must be ${rule.expected}, got ${JSON.stringify(value)}`);
  }
  if (verb !== null && given.length === 0) {
    throw new MailValidationError('filter', `must name the rows to ${verb} (an empty filter would match every row)`);
  }
}
