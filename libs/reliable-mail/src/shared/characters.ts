// Character rules shared by every check of what a caller gives: a value that reaches a header or a file name, and
// a key that becomes part of a field path in an error.

/** CR, LF or NUL: in a header value, subject or display name they would start a header of their own. */
export const LINE_BREAK_OR_NUL = /[\r\n\0]/;

/** Any C0 control character or DEL, refused in file names and attachment references. */
// eslint-disable-next-line no-control-regex -- control characters are exactly what this pattern finds
export const CONTROL_CHARACTER = /[\0-\x1f\x7f]/;

/** A UTF-16 surrogate without its pair: no character at all, and PostgreSQL refuses it in text and JSON. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * What in a string PostgreSQL cannot store (NUL, a lone surrogate), named for an error; null when it can. Caught at
 * enqueue, it is a validation error, not a database error that would abort the caller's transaction.
 */
export function unstorableIn(value: string): string | null {
  if (value.includes('\0')) return 'a NUL character';
  if (LONE_SURROGATE.test(value)) return 'a lone UTF-16 surrogate (half of a character)';
  return null;
}

/** A key that reads as `a.b` in a field path; any other is written `a["b c"]`. */
const IDENTIFIER = /^[A-Za-z_$][\w$]*$/;

/** The path of `key` below `parent`, as a `MailValidationError` names a field. */
export function fieldPath(parent: string, key: string): string {
  return IDENTIFIER.test(key) ? `${parent}.${key}` : `${parent}[${JSON.stringify(key)}]`;
}
