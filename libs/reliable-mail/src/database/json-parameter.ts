/**
 * PostgreSQL's jsonb refuses \u0000, which a server reply or an error message may carry: drop it. The replacer that
 * does so is slow, so it runs only when the plain JSON shows the escape (or a backslash followed by "u0000").
 */
export function jsonWithoutNul(value: unknown): string {
  const json = JSON.stringify(value);
  if (!json.includes('\\u0000')) return json;
  return JSON.stringify(value, (_key, item: unknown) => (typeof item === 'string' ? item.replaceAll('\0', '') : item));
}
