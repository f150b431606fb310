import { createHash } from 'node:crypto';
import type { JsonValue, MailPayload } from '../mail.types.js';

/**
 * What the idempotency hash of a payload covers: what the caller said, not what reliable-mail chose. The template
 * version is left out (the same enqueue after a new version is registered is the same mail), the order of the
 * parameters' keys does not matter, and a plain mail hashes as its v1 form did (a key used before the upgrade
 * still matches its row).
 */
export function hashableContent(payload: MailPayload): unknown {
  if (payload.v !== 2) return payload;
  const { template, ...rest } = payload;
  const hashable: Record<string, unknown> = { ...rest, v: template || rest.attachments ? 2 : 1 };
  if (template)
    hashable.template = { name: template.name, params: sortedKeys(template.params), locale: template.locale };
  return hashable;
}

/** The same JSON with the keys of every object in order, so that `{ a, b }` and `{ b, a }` are one mail. */
function sortedKeys(value: JsonValue): JsonValue {
  if (Array.isArray(value)) return value.map(sortedKeys);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(
    Object.keys(value)
      .sort()
      .map((key) => [key, sortedKeys(value[key])]),
  );
}

/**
 * A stable fingerprint of what the mail says and how it is to be sent, to tell a retried enqueue from another mail.
 * Only a row with an idempotency key is ever compared, so only such a row gets one.
 */
export function contentHashOf(payload: MailPayload, lane: string): string {
  return createHash('sha256')
    .update(JSON.stringify([hashableContent(payload), lane]))
    .digest('base64url');
}
