// A statement can fail in three ways that call for different answers. It never left (no connection in time, none at
// all, no time left for it): nothing happened. The connection, the server's state or a timeout fails every statement
// alike, and the same statement succeeds once that passes: it is retried as it is, and one whose answer never came
// may have run all the same. Or the server read the statement and refused what it carried: it would refuse the same
// values every time, and in a batch one such value fails every other row with it, so the batch is split and the
// value replaced.

/**
 * A statement of reliable-mail's own connections that never reached the server: no connection in time, none at all
 * (refused, the pool closed at shutdown), or no time left for it under its caller's bound.
 */
export class StatementNotSentError extends Error {
  override readonly name = 'StatementNotSentError';
}

/**
 * The SQLSTATE classes in which PostgreSQL refuses a statement for its values: 22 data exception (invalid text
 * representation, a lone surrogate or NUL in json, a number or timestamp out of range), 23 integrity constraint
 * violation (a check, not-null or foreign key), 54 program limit exceeded (a value too large for a jsonb or an
 * index). Not class 42 (a syntax error, a missing table or column, a privilege): the statement itself is at fault,
 * the same for every row of a batch and for each row alone, as during a deploy that has not migrated yet.
 */
const REFUSED_VALUE_CLASSES = new Set(['22', '23', '54']);

/** A five-character SQLSTATE (`22P02`): digits and capitals. */
const SQLSTATE = /^[0-9A-Z]{5}$/;

/**
 * The SQLSTATE PostgreSQL answered `error` with, or null when it is not the server's answer (a socket error, pg's
 * client-side timeout, a statement never sent). A few of Node's own codes have a SQLSTATE's shape (`EPIPE`, `EBADF`):
 * Node's errors carry an `errno`, which PostgreSQL's never do.
 */
export function sqlStateOf(error: unknown): string | null {
  if (typeof error !== 'object' || error === null) return null;
  const { code, errno } = error as { code?: unknown; errno?: unknown };
  return typeof code === 'string' && SQLSTATE.test(code) && errno === undefined ? code : null;
}

/**
 * Whether PostgreSQL answered `error` and refused the statement for the values it carried, as it would again. False
 * for a lost or refused connection (08), an administrator's shutdown or a cancelled statement (57), a serialization
 * failure or deadlock (40), a lack of resources (53), a client-side timeout or any error without a SQLSTATE.
 */
export function refusedForItsValues(error: unknown): boolean {
  const code = sqlStateOf(error);
  return code !== null && REFUSED_VALUE_CLASSES.has(code.slice(0, 2));
}

/**
 * Whether a statement that failed with `error` may have committed all the same, its answer lost: it left, and no
 * answer came (no SQLSTATE), or the session was ended (a FATAL error, such as an administrator's
 * `pg_terminate_backend`), which may come after the commit. An error PostgreSQL answered (a timeout it cancelled,
 * a serialization failure) rolled the statement back, and one never sent did nothing.
 */
export function mayHaveCommittedUnanswered(error: unknown): boolean {
  if (error instanceof StatementNotSentError) return false;
  if (sqlStateOf(error) === null) return true;
  const { severity } = error as { severity?: unknown };
  return severity === 'FATAL' || severity === 'PANIC';
}
