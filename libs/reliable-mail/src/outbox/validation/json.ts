import { MailValidationError } from '../../errors.js';
import type { JsonValue } from '../mail.types.js';
import { unstorableIn } from '../../database/storable.js';
import { fieldPath } from '../../shared/characters.js';

/**
 * The parameters as they will be stored: plain JSON, with a Date as its ISO string (what JSON makes of it).
 * Anything JSON would silently drop or mangle (a function, a class instance, NaN, a bigint, a cycle) is refused.
 */
export function toJsonValue(field: string, value: unknown, seen: Set<object>): JsonValue {
  if (typeof value === 'string') return checkStorable(field, value);
  if (value === null || typeof value === 'boolean') return value;
  if (typeof value === 'number') {
    if (!Number.isFinite(value))
      throw new MailValidationError(field, `must be plain JSON: ${value} is not a finite number`);
    return value;
  }
  if (value instanceof Date) {
    if (Number.isNaN(value.getTime())) throw new MailValidationError(field, 'must be plain JSON: the Date is invalid');
    return value.toISOString();
  }
  if (typeof value !== 'object') {
    throw new MailValidationError(field, `must be plain JSON: a ${typeof value} cannot be stored`);
  }
  if (seen.has(value)) throw new MailValidationError(field, 'must be plain JSON: it refers to itself');
  seen.add(value);
  try {
    if (Array.isArray(value)) return value.map((item, index) => toJsonValue(`${field}[${index}]`, item, seen));
    const prototype = Object.getPrototypeOf(value) as { constructor?: { name?: string } } | null;
    if (prototype !== Object.prototype && prototype !== null) {
      throw new MailValidationError(
        field,
        `must be plain JSON: a ${prototype?.constructor?.name ?? 'class instance'} cannot be stored`,
      );
    }
    const result: Record<string, JsonValue> = {};
    for (const [key, item] of Object.entries(value)) {
      if (item === undefined) continue;
      checkStorable(`${field} key ${JSON.stringify(key)}`, key);
      result[key] = toJsonValue(fieldPath(field, key), item, seen);
    }
    return result;
  } finally {
    seen.delete(value);
  }
}

/** Refuses a string PostgreSQL could not store, naming what in it; returns it otherwise. */
export function checkStorable(field: string, value: string): string {
  const problem = unstorableIn(value);
  if (problem) throw new MailValidationError(field, `contains ${problem}, which cannot be stored`);
  return value;
}
