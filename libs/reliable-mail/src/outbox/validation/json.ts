import { MailValidationError } from '../../errors.js';
import type { JsonValue } from '../mail.types.js';
import { fieldPath } from '../../shared/characters.js';

/**
 * The parameters as they will be stored: plain JSON, with a Date as its ISO string (what JSON makes of it).
 * Anything JSON would silently drop or mangle (a function, a class instance, NaN, a bigint, a cycle) is refused.
 */
export function toJsonValue(field: string, value: unknown, seen: Set<object>): JsonValue {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return value;
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
      result[key] = toJsonValue(fieldPath(field, key), item, seen);
    }
    return result;
  } finally {
    seen.delete(value);
  }
}
