// A statement can fail in two ways that call for opposite answers. The connection, the server's state or a timeout
// fails every statement alike, and the same statement succeeds once that passes: it is retried as it is. Or the
// server read the statement and refused what it carried: it would refuse the same values every time, and in a batch
// one such value fails every other row with it, so the batch is split and the value replaced.

/**
 * The SQLSTATE classes in which PostgreSQL refuses a statement for its values: 22 data exception (invalid text
 * representation, a lone surrogate or NUL in json, a number or timestamp out of range), 23 integrity constraint
 * violation (a check, not-null or foreign key), 54 program limit exceeded (a value too large for a jsonb or an
 * index). Not class 42 (a syntax error, a missing table or column, a privilege): the statement itself is at fault,
 * the same for every row of a batch and for each row alone, as during a deploy that has not migrated yet.
 */
const REFUSED_VALUE_CLASSES = new Set(['22', '23', '54']);

/** A five-character SQLSTATE (`22P02`); Node's own codes (`ECONNRESET`, `EPIPE`) are not one of its classes. */
const SQLSTATE = /^[0-9A-Z]{5}$/;

/**
 * Whether PostgreSQL answered `error` and refused the statement for the values it carried, as it would again. False
 * for a lost or refused connection (08), an administrator's shutdown or a cancelled statement (57), a serialization
 * failure or deadlock (40), a lack of resources (53), a client-side timeout or any error without a SQLSTATE.
 */
export function refusedForItsValues(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' && SQLSTATE.test(code) && REFUSED_VALUE_CLASSES.has(code.slice(0, 2));
}
