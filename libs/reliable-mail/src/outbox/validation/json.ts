import { MailValidationError } from '../../errors.js';
import type { JsonValue } from '../mail.types.js';
import { isStorableDate, unstorableIn } from '../../database/storable.js';
import { fieldPath } from '../../shared/characters.js';

/**
 * How deep parameters, metadata or a metadata filter may nest. PostgreSQL parses jsonb recursively and refuses a
 * value nested deeper than its stack allows ("stack depth limit exceeded": between 10,000 and 50,000 levels at the
 * default max_stack_depth of 2 MB, about 20 times fewer at its 100 kB minimum), and so does this walk in
 * JavaScript at some thousands; no mail's data needs more than a few levels.
 */
export const MAX_JSON_DEPTH = 100;

export interface JsonRules {
  /**
   * For a containment filter (`@>`), where every value must narrow the match: an undefined (which JSON drops, so
   * that `{ orderId: undefined }` would become `{}`) and an empty object or array (which every object or array
   * contains) are refused instead of matching more rows than named.
   */
  narrowing?: boolean;
}

/**
 * The value as it will be stored: plain JSON, with a Date as its ISO string (what JSON makes of it). Anything JSON
 * would silently drop or mangle (a function, a class instance, NaN, a bigint, a cycle), text or a date PostgreSQL
 * cannot store, and nesting deeper than `MAX_JSON_DEPTH` are refused.
 */
export function toJsonValue(field: string, value: unknown, rules: JsonRules = {}): JsonValue {
  return jsonOf(field, value, rules, new Set(), 0);
}

function jsonOf(field: string, value: unknown, rules: JsonRules, seen: Set<object>, depth: number): JsonValue {
  if (typeof value === 'string') return checkStorable(field, value);
  if (value === null || typeof value === 'boolean') return value;
  if (typeof value === 'number') {
    if (!Number.isFinite(value))
      throw new MailValidationError(field, `must be plain JSON: ${value} is not a finite number`);
    return value;
  }
  if (value instanceof Date) {
    if (Number.isNaN(value.getTime())) throw new MailValidationError(field, 'must be plain JSON: the Date is invalid');
    if (rules.narrowing && !isStorableDate(value)) {
      throw new MailValidationError(field, 'must be a Date within the years 1 to 9999, as rows store them');
    }
    return value.toISOString();
  }
  if (value === undefined && rules.narrowing) {
    throw new MailValidationError(field, 'is undefined, which JSON drops: the filter would match more than it names');
  }
  if (typeof value !== 'object') {
    throw new MailValidationError(field, `must be plain JSON: a ${typeof value} cannot be stored`);
  }
  if (seen.has(value)) throw new MailValidationError(field, 'must be plain JSON: it refers to itself');
  if (depth >= MAX_JSON_DEPTH) {
    throw new MailValidationError(field, `nests deeper than ${MAX_JSON_DEPTH} levels, more than can be stored`);
  }
  seen.add(value);
  try {
    if (Array.isArray(value)) {
      if (rules.narrowing && value.length === 0)
        throw new MailValidationError(field, 'is an empty array, which every array contains: it narrows nothing');
      return value.map((item, index) => jsonOf(`${field}[${index}]`, item, rules, seen, depth + 1));
    }
    const prototype = Object.getPrototypeOf(value) as { constructor?: { name?: string } } | null;
    if (prototype !== Object.prototype && prototype !== null) {
      throw new MailValidationError(
        field,
        `must be plain JSON: a ${prototype?.constructor?.name ?? 'class instance'} cannot be stored`,
      );
    }
    const result: Record<string, JsonValue> = {};
    const entries = Object.entries(value);
    if (rules.narrowing && entries.length === 0)
      throw new MailValidationError(field, 'is an empty object, which every object contains: it narrows nothing');
    for (const [key, item] of entries) {
      if (item === undefined && !rules.narrowing) continue;
      checkStorable(`${field} key ${JSON.stringify(key)}`, key);
      result[key] = jsonOf(fieldPath(field, key), item, rules, seen, depth + 1);
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
