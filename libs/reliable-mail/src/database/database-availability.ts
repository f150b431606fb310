import { sqlStateOf, StatementNotSentError } from './statement-refusal.js';

// A database outage is one fact, however many statements it fails: every background task of the instance (each
// lane's claim at every poll, event redelivery, the heartbeat, settles, retention, metrics) meets it at once, and a
// line for each failure made several error lines a second of it. OutboxDatabase, which runs every one of their
// statements, feeds each statement's result to one `DatabaseAvailability` and logs when an outage begins and when it
// ends; the tasks leave out of their own logs the failures it has reported (`reportedAsOutage`), and log any other
// failure (a statement refused, a bug) as before.

/**
 * SQLSTATE classes in which the server says it can serve no statement now, whatever the statement: 08 connection
 * exception, 53 insufficient resources (too many connections, a full disk), 57 operator intervention (shutting
 * down, starting up; but not 57014, one statement cancelled by its timeout) and 58 system error (I/O).
 */
const OUTAGE_CLASSES = new Set(['08', '53', '57', '58']);
/** A statement cancelled by `statement_timeout`: that statement's fault or the load, and the server answered. */
const STATEMENT_TIMEOUT = '57014';
/** A read-only transaction: a hot standby or a demoted primary, which takes none of the dispatcher's writes. */
const READ_ONLY = '25006';

/**
 * No connection came in time because every connection of the pool was running a statement (`database.poolSize`):
 * the database answers, slowly or under the app's own load. No outage: the statements holding the connections report
 * one if their server went silent.
 */
export class PoolExhaustedError extends StatementNotSentError {}

/**
 * Node's codes for a socket that could not connect or was lost (the `code` of its error). Other errors without a
 * SQLSTATE are pg's own faults (a value its `prepareValue` could not serialize, a row it could not parse) or the
 * app's, which the database being there or not does not change.
 */
const SOCKET_FAILURES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
]);
/**
 * pg's messages for a statement that lost its connection or whose answer never came: the socket closed under it, the
 * client-side `query_timeout` passed, or the client had already lost its connection.
 */
const CONNECTION_LOST =
  /^(Connection terminated|Query read timeout$|Client has encountered a connection error|Client was closed)/;

/** Whether `error`, which carries no SQLSTATE, says that the connection failed rather than the statement. */
function connectionFailed(error: unknown): boolean {
  if (error instanceof PoolExhaustedError) return false;
  // From the pool's connect (a refusal, a timeout, the server's FATAL at startup) or no time left after giving up
  // connections gone silent: see OutboxDatabase.
  if (error instanceof StatementNotSentError) return true;
  // Not `instanceof Error`: Node's own errors (a socket's) may come from another realm than pg's (a vm, jest).
  if (typeof error !== 'object' || error === null) return false;
  const { code, message } = error as { code?: unknown; message?: unknown };
  if (typeof code === 'string' && SOCKET_FAILURES.has(code)) return true;
  return typeof message === 'string' && CONNECTION_LOST.test(message);
}

/**
 * Whether a statement of reliable-mail's pool that failed with `error` met a database it cannot use now: the
 * statement never left (no connection), no answer came (a socket error, a client-side timeout), or the server
 * answered that it serves no statement (see `OUTAGE_CLASSES`). False for an answer about the statement itself (a
 * refused value, a missing table, a serialization failure, a timeout): the database is there; and for a fault of pg's
 * or a full pool, which say nothing of the database.
 */
export function isOutage(error: unknown): boolean {
  const code = sqlStateOf(error);
  if (code === null) return connectionFailed(error);
  if (code === STATEMENT_TIMEOUT) return false;
  return code === READ_ONLY || OUTAGE_CLASSES.has(code.slice(0, 2));
}

/** The failures whose outage has been reported: weakly held, so that an error forgotten by its task goes. */
const reported = new WeakSet<object>();

/**
 * Whether `error` failed a statement during an outage of the database that has been reported as such: the task that
 * met it logs nothing of its own.
 */
export function reportedAsOutage(error: unknown): boolean {
  return typeof error === 'object' && error !== null && reported.has(error);
}

/** What to log when the database's availability changes: the first failure of an outage, or its end. */
export type AvailabilityChange =
  { kind: 'unavailable'; error: string } | { kind: 'available'; unavailableForMs: number; failedMeanwhile: number };

/**
 * How long an outage must have failed no statement, with one answered since, before it is over. A database that fails
 * only some statements (a standby refusing the writes while it answers the reads, new connections refused while the
 * open ones work) would otherwise end its outage at every answer and begin it again at the next failure, a pair of
 * lines per poll. Five times the default poll interval, and short enough that a recovered database is said to be so
 * within seconds.
 */
export const RECOVERY_QUIET_MS = 5_000;

/**
 * Whether the database answers reliable-mail's statements, from the outcome of each (times on any clock the caller
 * keeps to, in ms). The first failure of an outage is a change to report; the others are only counted, until
 * statements are answered and none has met the outage for `quietMs`.
 */
export class DatabaseAvailability {
  private since: number | null = null;
  /** When a statement last met the outage under way. */
  private lastFailureAt = 0;
  /** When a statement was first answered after the outage's last failure; null until one is. */
  private answeredAgainAt: number | null = null;
  private failedMeanwhile = 0;

  constructor(private readonly quietMs = RECOVERY_QUIET_MS) {}

  /** When the outage under way began, or null while the database answers. */
  get unavailableSince(): number | null {
    return this.since;
  }

  /**
   * A statement was answered (any answer but one of `isOutage`'s): the end of an outage under way once it has met no
   * failure for `quietMs`; how long it lasted runs to the first answer after its last failure.
   */
  answered(now: number): AvailabilityChange | null {
    if (this.since === null) return null;
    this.answeredAgainAt ??= now;
    if (now - this.lastFailureAt < this.quietMs) return null;
    const change = {
      kind: 'available' as const,
      unavailableForMs: this.answeredAgainAt - this.since,
      failedMeanwhile: this.failedMeanwhile,
    };
    this.since = null;
    this.answeredAgainAt = null;
    this.failedMeanwhile = 0;
    return change;
  }

  /**
   * A statement failed with `error`: the beginning of an outage, one more failure of it, or an answer after all. A
   * failure that says nothing of the database (a fault of pg's, a full pool) changes nothing; a full pool during an
   * outage is one of its failures, and its task logs nothing of its own.
   */
  failed(error: unknown, now: number): AvailabilityChange | null {
    if (isOutage(error)) return this.outageFailed(error, now);
    if (sqlStateOf(error) !== null) return this.answered(now);
    if (error instanceof PoolExhaustedError && this.since !== null) {
      reported.add(error);
      this.failedMeanwhile += 1;
    }
    return null;
  }

  private outageFailed(error: unknown, now: number): AvailabilityChange | null {
    if (typeof error === 'object' && error !== null) reported.add(error);
    this.lastFailureAt = now;
    this.answeredAgainAt = null;
    if (this.since !== null) {
      this.failedMeanwhile += 1;
      return null;
    }
    this.since = now;
    return { kind: 'unavailable', error: String(error) };
  }
}
