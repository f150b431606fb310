// Character rules shared by every check of what a caller gives: a value that reaches a header or a file name, and
// a key that becomes part of a field path in an error.

/** CR, LF or NUL: in a header value, subject or display name they would start a header of their own. */
export const LINE_BREAK_OR_NUL = /[\r\n\0]/;

/** Any C0 control character or DEL, refused in file names and attachment references. */
// eslint-disable-next-line no-control-regex -- control characters are exactly what this pattern finds
export const CONTROL_CHARACTER = /[\0-\x1f\x7f]/;

/** A key that reads as `a.b` in a field path; any other is written `a["b c"]`. */
const IDENTIFIER = /^[A-Za-z_$][\w$]*$/;

/** The path of `key` below `parent`, as a `MailValidationError` names a field. */
export function fieldPath(parent: string, key: string): string {
  return IDENTIFIER.test(key) ? `${parent}.${key}` : `${parent}[${JSON.stringify(key)}]`;
}
