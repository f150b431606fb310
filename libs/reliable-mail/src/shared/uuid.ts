/** A UUID as text, any version: a row's id, in a Message-ID, a VERP address or an operator's filter. */
export const UUID_SOURCE = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';

const UUID_PATTERN = new RegExp(`^${UUID_SOURCE}$`, 'i');

/** Whether `value` is a UUID: anything else cannot be a row's id, and is not sent to PostgreSQL as one. */
export function isUuid(value: unknown): boolean {
  return typeof value === 'string' && UUID_PATTERN.test(value);
}
