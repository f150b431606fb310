import { createHash } from 'node:crypto';

/** A version that is the hash of a template's sources: `sha256:` and the first 16 hex digits (64 bits) of it. */
export const SOURCE_HASH_PATTERN = /^sha256:[0-9a-f]{16}$/;

/** JSON with every object's keys in order, so that equal values serialise alike however they were built. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value)
      .filter(([, entry]) => entry !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([key, entry]) => `${JSON.stringify(key)}:${canonicalJson(entry)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/**
 * The version of a template made from `sources`: any change to any of them (a character of a partial, a setting
 * stored with them) gives another. 64 bits: two versions of one template name colliding is not a practical risk.
 */
export function sourceHash(sources: unknown): string {
  return `sha256:${createHash('sha256').update(canonicalJson(sources)).digest('hex').slice(0, 16)}`;
}
