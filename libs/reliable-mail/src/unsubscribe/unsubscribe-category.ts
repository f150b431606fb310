import { MailValidationError } from '../errors.js';
import { shown } from '../shared/shown.js';

/**
 * A category of non-transactional mail, as a lane names it (its `category`, or its name): it is written into every
 * one-click link and every unsubscribe, so no unsubscribe holds any other.
 */
export const CATEGORY_PATTERN = /^[a-z][a-z0-9_-]{0,62}$/;

/** `value` as a category an unsubscribe can hold; `MailValidationError` naming `field` for anything else. */
export function checkCategory(field: string, value: unknown): string {
  if (typeof value !== 'string' || !CATEGORY_PATTERN.test(value)) {
    const given = value === undefined ? 'none' : shown(value);
    throw new MailValidationError(field, `must be a lane's category (${CATEGORY_PATTERN.source}), got ${given}`);
  }
  return value;
}
